// Regev encryption over Z_{2^32} as the LWE protocols use it: the public matrix A expanded from a
// seed, fresh secrets and discrete-Gaussian errors from libsodium, encryption of a unit vector
// and rounding back to a byte.
#ifndef VEIL_PIR_LATTICE_LWE_H_
#define VEIL_PIR_LATTICE_LWE_H_

#include <array>
#include <cstdint>

#include "absl/types/span.h"
#include "dpf/key.h"
#include "pir/lattice/params.h"

namespace veil::lattice {

using Seed = std::array<uint8_t, 32>;

// Which public matrix a seed expands to: SimplePIR's (and DoublePIR's first level) A1 over the
// database columns, DoublePIR's A2 over the database rows.
enum class MatrixDomain : uint8_t { kA1 = 1, kA2 = 2 };

// The public LWE matrix A (rows x n words), never stored whole: row r is the ChaCha20 (IETF,
// libsodium) keystream of `seed` with nonce (domain, 0, ...), blocks [r * 64, (r + 1) * 64)
// (4,096 bytes = n little-endian words per row). A 32-bit block counter allows 2^26 rows.
class PublicMatrix {
 public:
  static constexpr uint64_t kMaxRows = uint64_t{1} << 26;

  // Requires rows <= kMaxRows.
  PublicMatrix(const Seed& seed, MatrixDomain domain, uint64_t rows);
  ~PublicMatrix();
  PublicMatrix(const PublicMatrix&) = default;
  PublicMatrix& operator=(const PublicMatrix&) = default;

  uint64_t rows() const { return rows_; }
  // Writes rows [first, first + count) into out (count * n words, row-major). Requires
  // first + count <= rows() and out.size() == count * n.
  void ExpandRows(uint64_t first, uint64_t count, absl::Span<uint32_t> out) const;

 private:
  Seed seed_;
  std::array<uint8_t, 12> nonce_{};
  uint64_t rows_;
};

// A fresh secret: n words uniform in Z_q (SimplePIR's secrets are uniform, not short).
void SampleSecret(dpf::RandomSource& rng, absl::Span<uint32_t> secret);

// Errors from the discrete Gaussian rho(x) = exp(-x^2 / (2 * 6.4^2)), tails beyond |x| = 58 cut
// (mass below 2^-62). Constant time: each sample draws 64 uniform bits u, counts the thresholds
// of the cumulative table of |x| that u reaches with branch-free comparisons over the whole
// table, and applies a random sign arithmetically; no branch or memory index depends on u.
void SampleErrors(dpf::RandomSource& rng, absl::Span<int32_t> errors);

// The cumulative table the sampler scans: entry k = round(2^64 * P(|x| <= k)) (exposed for the
// distribution test).
absl::Span<const uint64_t> ErrorCdtForTesting();

// out = A * secret + errors + Delta * e_hot (mod 2^32): the encryption of the unit vector at
// `hot`. A has out.size() rows; errors.size() == out.size(), secret.size() == n,
// hot < out.size(). Expands A block by block (never all of it).
void EncryptUnitVector(const PublicMatrix& a, absl::Span<const uint32_t> secret,
                       absl::Span<const int32_t> errors, uint64_t hot, absl::Span<uint32_t> out);

// Fresh secret and errors, then EncryptUnitVector. The secret is written to `secret` (the
// caller wipes it); the errors are wiped here.
void EncryptFreshUnitVector(const PublicMatrix& a, uint64_t hot, dpf::RandomSource& rng,
                            absl::Span<uint32_t> secret, absl::Span<uint32_t> out);

// Nearest multiple of Delta = 2^24 to `noisy`, as the plaintext byte (mod 256): branch-free.
inline uint8_t RoundToByte(uint32_t noisy) {
  return static_cast<uint8_t>((noisy + (kDelta >> 1)) >> 24);
}

// sum_k row[k] * secret[k] mod 2^32.
uint32_t Dot(absl::Span<const uint32_t> row, absl::Span<const uint32_t> secret);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_LWE_H_
