// IFMA52 kernel of PlainDotProduct (dot_product.h); compiled with -mavx512f -mavx512ifma.
#include <immintrin.h>

#include <vector>

#include "pir/he/dot_product.h"

namespace veil::he::internal {

void PlainDotProductIfma(const DotProductArgs& a) {
  // Each product p < q^2 < 2^100 is lo + hi 2^52 with lo < 2^52 and hi < 2^48: 2^11 terms of
  // either sum fit a 64-bit lane. Longer sums are cut into chunks and their results added mod q.
  constexpr size_t kChunk = 2048;
  const Modulus& q = *a.q;
  const __m512i zero = _mm512_setzero_si512();
  // When a chunk's whole sum, below terms q^2, fits 64 bits (small primes, few terms: a key
  // switch's k digits, packing's blocks of 16 keys), hi 2^52 + lo is reduced in 64 bits.
  const uint128_t largest = static_cast<uint128_t>(q.value() - 1) * (q.value() - 1) *
                            (a.terms < kChunk ? a.terms : kChunk);
  const bool fits64 = (largest >> 64) == 0;
  size_t c = 0;
  for (; c + 8 <= a.n; c += 8) {
    uint64_t r0[8] = {}, r1[8] = {};
    for (size_t first = 0; first < a.terms; first += kChunk) {
      __m512i lo0 = zero, hi0 = zero, lo1 = zero, hi1 = zero;
      const size_t end = first + kChunk < a.terms ? first + kChunk : a.terms;
      for (size_t i = first; i < end; ++i) {
        const __m512i p = _mm512_loadu_si512(a.plain[i] + c);
        const __m512i x0 = _mm512_loadu_si512(a.c0[i] + c);
        const __m512i x1 = _mm512_loadu_si512(a.c1[i] + c);
        lo0 = _mm512_madd52lo_epu64(lo0, p, x0);
        hi0 = _mm512_madd52hi_epu64(hi0, p, x0);
        lo1 = _mm512_madd52lo_epu64(lo1, p, x1);
        hi1 = _mm512_madd52hi_epu64(hi1, p, x1);
      }
      alignas(64) uint64_t l0[8], h0[8], l1[8], h1[8];
      _mm512_store_si512(l0, lo0);
      _mm512_store_si512(h0, hi0);
      _mm512_store_si512(l1, lo1);
      _mm512_store_si512(h1, hi1);
      if (fits64) {
        for (int k = 0; k < 8; ++k) {
          r0[k] = q.Add(r0[k], q.Reduce((h0[k] << 52) + l0[k]));
          r1[k] = q.Add(r1[k], q.Reduce((h1[k] << 52) + l1[k]));
        }
      } else {
        for (int k = 0; k < 8; ++k) {
          r0[k] = q.Add(r0[k], q.Reduce((static_cast<uint128_t>(h0[k]) << 52) + l0[k]));
          r1[k] = q.Add(r1[k], q.Reduce((static_cast<uint128_t>(h1[k]) << 52) + l1[k]));
        }
      }
    }
    for (int k = 0; k < 8; ++k) {
      a.out0[c + k] = r0[k];
      a.out1[c + k] = r1[k];
    }
  }
  if (c < a.n) {
    const uint64_t* const* plain = a.plain;
    DotProductArgs rest = a;
    std::vector<const uint64_t*> p(a.terms), x0(a.terms), x1(a.terms);
    for (size_t i = 0; i < a.terms; ++i) {
      p[i] = plain[i] + c;
      x0[i] = a.c0[i] + c;
      x1[i] = a.c1[i] + c;
    }
    rest.plain = p.data();
    rest.c0 = x0.data();
    rest.c1 = x1.data();
    rest.n = a.n - c;
    rest.out0 = a.out0 + c;
    rest.out1 = a.out1 + c;
    PlainDotProductReference(rest);
  }
}

}  // namespace veil::he::internal
