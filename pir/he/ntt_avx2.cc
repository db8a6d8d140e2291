// The 32-bit NTT kernel for CPUs with AVX2 but no AVX-512 (compiled with -mavx2; called only
// after the CPU check in ntt.cc): ntt_avx512.cc's U32 lanes at 8 lanes a vector, q < 2^30 so
// that 4q < 2^32, in a 32-bit scratch that the first stage fills and the last pass empties.
// AVX2 has no two-source permute: the small stages shuffle, within 128-bit lanes where they can,
// all three in registers (U32Lanes8::ForwardSmallStages, InverseSmallStages).
#include <immintrin.h>

#include <cstring>

#include "pir/he/ntt.h"
#include "pir/he/ntt_lanes.h"
#include "pir/he/scratch.h"

namespace veil::he::internal {
namespace {

struct U32Lanes8 : U32Tables {
  using V = __m256i;
  static constexpr size_t kLanes = 8;
  explicit U32Lanes8(uint64_t q) : q(_mm256_set1_epi32(static_cast<int32_t>(q))) {}

  static V Load(const void* p) { return _mm256_loadu_si256(static_cast<const V*>(p)); }
  static void Store(void* p, V v) { _mm256_storeu_si256(static_cast<V*>(p), v); }
  // Eight 64-bit words below 2^32 as one vector of their low halves, and back.
  static V LoadNarrow(const uint64_t* p) {
    const __m256 lo = _mm256_castsi256_ps(Load(p)), hi = _mm256_castsi256_ps(Load(p + 4));
    // Elements 0, 2 of each 128-bit lane of lo, then of hi: words 0 1 4 5 2 3 6 7.
    return _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8);
  }
  static void StoreWide(uint64_t* p, V v) {
    Store(p, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
    Store(p + 4, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
  }
  static V Set1(Elem x) { return _mm256_set1_epi32(static_cast<int32_t>(x)); }
  static V Add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static V ReduceOnce(V a, V m) { return _mm256_min_epu32(a, _mm256_sub_epi32(a, m)); }
  static V ShoupVector(V w_shoup) { return w_shoup; }

  // a * w mod q in [0, 2q) for a < 2^32: quotient = floor(a * w' / 2^32) lane by lane.
  V MulShoupLazy(V a, V w, V w_shoup) const {
    const V even = _mm256_srli_epi64(_mm256_mul_epu32(a, w_shoup), 32);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(w_shoup, 32));
    const V quotient = _mm256_blend_epi32(even, odd, 0xAA);
    return _mm256_sub_epi32(_mm256_mullo_epi32(a, w), _mm256_mullo_epi32(quotient, q));
  }

  // The three small stages (half 4, 2, 1) of a block of 16 elements (two vectors, e0 .. e15)
  // in registers, one pass over the polynomial instead of three: the forward's with its final
  // reduction and store of the words, the inverse's from its load of the words. Instead of the
  // generic loop's Permute2 (two vpermd a vector), the block's halves are formed by shuffles,
  // in-lane where they can be, that also bring each stage's pairs from the last stage's X and
  // Y (lanes listed low to high, | between the 128-bit halves; the roots r_g of the block's
  // groups at each stage):
  //   forward  half 4: X = e0-3 | e8-11, Y = e4-7 | e12-15;          roots r0 x 4 | r1 x 4
  //            half 2: X = e0 e1 e4 e5 | e8 e9 e12 e13 (Y: e + 2);     r0 r0 r1 r1 | r2 r2 r3 r3
  //            half 1: X = e0 e4 e2 e6 | e8 e12 e10 e14 (Y: e + 1);    r0 r2 r1 r3 | r4 r6 r5 r7
  //   inverse  half 1: X = e0 e4 e8 e12 | e2 e6 e10 e14 (Y: e + 1);   r0 r2 r4 r6 | r1 r3 r5 r7
  //            half 2: X = e0 e4 e8 e12 | e1 e5 e9 e13 (Y: e + 2);    r0 r1 r2 r3 | r0 r1 r2 r3
  //            half 4: X = e0 e8 e2 e10 | e1 e9 e3 e11 (Y: e + 4);    r0 r1 r0 r1 | r0 r1 r0 r1
  // N = 4,096 on a 2-vCPU AMD EPYC (family 25, AVX2 only): 6.17 -> 5.69 us forward, 6.28 ->
  // 5.73 inverse, against a pass a stage (whose small stages took 9.2 to 11.8 cycles a vector,
  // the wide ones 6.8).
  static constexpr bool kOwnSmallStages = true;
  // Blocks a loop takes at once: the three stages of one block are a chain of dependent
  // multiplies longer than the core's window holds several blocks of (one at a time: 6.4 us
  // forward at N = 4,096, slower than a pass a stage; two 5.8; four 5.5; eight no faster).
  static constexpr size_t kBlocks = 4;

  template <int kImm>
  static V ShufflePs(V a, V b) {
    return _mm256_castps_si256(
        _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), kImm));
  }
  // Lane-wise roots of each stage's layout above, from the block's first root r.
  static V Roots4Forward(const Elem* r) {  // r0 x 4 | r1 x 4
    const V pair = _mm256_set1_epi64x(Load64(r));
    return _mm256_castps_si256(
        _mm256_permutevar_ps(_mm256_castsi256_ps(pair), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)));
  }
  static V Roots2Forward(const Elem* r) {  // r0 r0 r1 r1 | r2 r2 r3 r3
    const V wide = _mm256_cvtepu32_epi64(Load128(r));
    return _mm256_castps_si256(_mm256_moveldup_ps(_mm256_castsi256_ps(wide)));
  }
  static V Roots1Forward(const Elem* r) {  // r0 r2 r1 r3 | r4 r6 r5 r7
    return _mm256_shuffle_epi32(Load(r), 0xD8);
  }
  static V Roots1Inverse(const Elem* r) {  // r0 r2 r4 r6 | r1 r3 r5 r7
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi32(Load(r), 0xD8), 0xD8);
  }
  static V Roots2Inverse(const Elem* r) {  // r0 r1 r2 r3 | r0 r1 r2 r3
    return _mm256_broadcastsi128_si256(Load128(r));
  }
  static V Roots4Inverse(const Elem* r) {  // r0 r1 r0 r1 | r0 r1 r0 r1
    return _mm256_set1_epi64x(Load64(r));
  }
  static int64_t Load64(const Elem* r) {
    int64_t v;
    std::memcpy(&v, r, sizeof v);
    return v;
  }
  static __m128i Load128(const Elem* r) {
    return _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(r)));
  }

  // Each small stage's roots (distance h: r_h, with their Shoup factors s_h) from the first of
  // the polynomial's first block.
  struct SmallRoots {
    SmallRoots(const Elem* roots, const Elem* shoup, size_t n)
        : r1(roots + n / 2),
          s1(shoup + n / 2),
          r2(roots + n / 4),
          s2(shoup + n / 4),
          r4(roots + n / 8),
          s4(shoup + n / 8) {}
    const Elem *r1, *s1, *r2, *s2, *r4, *s4;
  };

  // The forward's small stages over work (values < 4q from the wide stages), reduced below q and
  // stored into out (words), kBlocks blocks at a time.
  void ForwardSmallStages(V two_q, V q, const Elem* roots, const Elem* roots_shoup, size_t n,
                          const Elem* work, uint64_t* out) const {
    const SmallRoots r(roots, roots_shoup, n);
    EachBlocks(n,
               [&]<size_t kCount>(size_t b) { ForwardBlocks<kCount>(two_q, q, r, b, work, out); });
  }
  // f.operator()<kCount>(b) for the blocks of n elements, kBlocks at a time, then one at a time.
  template <class F>
  static void EachBlocks(size_t n, const F& f) {
    size_t b = 0;
    for (; b + 16 * kBlocks <= n; b += 16 * kBlocks) f.template operator()<kBlocks>(b);
    for (; b < n; b += 16) f.template operator()<1>(b);
  }
  // The block pairs' halves (x, y) rearranged for the next stage.
  static void Halves128(V& x, V& y) {  // 128-bit halves: (x low, y low), (x high, y high)
    const V a = _mm256_permute2x128_si256(x, y, 0x20), b = _mm256_permute2x128_si256(x, y, 0x31);
    x = a;
    y = b;
  }
  static void Pairs64(V& x, V& y) {  // low / high 64-bit pairs of each 128-bit half
    const V a = _mm256_unpacklo_epi64(x, y), b = _mm256_unpackhi_epi64(x, y);
    x = a;
    y = b;
  }
  static void EvenOdd32(V& x, V& y) {  // elements 0, 2 / 1, 3 of each 128-bit half
    const V a = ShufflePs<0x88>(x, y), b = ShufflePs<0xDD>(x, y);
    x = a;
    y = b;
  }
  // One small stage over kCount blocks from b0: `rearrange` each block's halves, then the
  // butterflies with `lanes` of the roots w (Shoup factors ws) from entry b / per on (both
  // template arguments, so that they inline).
  template <bool kInverse, auto rearrange, auto lanes, size_t kCount>
  void Stage(V two_q, V (&x)[kCount], V (&y)[kCount], size_t b0, const Elem* w, const Elem* ws,
             size_t per) const {
    for (size_t k = 0; k < kCount; ++k) {
      const size_t b = b0 + 16 * k;
      rearrange(x[k], y[k]);
      if constexpr (kInverse) {
        InverseButterfly(*this, two_q, lanes(w + b / per), lanes(ws + b / per), x[k], y[k]);
      } else {
        ForwardButterfly(*this, two_q, lanes(w + b / per), lanes(ws + b / per), x[k], y[k]);
      }
    }
  }

  template <size_t kCount>
  void ForwardBlocks(V two_q, V q, const SmallRoots& r, size_t b0, const Elem* work,
                     uint64_t* out) const {
    V x[kCount], y[kCount];
    for (size_t k = 0; k < kCount; ++k) {
      x[k] = Load(work + b0 + 16 * k);
      y[k] = Load(work + b0 + 16 * k + 8);
    }
    Stage<false, Halves128, Roots4Forward>(two_q, x, y, b0, r.r4, r.s4, 8);
    Stage<false, Pairs64, Roots2Forward>(two_q, x, y, b0, r.r2, r.s2, 4);
    Stage<false, EvenOdd32, Roots1Forward>(two_q, x, y, b0, r.r1, r.s1, 2);
    for (size_t k = 0; k < kCount; ++k) {
      const size_t b = b0 + 16 * k;
      const V x1 = ReduceOnce(ReduceOnce(x[k], two_q), q);
      const V y1 = ReduceOnce(ReduceOnce(y[k], two_q), q);
      const V lo = _mm256_unpacklo_epi32(x1, y1), hi = _mm256_unpackhi_epi32(x1, y1);
      // e0-3 | e8-11 and e4-7 | e12-15.
      const V first = _mm256_unpacklo_epi64(lo, hi), second = _mm256_unpackhi_epi64(lo, hi);
      Store(out + b, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(first)));
      Store(out + b + 4, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(second)));
      Store(out + b + 8, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(first, 1)));
      Store(out + b + 12, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(second, 1)));
    }
  }

  // The inverse's small stages from in (words below q) into work (values below 2q), kBlocks
  // blocks at a time.
  void InverseSmallStages(V two_q, const Elem* roots, const Elem* roots_shoup, size_t n,
                          const uint64_t* in, Elem* work) const {
    const SmallRoots r(roots, roots_shoup, n);
    EachBlocks(n, [&]<size_t kCount>(size_t b) { InverseBlocks<kCount>(two_q, r, b, in, work); });
  }
  template <size_t kCount>
  void InverseBlocks(V two_q, const SmallRoots& r, size_t b0, const uint64_t* in,
                     Elem* work) const {
    V x[kCount], y[kCount];
    for (size_t k = 0; k < kCount; ++k) {
      const size_t b = b0 + 16 * k;
      // The block's words narrowed, as e0 e1 e4 e5 | e2 e3 e6 e7 and e8 e9 e12 e13 | e10 e11 e14
      // e15 (in-lane shuffles alone).
      x[k] = ShufflePs<0x88>(Load(in + b), Load(in + b + 4));
      y[k] = ShufflePs<0x88>(Load(in + b + 8), Load(in + b + 12));
    }
    Stage<true, EvenOdd32, Roots1Inverse>(two_q, x, y, b0, r.r1, r.s1, 2);
    Stage<true, Halves128, Roots2Inverse>(two_q, x, y, b0, r.r2, r.s2, 4);
    Stage<true, EvenOdd32, Roots4Inverse>(two_q, x, y, b0, r.r4, r.s4, 8);
    for (size_t k = 0; k < kCount; ++k) {
      Halves128(x[k], y[k]);
      const V lo = _mm256_unpacklo_epi32(x[k], y[k]), hi = _mm256_unpackhi_epi32(x[k], y[k]);
      Store(work + b0 + 16 * k, _mm256_unpacklo_epi64(lo, hi));
      Store(work + b0 + 16 * k + 8, _mm256_unpackhi_epi64(lo, hi));
    }
  }

  V q;
};

// Through a scratch of 32-bit elements (values < q < 2^30), the first stage narrowing the words
// as it loads them and the last pass widening them as it stores them: a separate copy each way
// took 1.4 of a transform's 8.9 us at N = 4,096 on Zen 2.
template <bool kInverse>
void Run32(const NttTables& t, uint64_t* a) {
  const size_t n = t.n();
  uint32_t* narrow = reinterpret_cast<uint32_t*>(GetScratch(Scratch::kNarrowNtt, (n + 1) / 2));
  if (kInverse) {
    Inverse<U32Lanes8>(t, a, narrow);
  } else {
    Forward<U32Lanes8>(t, a, narrow);
  }
}

}  // namespace

void ForwardAvx2(const NttTables& t, uint64_t* a) { Run32<false>(t, a); }
void InverseAvx2(const NttTables& t, uint64_t* a) { Run32<true>(t, a); }

}  // namespace veil::he::internal
