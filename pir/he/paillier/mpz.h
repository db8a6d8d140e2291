// GMP integers for Paillier: an owning wrapper with value semantics, a secret variant whose limbs
// are wiped before they are freed, fixed-width big-endian byte conversion, and uniform random
// integers from libsodium.
#ifndef VEIL_PIR_HE_PAILLIER_MPZ_H_
#define VEIL_PIR_HE_PAILLIER_MPZ_H_

#include <gmp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::he {

// An mpz_t with value semantics. unsigned long is 64 bits on every platform veil builds for.
class Mpz {
 public:
  Mpz() { mpz_init(v_); }
  explicit Mpz(uint64_t x) { mpz_init_set_ui(v_, x); }
  Mpz(const Mpz& other) { mpz_init_set(v_, other.v_); }
  Mpz(Mpz&& other) noexcept {
    mpz_init(v_);
    mpz_swap(v_, other.v_);
  }
  Mpz& operator=(const Mpz& other) {
    mpz_set(v_, other.v_);
    return *this;
  }
  Mpz& operator=(Mpz&& other) noexcept {
    mpz_swap(v_, other.v_);
    return *this;
  }
  ~Mpz() { mpz_clear(v_); }

  mpz_ptr get() { return v_; }
  mpz_srcptr get() const { return v_; }
  size_t bits() const { return mpz_sgn(v_) == 0 ? 0 : mpz_sizeinbase(v_, 2); }

  friend bool operator==(const Mpz& a, const Mpz& b) { return mpz_cmp(a.v_, b.v_) == 0; }

  // Lowercase hex without prefix ("0" for zero). FromHex returns INVALID_ARGUMENT for anything
  // but a non-empty string of hex digits.
  std::string ToHex() const;
  static absl::StatusOr<Mpz> FromHex(std::string_view hex);

 protected:
  mpz_t v_;
};

// Overwrites every allocated limb of `x` with zeros (sodium_memzero) and sets it to 0.
void Wipe(mpz_ptr x);

// Key material: wiped before its storage is freed. Not copyable (a copy would be one more place
// to wipe); moves swap, so the moved-from object wipes whatever it ends up holding.
class SecretMpz : public Mpz {
 public:
  SecretMpz() = default;
  SecretMpz(SecretMpz&&) = default;
  SecretMpz& operator=(SecretMpz&&) = default;
  SecretMpz(const SecretMpz&) = delete;
  SecretMpz& operator=(const SecretMpz&) = delete;
  ~SecretMpz() { Wipe(v_); }
};

// x as exactly `width` big-endian bytes into out (out.size() == width). Returns false if x is
// negative or does not fit.
bool ToFixedBytes(const Mpz& x, absl::Span<uint8_t> out);
// The non-negative integer of big-endian `bytes`.
Mpz FromBytes(absl::Span<const uint8_t> bytes);

// x as exactly `limbs` little-endian limbs (zero-padded; x must be non-negative and fit), and
// back. The copy touches every limb whatever x's length.
void ToLimbs(const Mpz& x, mp_limb_t* out, size_t limbs);
void FromLimbs(const mp_limb_t* limbs, size_t count, Mpz& x);

// Multiplication modulo a fixed odd modulus with GMP's side-channel silent mpn_sec_mul and
// mpn_sec_div_r: for secret operands, no branch or memory address depends on their values.
// Holds scratch space (wiped on destruction): one instance per thread.
class SecureModMul {
 public:
  explicit SecureModMul(const Mpz& modulus);
  ~SecureModMul();
  SecureModMul(const SecureModMul&) = delete;
  SecureModMul& operator=(const SecureModMul&) = delete;

  size_t limbs() const { return limbs_; }
  // out = a b mod modulus for a, b of limbs() limbs below the modulus; out may alias a or b.
  void Mul(const mp_limb_t* a, const mp_limb_t* b, mp_limb_t* out);

 private:
  const mp_limb_t* modulus_;
  size_t limbs_;
  std::vector<mp_limb_t> product_, scratch_;
};

// Uniform in [0, bound) from libsodium's randombytes_buf (64 extra bits then a reduction: the
// bias is below 2^-64). bound must be positive. Secret (randomness of encryptions, primes).
SecretMpz RandomBelow(const Mpz& bound);
// Uniform in [0, 2^bits).
SecretMpz RandomBits(size_t bits);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_MPZ_H_
