// The 32-bit NTT kernel for CPUs with AVX2 but no AVX-512 (compiled with -mavx2; called only
// after the CPU check in ntt.cc): ntt_avx512.cc's U32 lanes at 8 lanes a vector, q < 2^30 so
// that 4q < 2^32, in a 32-bit scratch that the first stage fills and the last pass empties.
// AVX2 has no two-source permute: the small stages shuffle within 128-bit lanes instead
// (U32Lanes8::SmallStage).
#include <immintrin.h>

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

  // The small stages (half 4, 2, 1) with in-lane shuffles where the generic loop's Permute2
  // takes two vpermd a vector (two cycles each on Zen 2, against half of one for an in-lane
  // shuffle): 48% of a transform at N = 4,096. Each block of 16 elements (v0 | v1) becomes
  //   half 4: X = (v0 low, v1 low), Y = (v0 high, v1 high); lanes' roots (r0 x 4 | r1 x 4)
  //   half 2: X, Y = the low / high 64-bit pairs of each 128-bit lane of v0 and v1;
  //           roots (r0 r0 r2 r2 | r1 r1 r3 r3)
  //   half 1: X, Y = the even / odd 32-bit elements of each 128-bit lane of v0 and v1;
  //           roots (r0 r1 r4 r5 | r2 r3 r6 r7)
  // (r_g the root of the block's group g), and back by the inverse shuffles.
  static constexpr bool kOwnSmallStages = true;

  template <bool kInverse, class Word>
  void SmallStage(V two_q, const Elem* roots, const Elem* roots_shoup, size_t n, size_t m,
                  size_t half, const Word* in, Elem* a) const {
    if (half == 4) {
      Small<kInverse, 4>(two_q, roots, roots_shoup, n, m, in, a);
    } else if (half == 2) {
      Small<kInverse, 2>(two_q, roots, roots_shoup, n, m, in, a);
    } else {
      Small<kInverse, 1>(two_q, roots, roots_shoup, n, m, in, a);
    }
  }

  template <int kHalf>
  static V LaneRoots(const Elem* r) {
    if constexpr (kHalf == 4) {
      return _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_set1_epi32(static_cast<int32_t>(r[0]))),
          _mm_set1_epi32(static_cast<int32_t>(r[1])), 1);
    } else if constexpr (kHalf == 2) {
      const __m256 four = _mm256_castsi256_ps(_mm256_broadcastsi128_si256(
          _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(r)))));
      return _mm256_blend_epi32(_mm256_castps_si256(_mm256_moveldup_ps(four)),
                                _mm256_castps_si256(_mm256_movehdup_ps(four)), 0xF0);
    } else {
      return _mm256_permute4x64_epi64(Load(r), 0xD8);
    }
  }

  template <bool kInverse, int kHalf, class Word>
  void Small(V two_q, const Elem* roots, const Elem* roots_shoup, size_t n, size_t m,
             const Word* in, Elem* a) const {  // a: the output
    for (size_t b = 0; b < n; b += 16) {
      const V v0 = LoadWord<U32Lanes8>(in + b), v1 = LoadWord<U32Lanes8>(in + b + 8);
      V x, y;
      if constexpr (kHalf == 4) {
        x = _mm256_permute2x128_si256(v0, v1, 0x20);
        y = _mm256_permute2x128_si256(v0, v1, 0x31);
      } else if constexpr (kHalf == 2) {
        x = _mm256_unpacklo_epi64(v0, v1);
        y = _mm256_unpackhi_epi64(v0, v1);
      } else {
        const __m256 f0 = _mm256_castsi256_ps(v0), f1 = _mm256_castsi256_ps(v1);
        x = _mm256_castps_si256(_mm256_shuffle_ps(f0, f1, 0x88));  // elements 0, 2 of each
        y = _mm256_castps_si256(_mm256_shuffle_ps(f0, f1, 0xDD));  // elements 1, 3 of each
      }
      const size_t first = m + b / (2 * kHalf);
      const V w = LaneRoots<kHalf>(roots + first), ws = LaneRoots<kHalf>(roots_shoup + first);
      if (kInverse) {
        InverseButterfly(*this, two_q, w, ws, x, y);
      } else {
        ForwardButterfly(*this, two_q, w, ws, x, y);
      }
      if constexpr (kHalf == 4) {
        Store(a + b, _mm256_permute2x128_si256(x, y, 0x20));
        Store(a + b + 8, _mm256_permute2x128_si256(x, y, 0x31));
      } else if constexpr (kHalf == 2) {
        Store(a + b, _mm256_unpacklo_epi64(x, y));
        Store(a + b + 8, _mm256_unpackhi_epi64(x, y));
      } else {
        Store(a + b, _mm256_unpacklo_epi32(x, y));
        Store(a + b + 8, _mm256_unpackhi_epi32(x, y));
      }
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
