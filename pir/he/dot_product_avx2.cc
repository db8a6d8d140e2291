// dot_product.h's kernels for CPUs with AVX2 but no IFMA (compiled with -mavx2; called only after
// the CPU check), for q <= 2^32, whose residues fit vpmuludq's 32-bit operands:
//   the tiled dot product: whole products summed in 64-bit lanes for as many terms as cannot
//   overflow them, then folded into separate sums of their low and high 32-bit halves; one
//   reduction per slot; four tiles' plaintexts streamed in turn, the sums stored past the caches;
//   SubMulShoup: Shoup's product with 32-bit quotients (w' >> 32 = floor(w 2^32 / q)), as the
//   NTT's 32-bit butterflies, on four 64-bit lanes;
//   the plain dot product where every sum fits 64 bits (key switching's inner product): 64-bit sums
//   of whole products, reduced as hi (2^32 mod q) + lo by 32-bit Shoup products.
#include <immintrin.h>

#include "pir/he/dot_product.h"

namespace veil::he::internal {
namespace {

// 2 KiB of plaintext residues ahead: at 2^22 x 64 B on two Zen 2 vCPUs the tile pass took 7.3 ms
// against 8.3 with the IFMA kernel's 512 bytes.
constexpr size_t kPrefetchWords = 512;
// The tiled dot product's streams of plaintexts (TileDotProductAvx2).
constexpr size_t kStreams = 4;

struct Halves {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();

