// Regev encryption over Z_{2^32} as the LWE protocols use it: the public matrix A expanded from a
// seed, fresh secrets and discrete-Gaussian errors from libsodium, encryption of a unit vector
// and rounding back to a byte.
#ifndef VEIL_PIR_LATTICE_LWE_H_
#define VEIL_PIR_LATTICE_LWE_H_

#include <array>
#include <cstdint>

#include "absl/types/span.h"
#include "dpf/key.h"
#include "pir/lattice/aes_ctr.h"
#include "pir/lattice/params.h"

namespace veil::lattice {

using Seed = std::array<uint8_t, 32>;

// Which public matrix a seed expands to: SimplePIR's (and DoublePIR's first level) A1 over the
// database columns, DoublePIR's A2 over the database rows.
enum class MatrixDomain : uint8_t { kA1 = 1, kA2 = 2 };

// The public LWE matrix A (rows x n words), never stored whole: AES-128 in counter mode
// (pir/lattice/aes_ctr.h) under the key BLAKE2b-128(key = seed, message = domain); row r is
// blocks [256 r, 256 (r + 1)) of the stream, 4,096 bytes = n little-endian words. AES-CTR with
// VAES expands it an order of magnitude faster than libsodium's ChaCha20 (~27 against ~1-2 GB/s
// here), which matters because the client expands D0 x n words for every query.
class PublicMatrix {
 public:
  PublicMatrix(const Seed& seed, MatrixDomain domain, uint64_t rows);
  ~PublicMatrix();
  PublicMatrix(const PublicMatrix&) = delete;
  PublicMatrix& operator=(const PublicMatrix&) = delete;

  uint64_t rows() const { return rows_; }
  // Writes rows [first, first + count) into out (count * n words, row-major). Requires
  // first + count <= rows() and out.size() == count * n.
  void ExpandRows(uint64_t first, uint64_t count, absl::Span<uint32_t> out) const;

 private:
  internal::AesCtrKey key_;
  uint64_t rows_;
};

// Where secrets and errors come from: the system CSPRNG in production (SystemRandom); tests
// implement it with a seeded stream of their own, which the library does not ship.
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual void Fill(absl::Span<uint8_t> out) = 0;
};

// libsodium's randombytes_buf.
RandomSource& SystemRandom();

// A fresh secret: n words uniform in Z_q (SimplePIR's secrets are uniform, not short).
void SampleSecret(RandomSource& rng, absl::Span<uint32_t> secret);

// Errors from the discrete Gaussian rho(x) = exp(-x^2 / (2 * 6.4^2)), tails beyond |x| = 58 cut
// (mass below 2^-62). Constant time: each sample draws 64 uniform bits u, counts the thresholds
// of the cumulative table of |x| that u reaches with branch-free comparisons over the whole
// table, and applies a random sign arithmetically; no branch or memory index depends on u.
void SampleErrors(RandomSource& rng, absl::Span<int32_t> errors);

// The cumulative table the sampler scans: entry k = round(2^64 * P(|x| <= k)) (exposed for the
// distribution test).
absl::Span<const uint64_t> ErrorCdtForTesting();

// A hot position that is no entry's: its vector is an encryption of zero, made ahead of the row
// it will select (AddUnitVector adds the row's Delta later).
inline constexpr uint64_t kNoHot = ~uint64_t{0};

// For each j < hots.size(): out[j * m .. (j + 1) * m) = A * secret_j + errors_j + Delta * e_hot_j
// (mod 2^32), the encryption of the unit vector at hots[j], where A has m rows, secret_j =
// secrets[j * n .. (j + 1) * n) and errors_j = errors[j * m .. (j + 1) * m). Requires
// secrets.size() == count * n, errors.size() == out.size() == count * m and every hot < m or
// kNoHot. A is expanded once, block by block (never all of it), for all the vectors. The hot
// positions are the client's secret: every entry adds Delta & mask(entry == hot) (no branch, no
// address chosen by them).
void EncryptUnitVectors(const PublicMatrix& a, absl::Span<const uint32_t> secrets,
                        absl::Span<const int32_t> errors, absl::Span<const uint64_t> hots,
                        absl::Span<uint32_t> out);

// Fresh secrets (written to `secrets`, count * n words, which the caller wipes) and errors (wiped
// here), then EncryptUnitVectors.
void EncryptFreshUnitVectors(const PublicMatrix& a, absl::Span<const uint64_t> hots,
                             RandomSource& rng, absl::Span<uint32_t> secrets,
                             absl::Span<uint32_t> out);

// A number no other client object of this process got: what ties a query prepared ahead to the
// client that made it.
uint64_t NewClientId();

// Turns an encryption of zero (hot kNoHot above) into the unit vector's at `hot` < out.size():
// Delta & mask(entry == hot) added to every entry, as EncryptUnitVectors does.
void AddUnitVector(uint64_t hot, absl::Span<uint32_t> out);

// Nearest multiple of Delta = 2^24 to `noisy`, as the plaintext byte (mod 256): branch-free.
inline uint8_t RoundToByte(uint32_t noisy) {
  return static_cast<uint8_t>((noisy + (kDelta >> 1)) >> 24);
}

// 0xff if a == b, else 0, without a branch: selects a record's bytes among a column's slots
// without choosing an address by the (secret) slot.
inline uint8_t ByteMask(uint64_t a, uint64_t b) {
  const uint64_t d = a ^ b;
  return static_cast<uint8_t>(((d | (0 - d)) >> 63) - 1);
}

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_LWE_H_
