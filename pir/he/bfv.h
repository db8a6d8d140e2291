// BFV in RNS form over a BfvContext: keys, encryption, decryption, noise budget and the
// homomorphic operations. Every object carries the id of its parameters; an operation on objects
// of other parameters (or of malformed sizes) returns INVALID_ARGUMENT, naming the object.
//
// Representation: an RNS polynomial is k rows of N residues (prime-major; k = ciphertext primes);
// key material has k + 1 rows (QP, the special prime last). Ciphertexts are in coefficient form
// (as SEAL's BFV); secret, public and key-switching keys in NTT form.
//
// Decryption is m = round(t/Q * [c_0 + c_1 s (+ c_2 s^2)]_Q) mod t, computed with BEHZ's gamma
// correction. The invariant noise v is t/Q * [c(s)]_Q - m - t r; the budget is
// -log2(2 ||v||) bits (SEAL's invariant_noise_budget): decryption is correct while it is > 0.
//
// Rotations and relinearisation use hybrid key switching with the special prime: the input is
// cut into its k RNS digits, each lifted to QP and multiplied with a key that encrypts
// P * s' * [q_i-th CRT basis vector], then divided by P (rounded). Hoisted rotations (Halevi and
// Shoup, "Faster homomorphic linear transformations in HElib", CRYPTO 2018, Sec. 5) share the
// digit decomposition and its NTTs among all rotations of one ciphertext: a Galois automorphism
// permutes NTT slots, so it is applied to the transformed digits.
#ifndef VEIL_PIR_HE_BFV_H_
#define VEIL_PIR_HE_BFV_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv_context.h"
#include "pir/he/sampling.h"

namespace veil::he {

// Ternary secret s in NTT form over QP ((k + 1) x N). Wiped on destruction.
class SecretKey {
 public:
  SecretKey() = default;
  SecretKey(const SecretKey&) = default;
  SecretKey(SecretKey&&) = default;
  // Assignments wipe the key they replace (before a copy may reallocate).
  SecretKey& operator=(const SecretKey& other);
  SecretKey& operator=(SecretKey&& other) noexcept;
  ~SecretKey();

  uint64_t params_id = 0;
  std::vector<uint64_t> ntt;
};

// (p0, p1) = (-a s + e, a) over Q in NTT form; a = ExpandUniform(seed) (in NTT form).
struct PublicKey {
  uint64_t params_id = 0;
  Seed seed{};
  std::vector<uint64_t> p0, p1;
};

// Digit i (i < k): (b_i, a_i) over QP in NTT form, b_i = -a_i s + e_i + P [s']_{q_i} (in row i
// only), a_i = ExpandUniform(seed, domain i). b and a hold k x (k + 1) x N residues.
struct KeySwitchKey {
  Seed seed{};
  std::vector<uint64_t> b, a;
  // b and a as 32-bit residues where internal::NarrowKeySwitchKey (keyswitch.h) made them, which
  // key switching's inner product then reads instead (half the bytes); else empty.
  std::vector<uint32_t> b32, a32;
};

// Switches s^2 to s.
struct RelinKey {
  uint64_t params_id = 0;
  KeySwitchKey key;
};

// One key per Galois element g, switching s(X^g) to s.
struct GaloisKeys {
  uint64_t params_id = 0;
  std::map<uint32_t, KeySwitchKey> keys;
};

// N coefficients mod t.
struct Plaintext {
  uint64_t params_id = 0;
  std::vector<uint64_t> coeffs;
};

// A plaintext prepared for MultiplyPlain: its centered lift (-t/2, t/2] to Q, in NTT form.
struct PlaintextNtt {
  uint64_t params_id = 0;
  std::vector<uint64_t> ntt;
};

// size() polynomials of k x N residues in coefficient form. A symmetric encryption keeps the
// seed of its c_1 (= ExpandUniform(seed)) so that serialization can send the seed instead;
// every operation returns ciphertexts without a seed.
struct Ciphertext {
  uint64_t params_id = 0;
  size_t size = 0;
  std::vector<uint64_t> data;
  std::optional<Seed> seed;