  void Fold(__m256i& sum) {
    const __m256i low32 = _mm256_set1_epi64x(0xffffffff);
    lo = _mm256_add_epi64(lo, _mm256_and_si256(sum, low32));
    hi = _mm256_add_epi64(hi, _mm256_srli_epi64(sum, 32));
    sum = _mm256_setzero_si256();
  }
};

__m256i LoadWords(const uint64_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
__m256i LoadWords(const uint32_t* p) {
  return _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// x w mod q in [0, 2q) for x < 2^32, w < q < 2^32, w32 = floor(w 2^32 / q), in 64-bit lanes.
__m256i MulShoup32(__m256i x, __m256i w, __m256i w32, __m256i q) {
  const __m256i quotient = _mm256_srli_epi64(_mm256_mul_epu32(x, w32), 32);
  return _mm256_sub_epi64(_mm256_mul_epu32(x, w), _mm256_mul_epu32(quotient, q));
}

// x mod q in [0, 2q) for x < 2^32, one32 = floor(2^32 / q): Shoup's product with w = 1.
__m256i Mod32(__m256i x, __m256i one32, __m256i q) {
  return _mm256_sub_epi64(x,
                          _mm256_mul_epu32(_mm256_srli_epi64(_mm256_mul_epu32(x, one32), 32), q));
}

// x - m where x >= m (x and m below 2^63).
__m256i SubIfAtLeast(__m256i x, __m256i m) {
  const __m256i below = _mm256_cmpgt_epi64(m, x);
  return _mm256_sub_epi64(x, _mm256_andnot_si256(below, m));
}

// Constants for reducing 64-bit lanes modulo q < 2^32 with 32-bit Shoup products.
struct Mod32Constants {
  __m256i q, two_q, c, c32, one32;  // c = 2^32 mod q, c32 = floor(c 2^32 / q), one32 = 2^32 / q

  explicit Mod32Constants(uint64_t qv) {
    const uint64_t cv = (uint64_t{1} << 32) % qv;
    q = _mm256_set1_epi64x(static_cast<int64_t>(qv));
    two_q = _mm256_set1_epi64x(static_cast<int64_t>(2 * qv));
    c = _mm256_set1_epi64x(static_cast<int64_t>(cv));
    c32 = _mm256_set1_epi64x(static_cast<int64_t>((cv << 32) / qv));
    one32 = _mm256_set1_epi64x(static_cast<int64_t>((uint64_t{1} << 32) / qv));
  }

  // hi 2^32 + lo mod q in [0, 4q) for hi, lo < 2^32: hi (2^32 mod q) + lo, each in [0, 2q).
  __m256i Partial(__m256i hi, __m256i lo) const {
    return _mm256_add_epi64(MulShoup32(hi, c, c32, q), Mod32(lo, one32, q));
  }
  // The same for any 64-bit s.
  __m256i Partial(__m256i s) const {
    return Partial(_mm256_srli_epi64(s, 32), _mm256_and_si256(s, _mm256_set1_epi64x(0xffffffff)));
  }
  // x in [0, 4q) to [0, q).
  __m256i Final(__m256i x) const { return SubIfAtLeast(SubIfAtLeast(x, two_q), q); }
};

}  // namespace

void TileDotProductAvx2(const TileDotProductArgs& a) {
  const Modulus& q = *a.q;
  const uint64_t largest = q.value() - 1;
  // Products below (q - 1)^2 < 2^64: a 64-bit lane takes `run` of them (at least one; 16 for
  // primes below 2^30). The folded halves grow by < 2^32 a fold: no overflow below 2^32 terms.
  // (No std:: templates in this file: an inline function compiled for AVX2 here could be the copy
  // that every caller links to.)
  const uint64_t fits = ~uint64_t{0} / (largest * largest);  // largest >= 2
  const size_t run = fits < 16 ? static_cast<size_t>(fits) : 16;
  const Mod32Constants m(q.value());
  const __m256i low32 = _mm256_set1_epi64x(0xffffffff);
  // Four tiles at once, a quarter of the call's tiles apart, a run of each in turn: four streams
  // of plaintexts in flight instead of one (one stream of Zen 2's prefetchers read 11 to 13 GB/s
  // on one core, four 19 to 21).
  const size_t streams = a.tiles < kStreams ? a.tiles : kStreams;
  const size_t quarter = streams == 0 ? 0 : (a.tiles + streams - 1) / streams;
  for (size_t j = 0; j < quarter; ++j) {
    size_t tile[kStreams];
    size_t active = 0;
    for (size_t s = 0; s < streams; ++s) {
      if (s * quarter + j < a.tiles) tile[active++] = s * quarter + j;
    }
    // Slots 0-3 and 4-7 of each half (keys[r][h][l]) of each tile: folded[s][2 h + v].
    Halves folded[kStreams][4];
    for (size_t r0 = 0; r0 < a.terms; r0 += run) {
      const size_t r1 = r0 + run < a.terms ? r0 + run : a.terms;
      for (size_t s = 0; s < active; ++s) {
        const uint32_t* plain = a.plain + tile[s] * a.terms * 8;
        __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                          _mm256_setzero_si256()};
        for (size_t r = r0; r < r1; ++r) {
          if ((r & 1) == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(plain + r * 8 + kPrefetchWords),
                         _MM_HINT_T0);
          }
          const __m256i p_lo = LoadWords(plain + r * 8);
          const __m256i p_hi = LoadWords(plain + r * 8 + 4);
          const uint64_t* k = a.keys + r * 16;
          sum[0] = _mm256_add_epi64(sum[0], _mm256_mul_epu32(p_lo, LoadWords(k)));
          sum[1] = _mm256_add_epi64(sum[1], _mm256_mul_epu32(p_hi, LoadWords(k + 4)));
          sum[2] = _mm256_add_epi64(sum[2], _mm256_mul_epu32(p_lo, LoadWords(k + 8)));
          sum[3] = _mm256_add_epi64(sum[3], _mm256_mul_epu32(p_hi, LoadWords(k + 12)));
        }
        for (int v = 0; v < 4; ++v) folded[s][v].Fold(sum[v]);
      }
    }
    // The slot's sum T = hi 2^32 + lo = H 2^32 + L with H = hi + (lo >> 32) (below 2^64: each
    // half is below 2^32 times the folds) and L < 2^32; T mod q = (H mod q) (2^32 mod q) + L.
    // Stored past the caches where aligned: the deferred packing's sums are rows far apart
    // (196 KiB at 2^24 x 64 B), whose reads for ownership took a fifth of the tile pass (27.4
    // against 21.2 ms on one Zen 2 core).
    for (size_t s = 0; s < active; ++s) {
      uint64_t* out = a.out + tile[s] * a.out_stride;
      for (int v = 0; v < 4; ++v) {
        const Halves& f = folded[s][v];
        const __m256i high = _mm256_add_epi64(f.hi, _mm256_srli_epi64(f.lo, 32));
        const __m256i r = m.Partial(m.Final(m.Partial(high)), _mm256_and_si256(f.lo, low32));
        uint64_t* to = out + (v / 2) * a.half_stride + 4 * (v % 2);
        if ((reinterpret_cast<uintptr_t>(to) & 31) == 0) {
          _mm256_stream_si256(reinterpret_cast<__m256i*>(to), m.Final(r));
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), m.Final(r));
        }
      }
    }
  }
  _mm_sfence();  // the streamed stores before whatever hands the sums to another thread
}

