// dot_product.h's kernels for CPUs with AVX2 but no IFMA (compiled with -mavx2; called only after
// the CPU check), for q <= 2^32, whose residues fit vpmuludq's 32-bit operands:
//   the tiled dot product: whole products summed in 64-bit lanes for as many terms as cannot
//   overflow them, then folded into separate sums of their low and high 32-bit halves; one
//   reduction per slot;
//   SubMulShoup: Shoup's product with 32-bit quotients (w' >> 32 = floor(w 2^32 / q)), as the
//   NTT's 32-bit butterflies, on four 64-bit lanes.
#include <immintrin.h>

#include "pir/he/dot_product.h"

namespace veil::he::internal {
namespace {

constexpr size_t kPrefetchWords = 128;  // 512 bytes of plaintext residues, as the IFMA kernel

struct Halves {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();

  void Fold(__m256i& sum) {
    const __m256i low32 = _mm256_set1_epi64x(0xffffffff);
    lo = _mm256_add_epi64(lo, _mm256_and_si256(sum, low32));
    hi = _mm256_add_epi64(hi, _mm256_srli_epi64(sum, 32));
    sum = _mm256_setzero_si256();
  }
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
  for (size_t t = 0; t < a.tiles; ++t) {
    const uint32_t* plain = a.plain + t * a.terms * 8;
    // Slots 0-3 and 4-7 of each half (keys[r][h][l]).
    Halves folded[2][2];
    __m256i sum[2][2] = {{_mm256_setzero_si256(), _mm256_setzero_si256()},
                         {_mm256_setzero_si256(), _mm256_setzero_si256()}};
    for (size_t r0 = 0; r0 < a.terms; r0 += run) {
      const size_t r1 = r0 + run < a.terms ? r0 + run : a.terms;
      for (size_t r = r0; r < r1; ++r) {
        if ((r & 1) == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(plain + r * 8 + kPrefetchWords), _MM_HINT_T0);
        }
        const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(plain + r * 8));
        const __m256i p_lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(p));
        const __m256i p_hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(p, 1));
        const uint64_t* k = a.keys + r * 16;
        for (int h = 0; h < 2; ++h) {
          const __m256i k_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 8 * h));
          const __m256i k_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 8 * h + 4));
          sum[h][0] = _mm256_add_epi64(sum[h][0], _mm256_mul_epu32(p_lo, k_lo));
          sum[h][1] = _mm256_add_epi64(sum[h][1], _mm256_mul_epu32(p_hi, k_hi));
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int v = 0; v < 2; ++v) folded[h][v].Fold(sum[h][v]);
      }
    }
    uint64_t* out = a.out + t * a.out_stride;
    for (int h = 0; h < 2; ++h) {
      for (int v = 0; v < 2; ++v) {
        alignas(32) uint64_t lo[4], hi[4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lo), folded[h][v].lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(hi), folded[h][v].hi);
        for (int l = 0; l < 4; ++l) {
          out[h * a.half_stride + 4 * v + l] =
              q.Reduce((static_cast<uint128_t>(hi[l]) << 32) + lo[l]);
        }
      }
    }
  }
}

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
