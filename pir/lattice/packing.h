// Ring packing (issue 15): N LWE ciphertexts (a_i, b_i) over Z_{2^32} with secret s in
// Z_{2^32}^n become one RLWE ciphertext over Q whose coefficient i decrypts to the LWE phase
// b_i - <a_i, s> mod 2^32 (rlwe.h's scaled words), so a client decrypts an LWE answer with its
// RLWE secret alone: no hint.
//
// The packing keys ("special ciphertexts", as VIPIR and Tiptoe call them) are, for each j < n,
// an RLWE encryption K_j = (beta_j, alpha_j) of the constant round(Q s_j / 2^32). With
// A_j = sum_i centered(a_{i,j}) X^i (column j of the a-parts as a polynomial, entries centered
// in [-2^31, 2^31)) and B = sum_i round(Q b_i / 2^32) X^i, the packed ciphertext is
//     (B - sum_j A_j beta_j,  -sum_j A_j alpha_j),
// whose phase at coefficient i is (Q / 2^32) (b_i - <a_i, s> mod 2^32) plus the noise bounded by
// PackingNoiseBound. In the NTT domain this is a GEMM: for each of the N slots of each prime, the
// matrix of the a-parts' transforms (groups x n) times the keys (n x 2), which PackingMatrix
// prepares once per matrix (for SimplePIR, the hint H = DB A1 is the a-parts of every answer)
// and he::internal::PlainDotProduct (lazy reduction, IFMA) computes.
//
// The keys encrypt the LWE secret, which SimplePIR draws fresh for every query (reusing it with
// the same A would reveal the query), so these keys are per query: n RLWE ciphertexts,
// PackingKeyBytes = 48 MiB at n = 1024: the reference form, which the tests use. ExpPack
// (expansion.h) sends one RLWE ciphertext instead, which the server expands into the K_j with
// automorphisms and feeds to a PackAccumulator.
#ifndef VEIL_PIR_LATTICE_PACKING_H_
#define VEIL_PIR_LATTICE_PACKING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/sampling.h"
#include "pir/lattice/rlwe.h"

namespace veil::lattice {

// K_j for j < lwe_n in NTT form over Q, as sent. Only beta_j travels and is kept (k x N
// residues below 2^32 per key, key-major); alpha_j is expanded from the public seed
// (he::ExpandUniform, domain j) where it is used, a few keys at a time, so that neither side
// holds all of it.
//
// Wire form: the 32-byte seed, lwe_n as a little-endian 32-bit word, then beta as little-endian
// 32-bit residues: PackingKeyBytes = 36 + 4 n k N (50,331,684 bytes at n = 1024, k = 3, N = 4096).
inline constexpr uint32_t kPackKeysPerBlock = 16;

uint64_t PackingKeyBytes(const RingContext& ctx, uint32_t lwe_n);

// The client's keys (wire form) for its LWE secret (lwe_n words uniform in Z_{2^32}) under its
// RLWE secret, with a fresh seed and fresh errors from libsodium. The messages are computed
// without branches on the secret. Returns INVALID_ARGUMENT for an empty LWE secret.
absl::StatusOr<std::vector<uint8_t>> MakePackingKeys(const RingContext& ctx,
                                                     const RlweSecret& secret,
                                                     absl::Span<const uint32_t> lwe_secret);

// Keys as the server reads them: a view of the wire bytes, valid while they are.
struct PackingKeysView {
  uint32_t lwe_n = 0;
  he::Seed seed{};
  absl::Span<const uint8_t> beta;  // 4 bytes per residue
};

// Checks keys' wire form without copying it. Returns INVALID_ARGUMENT for a size other than
// PackingKeyBytes(ctx, expected_lwe_n), another lwe_n, or a residue not below its prime.
absl::StatusOr<PackingKeysView> ParsePackingKeys(const RingContext& ctx, uint32_t expected_lwe_n,
                                                 absl::Span<const uint8_t> bytes);

// The a-parts of `rows` LWE ciphertexts prepared for Pack: group g holds rows [g N, (g + 1) N)
// (the last one padded with zero rows), and for each g and j the polynomial A_{g,j} in NTT form
// over Q. Memory: groups x n x k x N residues of 4 bytes (bytes()): the primes are below 2^32,
// and what every query streams is half what 64-bit words would be.
class PackingMatrix {
 public:
  // a: rows x lwe_n words, row-major. Returns INVALID_ARGUMENT if rows or lwe_n is 0 or
  // a.size() != rows * lwe_n.
  static absl::StatusOr<PackingMatrix> Create(const RingContext& ctx, absl::Span<const uint32_t> a,
                                              uint64_t rows, uint32_t lwe_n);
  // A matrix given by its transforms: `groups` x lwe_n polynomials A_{g,j} of k x N residues below
  // their primes, A_{g,j} at (g lwe_n + j) k N (the folded matrix of deferred packing:
  // DeferredPacking::FoldedMatrix); rows() is groups x N. Returns INVALID_ARGUMENT if groups or
  // lwe_n is 0, the transforms are not groups x lwe_n x k x N words or a residue is not below
  // its prime.
  static absl::StatusOr<PackingMatrix> FromTransforms(const RingContext& ctx, uint64_t groups,
                                                      uint32_t lwe_n,
                                                      std::vector<uint32_t> transforms);

