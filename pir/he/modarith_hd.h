// Word-level modular arithmetic shared by the CPU code of pir/he/ and the GPU NTT phases
// (gpu/internal/ntt_phases.h): the same source runs on the host and on the device, as dpf/hd.h
// arranges. Header only; no CUDA types (MulHi64 picks the device intrinsic when compiled by nvcc).
//
// Shoup multiplication (a fixed multiplicand w with its precomputed w' = floor(w * 2^64 / q)):
// Harvey, "Faster arithmetic for number-theoretic transforms", J. Symb. Comp. 60 (2014), Alg. 2.
// Montgomery multiplication with R = 2^64: Montgomery, Math. Comp. 44 (1985).
#ifndef VEIL_PIR_HE_MODARITH_HD_H_
#define VEIL_PIR_HE_MODARITH_HD_H_

#include <cstdint>

#include "dpf/hd.h"

namespace veil::he {

// Largest modulus bit count the library accepts: the lazy NTT keeps values below 4q < 2^64.
inline constexpr int kMaxModulusBits = 62;

VEIL_HD uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// floor(w * 2^64 / q) for w < q (host only: tables are built on the host).
inline uint64_t ShoupPrecompute(uint64_t w, uint64_t q) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(w) << 64) / q);
}

// a * w mod q, in [0, 2q), for any a < 2^64 and w < q < 2^63 (Harvey 2014, Alg. 2: the quotient
// estimate floor(a * w' / 2^64) is at most one below the true one).
VEIL_HD uint64_t MulShoupLazy(uint64_t a, uint64_t w, uint64_t w_shoup, uint64_t q) {
  return a * w - MulHi64(a, w_shoup) * q;
}

// a * w mod q, in [0, q).
VEIL_HD uint64_t MulShoup(uint64_t a, uint64_t w, uint64_t w_shoup, uint64_t q) {
  const uint64_t r = MulShoupLazy(a, w, w_shoup, q);
  return r >= q ? r - q : r;
}

// floor((a w + half) / q) for any a < 2^64, w < q < 2^62 and half < q (w_shoup = floor(w 2^64 /
// q)), with no branch on a (constant time for secret a): the quotient estimate of MulShoupLazy is
// at most one below, so r = a w - e q + half is below 3q; two masked steps add what r holds of q.
VEIL_HD uint64_t ShoupRoundedQuotient(uint64_t a, uint64_t w, uint64_t w_shoup, uint64_t q,
                                      uint64_t half) {
  uint64_t quotient = MulHi64(a, w_shoup);
  uint64_t r = a * w - quotient * q + half;
  for (int i = 0; i < 2; ++i) {
    const uint64_t above = 0 - static_cast<uint64_t>(r >= q);
    quotient -= above;  // + 1 where r >= q
    r -= above & q;
  }
  return quotient;
}

// q^{-1} mod 2^64 for odd q (Newton: each step doubles the correct low bits, 5 -> 80).
VEIL_HD uint64_t InverseMod2Pow64(uint64_t q) {
  uint64_t x = q;  // correct to 3 bits: q * q = 1 mod 8 for odd q
  for (int i = 0; i < 5; ++i) x *= 2 - q * x;
  return x;
}

// Montgomery reduction of the 128-bit product a * b: a * b * 2^-64 mod q, in [0, q), for
// a * b < q * 2^64 (e.g. a, b < q) and odd q < 2^63; q_inv = q^{-1} mod 2^64.
VEIL_HD uint64_t MontMul(uint64_t a, uint64_t b, uint64_t q, uint64_t q_inv) {
  const uint64_t lo = a * b;
  const uint64_t hi = MulHi64(a, b);
  const uint64_t m = lo * q_inv;  // m * q = lo mod 2^64, so (a*b - m*q) / 2^64 is exact
  const uint64_t mq_hi = MulHi64(m, q);
  return hi >= mq_hi ? hi - mq_hi : hi - mq_hi + q;
}

VEIL_HD uint64_t AddMod(uint64_t a, uint64_t b, uint64_t q) {
  const uint64_t s = a + b;
  return s >= q ? s - q : s;
}

VEIL_HD uint64_t SubMod(uint64_t a, uint64_t b, uint64_t q) { return a >= b ? a - b : a - b + q; }

}  // namespace veil::he

#endif  // VEIL_PIR_HE_MODARITH_HD_H_
