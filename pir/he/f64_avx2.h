// Exact modular products of integers held in doubles, on four lanes of AVX2 + FMA: what the
// kernels for primes of up to 50 bits share (ntt_avx2_f64.cc, dot_product_avx2_f64.cc; each
// includes this header compiled with -mavx2 -mfma, in an anonymous namespace, so that no copy is
// shared with code built for another instruction set).
//
// For integers a < 2^52 and b < q < 2^50 and b_over_q within a few units in the last place of
// b / q (fl(b / q), or fl(b fl(1 / q))): t = a b_over_q is within one of a b / q, so
// e = floor(t) is floor(a b / q) - 1, itself or + 1; h = fl(e q), l = e q - h and u = a b - h
// are exact by FMA (integers below 2^52), and r = u - l = a b - e q is exact, in [-q, 2q).
#ifndef VEIL_PIR_HE_F64_AVX2_H_
#define VEIL_PIR_HE_F64_AVX2_H_

#include <immintrin.h>

namespace veil::he::internal {
namespace {

// Integers below 2^52 to doubles and back, exactly: 2^52 + x has x as its mantissa.
inline __m256d WordsToDoubles(__m256i x) {
  return _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(x, _mm256_set1_epi64x(0x4330000000000000))),
      _mm256_set1_pd(4503599627370496.0));
}
inline __m256i DoublesToWords(__m256d x) {
  return _mm256_xor_si256(_mm256_castpd_si256(_mm256_add_pd(x, _mm256_set1_pd(4503599627370496.0))),
                          _mm256_set1_epi64x(0x4330000000000000));
}

// a b - e q in [-q, 2q) (above).
inline __m256d ProductF64(__m256d a, __m256d b, __m256d b_over_q, __m256d q) {
  const __m256d e = _mm256_floor_pd(_mm256_mul_pd(a, b_over_q));
  const __m256d h = _mm256_mul_pd(e, q);
  const __m256d l = _mm256_fmsub_pd(e, q, h);
  const __m256d u = _mm256_fmsub_pd(a, b, h);
  return _mm256_sub_pd(u, l);
}

// r + m where r is negative.
inline __m256d AddIfNegative(__m256d r, __m256d m) {
  return _mm256_add_pd(r, _mm256_and_pd(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_LT_OQ), m));
}

// a - m where a >= m.
inline __m256d SubIfAtLeast(__m256d a, __m256d m) {
  return _mm256_sub_pd(a, _mm256_and_pd(_mm256_cmp_pd(a, m, _CMP_GE_OQ), m));
}

}  // namespace
}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_F64_AVX2_H_