  uint64_t rows() const { return rows_; }
  uint32_t lwe_n() const { return lwe_n_; }
  uint64_t groups() const { return groups_; }
  uint64_t bytes() const { return ntt_.size() * sizeof(uint32_t); }
  // Groups [first, first + count) as a matrix of their rows (one device's shard of a response).
  // Returns INVALID_ARGUMENT for an empty range or one past the matrix's groups.
  absl::StatusOr<PackingMatrix> Groups(const RingContext& ctx, uint64_t first,
                                       uint64_t count) const;

  // A_{g,j}: k x N residues.
  const uint32_t* Polynomial(uint64_t group, uint32_t j) const {
    return ntt_.data() + (group * lwe_n_ + j) * stride_;
  }

 private:
  PackingMatrix(uint64_t rows, uint32_t lwe_n, uint64_t groups, size_t stride)
      : rows_(rows), lwe_n_(lwe_n), groups_(groups), stride_(stride) {}

  uint64_t rows_;
  uint32_t lwe_n_;
  uint64_t groups_;
  size_t stride_;  // k x N
  std::vector<uint32_t> ntt_;
};

// The packing sums of one response, fed the special ciphertexts K_j a block at a time, in any
// order: Pack feeds the wire keys in order, ExpPack (expansion.h) the expansion's leaves as they
// come. Holds groups x 2 x k x N words of 8 bytes. Not thread-safe.
class PackAccumulator {
 public:
  // Both must outlive the accumulator.
  PackAccumulator(const RingContext& ctx, const PackingMatrix& matrix);
  // The same summing into `storage` (PackingSumWords long, zeroed here; it must outlive the
  // accumulator): a buffer the caller reuses, since fresh megabytes per query cost page faults.
  PackAccumulator(const RingContext& ctx, const PackingMatrix& matrix,
                  absl::Span<uint64_t> storage);
  PackAccumulator(PackAccumulator&&) = default;
  PackAccumulator(const PackAccumulator&) = delete;
  PackAccumulator& operator=(const PackAccumulator&) = delete;

  // Keys index[0 .. count) (count <= kPackKeysPerBlock), their halves beta and alpha in NTT form
  // over Q, count x k x N residues each, used for every group now.
  void Add(uint32_t count, const uint32_t* index, const uint64_t* beta, const uint64_t* alpha);
  // Adds the keys another accumulator of the same matrix took (one per thread, merged at the end).
  void Merge(const PackAccumulator& other);

  // INVALID_ARGUMENT unless the keys added were each of the matrix's n exactly once.
  absl::Status CheckComplete() const;
  // The sums so far (PackingSumWords residues).
  absl::Span<const uint64_t> sums() const { return sums_; }

  // CheckComplete, then PackedCiphertexts of the sums.
  absl::StatusOr<std::vector<RlweCiphertext>> Finish(absl::Span<const uint32_t> b);