  uint64_t* poly(size_t i, size_t poly_words) { return data.data() + i * poly_words; }
  const uint64_t* poly(size_t i, size_t poly_words) const { return data.data() + i * poly_words; }
};

// Keys. The secret from libsodium; errors as SampleError (CBD(21)).
SecretKey GenerateSecretKey(const BfvContext& ctx);
absl::StatusOr<PublicKey> GeneratePublicKey(const BfvContext& ctx, const SecretKey& sk);
absl::StatusOr<RelinKey> GenerateRelinKey(const BfvContext& ctx, const SecretKey& sk);
// Returns INVALID_ARGUMENT for an element that is even or not below 2N.
absl::StatusOr<GaloisKeys> GenerateGaloisKeys(const BfvContext& ctx, const SecretKey& sk,
                                              const std::vector<uint32_t>& elements);

// SEAL's map from a row rotation to its Galois element (NOTES.md: N = 8: 0 -> 15, 1 -> 3,
// 2 -> 9, -1 -> 11): 3^step mod 2N for step > 0, 3^(N/2 + step) for step < 0, and 2N - 1
// (swap the two rows of slots) for step 0. Returns INVALID_ARGUMENT if |step| >= N/2.
absl::StatusOr<uint32_t> GaloisElementForStep(int log_n, int step);

// Encryption of m (coefficients mod t) as c(s) = round(Q m / t) + e.
absl::StatusOr<Ciphertext> Encrypt(const BfvContext& ctx, const PublicKey& pk, const Plaintext& m);
// Symmetric, seeded: c_1 = ExpandUniform(fresh seed), c_0 = -c_1 s + e + round(Q m / t).
absl::StatusOr<Ciphertext> EncryptSymmetric(const BfvContext& ctx, const SecretKey& sk,
                                            const Plaintext& m);
// Ciphertexts of size 2 or 3.
absl::StatusOr<Plaintext> Decrypt(const BfvContext& ctx, const SecretKey& sk, const Ciphertext& ct);
// The invariant noise budget in bits, max(0, log2 Q - log2 ||t [c(s)]_Q|| - 1), as SEAL reports.
absl::StatusOr<int> NoiseBudget(const BfvContext& ctx, const SecretKey& sk, const Ciphertext& ct);

// Homomorphic operations (INVALID_ARGUMENT for mismatched parameters, sizes or keys; Add and Sub
// take equal sizes; Multiply takes two size-2 ciphertexts and returns size 3).
absl::StatusOr<Ciphertext> Add(const BfvContext& ctx, const Ciphertext& a, const Ciphertext& b);
absl::StatusOr<Ciphertext> Sub(const BfvContext& ctx, const Ciphertext& a, const Ciphertext& b);
absl::StatusOr<PlaintextNtt> PrepareForMultiply(const BfvContext& ctx, const Plaintext& m);
// c * m: the ciphertext is transformed, multiplied slot-wise and transformed back (4k NTTs).
absl::StatusOr<Ciphertext> MultiplyPlain(const BfvContext& ctx, const Ciphertext& ct,
                                         const PlaintextNtt& m);
absl::StatusOr<Ciphertext> Multiply(const BfvContext& ctx, const Ciphertext& a,
                                    const Ciphertext& b);
absl::StatusOr<Ciphertext> Relinearize(const BfvContext& ctx, const Ciphertext& ct,
                                       const RelinKey& rk);
// Size-2 inputs only (relinearise first). NOT_FOUND if the Galois key is missing.
absl::StatusOr<Ciphertext> ApplyGalois(const BfvContext& ctx, const Ciphertext& ct, uint32_t galois,
                                       const GaloisKeys& gk);
// Rotates each row of slots left by `step` (slot i takes slot i + step), or swaps the rows
// (RotateColumns). Errors of GaloisElementForStep and ApplyGalois.
absl::StatusOr<Ciphertext> RotateRows(const BfvContext& ctx, const Ciphertext& ct, int step,
                                      const GaloisKeys& gk);
absl::StatusOr<Ciphertext> RotateColumns(const BfvContext& ctx, const Ciphertext& ct,
                                         const GaloisKeys& gk);
// Several rotations of one ciphertext sharing one decomposition (same results as RotateRows).
absl::StatusOr<std::vector<Ciphertext>> RotateRowsHoisted(const BfvContext& ctx,
                                                          const Ciphertext& ct,
                                                          const std::vector<int>& steps,
                                                          const GaloisKeys& gk);

// Validation shared by the operations and by deserialization: ids and sizes.
absl::Status CheckCiphertext(const BfvContext& ctx, const Ciphertext& ct, const char* what);
absl::Status CheckSecretKey(const BfvContext& ctx, const SecretKey& sk);
absl::Status CheckKeySwitchKey(const BfvContext& ctx, const KeySwitchKey& key, const char* what);

namespace internal {
// The seeded halves exactly as generation makes them (deserialization re-expands them):
// c_1 of a symmetric ciphertext (k rows, coefficient form), p_1 of a public key (k rows, NTT
// form), the a_i of a key-switching key (k x (k + 1) rows, NTT form).
void ExpandCiphertextC1(const BfvContext& ctx, const Seed& seed, uint64_t* c1);
void ExpandPublicKeyP1(const BfvContext& ctx, const Seed& seed, uint64_t* p1);
void ExpandKeySwitchA(const BfvContext& ctx, const Seed& seed, uint64_t* a);
// A key from `from` (s', NTT form over QP) to `under` (the secret the result decrypts under),
// with a fresh seed and errors from libsodium.
KeySwitchKey MakeKeySwitchKey(const BfvContext& ctx, const uint64_t* under, const uint64_t* from);
// PrepareForMultiply's work on N coefficients below t, into out (k x N).
void LiftForMultiply(const BfvContext& ctx, const uint64_t* coeffs, uint64_t* out);
}  // namespace internal

}  // namespace veil::he

#endif  // VEIL_PIR_HE_BFV_H_