namespace {

template <typename Plain, typename Cipher>
void PlainKernel(const DotProductArgsOf<Plain, Cipher>& a) {
  // Every sum fits 64 bits (PlainDotProductUsesAvx2): s = hi 2^32 + lo, and
  // s mod q = (hi (2^32 mod q) + lo) mod q, a 32-bit Shoup product and a Shoup reduction, each in
  // [0, 2q).
  const Mod32Constants m(a.q->value());
  const auto reduce = [&](__m256i s, const uint64_t* before) {
    __m256i r = m.Partial(s);
    if (a.accumulate) r = _mm256_add_epi64(r, LoadWords(before));  // [0, 5q)
    r = SubIfAtLeast(SubIfAtLeast(r, m.two_q), m.two_q);           // [0, 2q)
    return SubIfAtLeast(r, m.q);
  };
  size_t c0 = 0;
  for (; c0 + 4 <= a.n; c0 += 4) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (size_t i = 0; i < a.terms; ++i) {
      const __m256i p = LoadWords(a.plain[i] + c0);
      s0 = _mm256_add_epi64(s0, _mm256_mul_epu32(p, LoadWords(a.c0[i] + c0)));
      s1 = _mm256_add_epi64(s1, _mm256_mul_epu32(p, LoadWords(a.c1[i] + c0)));
    }
    const __m256i r0 = reduce(s0, a.out0 + c0), r1 = reduce(s1, a.out1 + c0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.out0 + c0), r0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.out1 + c0), r1);
  }
  if (c0 < a.n) PlainDotProductReference(a, c0);
}

}  // namespace

void PlainDotProductAvx2(const DotProductArgs& a) { PlainKernel(a); }
void PlainDotProductAvx2(const DotProductArgs32& a) { PlainKernel(a); }
void PlainDotProductAvx2(const DotProductArgsNarrowKeys& a) { PlainKernel(a); }

void SubMulShoupAvx2(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                     const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out) {
  // d = x - y mod q < 2^32 and w'' = floor(w 2^32 / q): d w - floor(d w'' / 2^32) q is in
  // [0, 2q), exact in 64-bit lanes (each product below 2^64), then reduced once.
  const __m256i qv = _mm256_set1_epi64x(static_cast<int64_t>(q.value()));
  const __m256i q_minus_1 = _mm256_set1_epi64x(static_cast<int64_t>(q.value() - 1));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i w1 = _mm256_set1_epi64x(static_cast<int64_t>(w[0]));
  const __m256i w1_32 = _mm256_set1_epi64x(static_cast<int64_t>(w_shoup[0] >> 32));
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    __m256i d = _mm256_sub_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c)),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + c)));
    d = _mm256_add_epi64(d, _mm256_and_si256(qv, _mm256_cmpgt_epi64(zero, d)));  // below 0: + q
    const __m256i wv =
        w_step == 0 ? w1 : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c));
    const __m256i w32 =
        w_step == 0 ? w1_32
                    : _mm256_srli_epi64(
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_shoup + c)), 32);
    const __m256i quotient = _mm256_srli_epi64(_mm256_mul_epu32(d, w32), 32);
    __m256i r = _mm256_sub_epi64(_mm256_mul_epu32(d, wv), _mm256_mul_epu32(quotient, qv));
    r = _mm256_sub_epi64(r, _mm256_and_si256(qv, _mm256_cmpgt_epi64(r, q_minus_1)));  // r >= q
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), r);
  }
  if (c < n) {
    SubMulShoupReference(q, n - c, x + c, y + c, w + c * w_step, w_shoup + c * w_step, w_step,
                         out + c);
  }
}

}  // namespace veil::he::internal
