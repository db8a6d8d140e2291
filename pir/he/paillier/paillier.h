// Paillier encryption, decryption and the homomorphic operations (Paillier, EUROCRYPT'99).
//
// With g = n + 1, Enc(m; r) = (1 + m n) r^n mod n^2: one multiplication once r^n is known, which
// is why the randomness r^n comes from a Randomizer (randomizer.h) — drawn fresh (textbook),
// from a precomputed pool, or from a fixed-base table. Decrypt uses the Chinese remainder theorem
// (Paillier, Section 7); DecryptPlain, the textbook L(c^lambda mod n^2) mu mod n, is its
// reference and returns the same plaintext for every ciphertext.
//
// Side channels: every exponentiation with a secret exponent or modulus uses mpz_powm_sec, and
// encryption's (1 + m n) r^n (secret m and r^n) uses GMP's side-channel silent mpn_sec_* limb
// functions (SecureModMul). The divisions by p and reductions modulo p around decryption's
// exponentiations are GMP's ordinary ones, whose running time depends on operand sizes (fixed by
// the key) rather than values, though GMP does not promise it.
#ifndef VEIL_PIR_HE_PAILLIER_PAILLIER_H_
#define VEIL_PIR_HE_PAILLIER_PAILLIER_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/mpz.h"

namespace veil::he {

// An integer in [1, n^2) under some public key (the key is not carried: batches name it,
// serialize.h).
struct Ciphertext {
  Mpz value;
  friend bool operator==(const Ciphertext& a, const Ciphertext& b) { return a.value == b.value; }
};

// Source of r^n mod n^2 for fresh, uniformly random units r of Z_n (Z_n^* or, for the
// fixed-base variant, the subgroup that DJN's h generates). Implementations are thread-safe.
class Randomizer {
 public:
  virtual ~Randomizer() = default;
  // Sets rn to the next r^n mod n^2. Each value is handed out once.
  virtual absl::Status Next(Mpz& rn) = 0;
};

// Enc(m) = (1 + m n) r^n mod n^2 with r^n from `randomness`. Returns INVALID_ARGUMENT if m is not
// in [0, n), or the randomizer's error (RESOURCE_EXHAUSTED for an empty pool).
absl::StatusOr<Ciphertext> Encrypt(const PublicKey& key, const Mpz& m, Randomizer& randomness);

// Enc(m; r) with a given unit r: known-answer tests and the textbook baseline. Returns
// INVALID_ARGUMENT if m is not in [0, n) or r not in [1, n).
absl::StatusOr<Ciphertext> EncryptWithR(const PublicKey& key, const Mpz& m, const Mpz& r);

// CRT decryption. Returns INVALID_ARGUMENT if c is not in [1, n^2).
absl::StatusOr<Mpz> Decrypt(const KeyPair& keys, const Ciphertext& c);
// The textbook decryption, the reference of Decrypt (same results, several times slower).
absl::StatusOr<Mpz> DecryptPlain(const KeyPair& keys, const Ciphertext& c);

// Homomorphic operations on ciphertexts of the same key (not checked here: batches carry the
// key id). Add: Enc(m1 + m2 mod n); AddPlain: Enc(m1 + m2 mod n) (INVALID_ARGUMENT unless
// m2 in [0, n)); MulConst: Enc(k m1 mod n) (INVALID_ARGUMENT unless k in [0, n); exponentiation
// by the public k).
Ciphertext Add(const PublicKey& key, const Ciphertext& a, const Ciphertext& b);
absl::StatusOr<Ciphertext> AddPlain(const PublicKey& key, const Ciphertext& a, const Mpz& m);
absl::StatusOr<Ciphertext> MulConst(const PublicKey& key, const Ciphertext& a, const Mpz& k);

// acc = acc * c mod n^2 with `scratch` as the double-length product: the allocation-free inner
// step of Add, for aggregation loops.
inline void MulModInto(const PublicKey& key, Mpz& acc, const Mpz& c, Mpz& scratch) {
  mpz_mul(scratch.get(), acc.get(), c.get());
  mpz_mod(acc.get(), scratch.get(), key.n_squared().get());
}

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_PAILLIER_H_
