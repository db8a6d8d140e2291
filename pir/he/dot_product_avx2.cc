// The tiled dot product (dot_product.h) for CPUs with AVX2 but no IFMA (compiled with -mavx2;
// called only after the CPU check): whole products from vpmuludq (residues below q <= 2^32 fit
// its 32-bit operands), summed in 64-bit lanes for as many terms as cannot overflow them, then
// folded into separate sums of their low and high 32-bit halves; one reduction per slot.
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

}  // namespace veil::he::internal