 private:
  const RingContext& ctx_;
  const PackingMatrix& matrix_;
  std::vector<uint64_t> owned_;  // unless the caller lent the storage
  absl::Span<uint64_t> sums_;    // per group: (sum_j A_{g,j} beta_j, sum_j A_{g,j} alpha_j)
  std::vector<bool> added_;
  uint64_t added_count_ = 0;
  bool duplicate_ = false;
};

// The packing sums' size for a matrix: groups x 2 x k x N (PackAccumulator's layout).
uint64_t PackingSumWords(const RingContext& ctx, const PackingMatrix& matrix);

// One RLWE ciphertext per group of the matrix (NTT form over Q) from complete packing sums
// (PackingSumWords) and the b-parts b (rows words): coefficient i of group g decrypts to
// b_{gN+i} - <a_{gN+i}, s> mod 2^32 (zero past the last row); the groups on up to `threads`
// threads. Returns INVALID_ARGUMENT if b.size() != matrix.rows() or sums.size() !=
// PackingSumWords.
absl::StatusOr<std::vector<RlweCiphertext>> PackedCiphertexts(const RingContext& ctx,
                                                              const PackingMatrix& matrix,
                                                              absl::Span<const uint64_t> sums,
                                                              absl::Span<const uint32_t> b,
                                                              int threads = 1);

// PackAccumulator::Finish for the wire keys, taken kPackKeysPerBlock at a time (alpha expanded,
// beta widened). Returns INVALID_ARGUMENT if b.size() != matrix.rows() or the keys are for
// another n or of the wrong size.
absl::StatusOr<std::vector<RlweCiphertext>> Pack(const RingContext& ctx,
                                                 const PackingMatrix& matrix,
                                                 const PackingKeysView& keys,
                                                 absl::Span<const uint32_t> b);

// One packed ciphertext (B - sum0, -sum1) from its b-parts (at most N words: coefficient i of B
// encodes b[i], the rest are zero) and its packing sums sum0 = sum_j A_j beta_j and
// sum1 = sum_j A_j alpha_j (k x N residues, NTT form). PackAccumulator::Finish per group, and
// double packing's second level (double_pack.h), which sums differently.
RlweCiphertext PackedCiphertext(const RingContext& ctx, absl::Span<const uint32_t> b,
                                const uint64_t* sum0, const uint64_t* sum1);

// Packed ciphertexts (of Pack or PackAccumulator::Finish) switched to the response modulus
// (ModSwitch): the response, one SwitchedBytes(ctx) ciphertext per group.
std::vector<SwitchedCiphertext> SwitchResponse(const RingContext& ctx,
                                               absl::Span<const RlweCiphertext> packed);

// A response's wire form: its switched ciphertexts one after the other (SerializeSwitched), and
// back. ParseResponse returns INVALID_ARGUMENT for a size that is not a whole number of
// ciphertexts, and ParseSwitched's errors.
std::vector<uint8_t> SerializeResponse(absl::Span<const SwitchedCiphertext> response);
absl::StatusOr<std::vector<SwitchedCiphertext>> ParseResponse(const RingContext& ctx,
                                                              absl::Span<const uint8_t> bytes);

// The client: the first `rows` LWE phases of a response (group-major). Returns INVALID_ARGUMENT
// if the response has fewer than ceil(rows / N) ciphertexts, or DecryptSwitched's errors.
absl::StatusOr<std::vector<uint32_t>> UnpackPhases(const RingContext& ctx, const RlweSecret& secret,
                                                   absl::Span<const SwitchedCiphertext> response,
                                                   uint64_t rows);

// What packing and switching add to a decrypted LWE phase, in units of Z_{2^32} (the LWE words):
//   at Q:   the keys' errors sum_j A_j e_j (n N terms: |a| <= 2^31 centered, |e| <= 21,
//           variance 2^64 / 12 x 10.5 each), the keys' rounding sum_j a_{i,j} r_j (|r_j| <= 1/2)
//           and B's rounding (1/2), all times 2^32 / Q;
//   at q':  the switch's rounding r0 + r1 z (|r| <= 1/2, z ternary: N terms of variance 1/18
//           plus 1/12) times 2^32 / q', and the final rounding to a word (1/2).
// sigma: the standard deviation of the sum (Gaussian by the central limit theorem); worst_case:
// the sum of the deterministic bounds.
struct PackingNoise {
  double sigma = 0;
  double worst_case = 0;
};
PackingNoise PackingNoiseBound(const RingContext& ctx, uint32_t lwe_n);
// The same for keys whose errors have variance key_variance and absolute value at most
// key_worst per coefficient (PackingNoiseBound: fresh CBD(21) errors, 10.5 and 21).
PackingNoise PackingNoiseForKeys(const RingContext& ctx, uint32_t lwe_n, double key_variance,
                                 double key_worst);

// The rule: packing may take at most 1/256 of the LWE rounding margin Delta / 2 = 2^23 in the
// worst case, so that LWE's own correctness rule (params.h, at most 2^-40 per lookup) still
// holds to within a factor (1 - 2^-8)^2 in its exponent. Holds for RingParams::Default() at
// n = 1024 (worst case 2^14.0 = 2^-9 of the margin).
bool PackingNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACKING_H_
