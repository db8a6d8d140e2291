// Paillier keys (Paillier, EUROCRYPT'99, "Public-Key Cryptosystems Based on Composite Degree
// Residuosity Classes"): n = pq with p, q primes of equal size, g = n + 1 (so g^m = 1 + mn mod
// n^2). The secret key keeps the CRT form of decryption (Paillier's Section 7): per prime, p - 1,
// p^2 and h_p = L_p(g^(p-1) mod p^2)^(-1) mod p; plus lambda and mu for the plain reference.
#ifndef VEIL_PIR_HE_PAILLIER_KEYS_H_
#define VEIL_PIR_HE_PAILLIER_KEYS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pir/he/paillier/mpz.h"

namespace veil::he {

struct KeyOptions {
  int modulus_bits = 2048;  // 2048 or 3072
  // Accept 1024-bit moduli, which are within reach of factoring: only for comparisons with
  // published 1024-bit figures and for fast tests. Never for data that matters.
  bool insecure_for_comparison = false;
};

// OK for 2048 and 3072, and for 1024 when `insecure_for_comparison`; INVALID_ARGUMENT otherwise.
absl::Status CheckModulusBits(int modulus_bits, bool insecure_for_comparison);

class PublicKey {
 public:
  // Returns INVALID_ARGUMENT unless n is odd, not a perfect square, and has a size
  // CheckModulusBits accepts (the form n = pq itself cannot be checked without the factors).
  static absl::StatusOr<PublicKey> FromModulus(const Mpz& n, bool insecure_for_comparison);

  const Mpz& n() const { return n_; }
  const Mpz& n_squared() const { return n_squared_; }
  int modulus_bits() const { return modulus_bits_; }
  // Bytes of n and of a ciphertext (an integer below n^2).
  size_t modulus_bytes() const { return (modulus_bits_ + 7) / 8; }
  size_t ciphertext_bytes() const { return (n_squared_.bits() + 7) / 8; }
  // The first 8 bytes of BLAKE2b(n): ciphertext batches name the key they belong to.
  uint64_t id() const { return id_; }

 private:
  PublicKey() = default;
  Mpz n_;
  Mpz n_squared_;
  int modulus_bits_ = 0;
  uint64_t id_ = 0;
};

// The secret half: p, q and what decryption precomputes from them. Every field is a SecretMpz,
// so the whole key is wiped when it is destroyed; move-only.
struct SecretKey {
  SecretMpz p, q;
  SecretMpz p_squared, q_squared;
  SecretMpz p_minus_1, q_minus_1;
  SecretMpz hp, hq;           // h_p = L_p(g^(p-1) mod p^2)^(-1) mod p; h_q likewise
  SecretMpz q_inverse_mod_p;  // CRT recombination
  SecretMpz lambda, mu;       // lcm(p-1, q-1) and lambda^(-1) mod n: the plain reference
};

struct KeyPair {
  PublicKey public_key;
  SecretKey secret_key;
};

// Draws p and q (libsodium randomness; the top two bits set so that n has exactly
// options.modulus_bits bits; probable primes after GMP's trial division and 50 Miller-Rabin
// rounds). Returns INVALID_ARGUMENT for a size CheckModulusBits rejects.
absl::StatusOr<KeyPair> GenerateKeyPair(const KeyOptions& options = {});

// The key pair of given primes (tests, deserialization). Returns INVALID_ARGUMENT unless p and q
// are distinct probable primes of equal bit length whose product has a size CheckModulusBits
// accepts.
absl::StatusOr<KeyPair> KeyPairFromPrimes(const Mpz& p, const Mpz& q, bool insecure_for_comparison);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_KEYS_H_
