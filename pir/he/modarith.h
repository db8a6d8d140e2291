// Modular arithmetic for odd moduli below 2^62: Barrett reduction of 64- and 128-bit values,
// Montgomery and Shoup multiplication (modarith_hd.h), exponentiation and inverses; NTT-friendly
// prime generation (q = 1 mod 2N, deterministic Miller-Rabin) and minimal primitive roots.
#ifndef VEIL_PIR_HE_MODARITH_H_
#define VEIL_PIR_HE_MODARITH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pir/he/modarith_hd.h"

namespace veil::he {

using uint128_t = unsigned __int128;

// An odd modulus 3 <= q < 2^62 with its reduction constants. Cheap to copy.
class Modulus {
 public:
  // Returns INVALID_ARGUMENT if q is even, below 3 or not below 2^62.
  static absl::StatusOr<Modulus> Create(uint64_t q);

  uint64_t value() const { return q_; }
  int bits() const { return bits_; }

  // Barrett reduction (ratio = floor(2^128 / q)): x mod q.
  uint64_t Reduce(uint64_t x) const {
    const uint64_t r = x - MulHi64(x, ratio_hi_) * q_;
    return r >= q_ ? r - q_ : r;
  }
  // For any x, with no branch on it (constant time for secret x): the estimate is at most 2
  // below, so r < 3q < 2^64 and two masked subtractions finish it.
  uint64_t Reduce(uint128_t x) const {
    uint64_t r = static_cast<uint64_t>(x) - BarrettQuotient(x) * q_;
    r -= q_ & (0 - static_cast<uint64_t>(r >= q_));
    r -= q_ & (0 - static_cast<uint64_t>(r >= q_));
    return r;
  }
  // a * b mod q for any a, b < 2^64.
  uint64_t Mul(uint64_t a, uint64_t b) const { return Reduce(static_cast<uint128_t>(a) * b); }
  uint64_t Add(uint64_t a, uint64_t b) const { return AddMod(a, b, q_); }
  uint64_t Sub(uint64_t a, uint64_t b) const { return SubMod(a, b, q_); }
  uint64_t Neg(uint64_t a) const { return a == 0 ? 0 : q_ - a; }
  uint64_t Pow(uint64_t base, uint64_t exp) const;
  // a^{-1} mod q. Returns INVALID_ARGUMENT if a has no inverse (gcd(a, q) != 1).
  absl::StatusOr<uint64_t> Inverse(uint64_t a) const;
  // The residue of a signed value.
  uint64_t FromSigned(int64_t a) const {
    return a >= 0 ? Reduce(static_cast<uint64_t>(a)) : Neg(Reduce(static_cast<uint64_t>(-a)));
  }
  // The centered representative of a < q in (-q/2, q/2].
  int64_t Centered(uint64_t a) const {
    return a > q_ / 2 ? -static_cast<int64_t>(q_ - a) : static_cast<int64_t>(a);
  }

  // Montgomery form with R = 2^64.
  uint64_t ToMontgomery(uint64_t a) const { return Reduce(static_cast<uint128_t>(a) << 64); }
  uint64_t FromMontgomery(uint64_t a) const { return MontMul(a, 1, q_, q_inv_); }
  uint64_t MontgomeryMul(uint64_t a, uint64_t b) const { return MontMul(a, b, q_, q_inv_); }
  uint64_t montgomery_inv() const { return q_inv_; }  // q^{-1} mod 2^64

  // Shoup: w' = floor(w * 2^64 / q) for a fixed multiplicand w < q.
  uint64_t ShoupOf(uint64_t w) const { return ShoupPrecompute(w, q_); }

  bool operator==(const Modulus& o) const { return q_ == o.q_; }

 private:
  // floor(x ratio / 2^128), which underestimates floor(x / q) by at most 2; the product's lowest
  // word only feeds a carry, which the callers' corrections absorb.
  uint64_t BarrettQuotient(uint128_t x) const {
    const uint64_t x_lo = static_cast<uint64_t>(x), x_hi = static_cast<uint64_t>(x >> 64);
    const uint128_t lo_lo = static_cast<uint128_t>(x_lo) * ratio_lo_;
    const uint128_t lo_hi = static_cast<uint128_t>(x_lo) * ratio_hi_;
    const uint128_t hi_lo = static_cast<uint128_t>(x_hi) * ratio_lo_;
    const uint128_t mid =
        (lo_lo >> 64) + static_cast<uint64_t>(lo_hi) + static_cast<uint64_t>(hi_lo);
    return x_hi * ratio_hi_ + static_cast<uint64_t>(lo_hi >> 64) +
           static_cast<uint64_t>(hi_lo >> 64) + static_cast<uint64_t>(mid >> 64);
  }

  uint64_t q_ = 0;
  int bits_ = 0;
  uint64_t ratio_hi_ = 0;  // floor(2^128 / q) = ratio_hi * 2^64 + ratio_lo
  uint64_t ratio_lo_ = 0;
  uint64_t q_inv_ = 0;
};

// Deterministic Miller-Rabin for every 64-bit n (the first twelve primes as bases suffice below
// 3.3e24: Sorenson and Webster, Math. Comp. 86 (2017)).
bool IsPrime(uint64_t n);

// The `count` largest primes below 2^bits with p = 1 mod two_n, largest first, skipping those in
// `exclude`. Returns INVALID_ARGUMENT if bits is outside [2, 62] or two_n is not a power of two
// >= 2, NOT_FOUND if fewer than `count` such primes exist.
absl::StatusOr<std::vector<uint64_t>> GenerateNttPrimes(int bits, uint64_t two_n, int count,
                                                        const std::vector<uint64_t>& exclude = {});

// The smallest primitive two_n-th root of unity mod q (SEAL's and HEXL's choice of psi, which
// the NTT known answers assume). Returns INVALID_ARGUMENT if q is not a prime = 1 mod two_n or
// two_n is not a power of two >= 2.
absl::StatusOr<uint64_t> MinimalPrimitiveRoot(uint64_t two_n, const Modulus& q);

// Bit-reversal of the low `bits` bits of x.
uint32_t ReverseBits(uint32_t x, int bits);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_MODARITH_H_
