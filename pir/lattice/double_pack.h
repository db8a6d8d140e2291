// Double packing, "lwe-double-pack" below the sockets (issue 15, after VIPIR): ExpPack(S)'s
// c = ceil(D1 / N) packed ciphertexts, switched to q', become the database of a second SimplePIR
// fold, whose answer is packed again, so that 8w ciphertexts come back whatever c.
//
//   first   ExpPack(S) (pack_simple.h): a SimplePIR query (D0 words, secret s1) and the RLWE
//           ciphertext of s1; the server expands, packs and switches: c ciphertexts of 2N
//           residues below q' < 2^32.
//   second  their residues in four byte digits are a matrix M2 of 8wN rows (a record's window of
//           w ciphertexts, hybrid.h's, element e = h N + i of ciphertext u at rows
//           4 (2N u + e) .. + 3, digit d = bits 8d .. 8d + 7, centered) by G = c - w + 1 columns
//           (the windows' starts). The client sends a second SimplePIR query for its window's
//           start (G words, secret s2, matrix A2 = PublicMatrix(seed, kA2, G)) and the RLWE
//           ciphertext of s2; the answer M2 q2 (8wN words) is packed with the special
//           ciphertexts of s2's (never formed: below): 8w ciphertexts.
//   client  unpacks the digits with z, rebuilds the w first-level ciphertexts, decrypts them
//           with z and picks its record's bytes with masks.
//
// The second packing needs no per-query transform of M2 A2 (8wN x n words, ~24,000 NTTs): the
// packed sums are linear in the a-parts, sum_j (sum_t M2[., t] A2[t, j]) K_j = sum_t M2(X)_t W_t
// with W_t = sum_j A2[t, j] K_j (an RLWE encryption of <A2[t], s2>), so the server computes the
// G ciphertexts W_t and multiplies each by its column's digit polynomials (c 8 k NTTs). It
// expands nothing: the K_j being T(X^{-j} c2) (expansion.h's TracePacking), W_t = T(A2_t(X) c2)
// with A2_t(X) = sum_j A2[t, j] X^{-j}, L key switches per column (G L in all: 60 at 2^24 x 64 B
// instead of an expansion's 1,023). The a-parts are then integers up to G 128 2^31 rather than
// words centered mod 2^32; they differ from those by multiples of 2^32, which the encoding
// absorbs to within 2^-23 words per unit (rlwe.h), and the root's fresh error grows with them;
// the key switches' errors do not (DoublePackNoiseBound).
//
// Bytes per lookup: up 4 (D0 + G) + 2 x SecretCiphertextBytes; down 8w x 8N; reusable keys
// ExpansionKeyBytes (one set: both expansions use z).
#ifndef VEIL_PIR_LATTICE_DOUBLE_PACK_H_
#define VEIL_PIR_LATTICE_DOUBLE_PACK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/hybrid.h"
#include "pir/lattice/pack_simple.h"
#include "pir/lattice/packed.h"

namespace veil::lattice {

// The second fold's shape: 8wN rows (digit rows of the window) by G columns.
struct DoublePackShape {
  HybridWindow window;
  uint64_t rows = 0;            // 8 w N
  uint64_t columns = 0;         // G
  uint64_t response_bytes = 0;  // 8w x SwitchedBytes
};
DoublePackShape DoublePackShapeFor(const RingContext& ring, const Shape& shape);

// The second level's noise in words, as a standard deviation (an expectation: one lookup's
// strays by up to ~30%, its phases sharing G LWE errors and the G errors of its sums W_t): the
// second query's errors through M2 (G digits each); the second packing's, the root's fresh
// error through T (ExpandedKeyVariance with no switch) against a-parts of variance
// G E[d^2] Var(word) (E[d^2] averaged over a residue's four centered digits, exact for
// residues uniform below q') and T's key switches (TraceSwitchVariance) through the digits
// alone; and the switch to q'. DoublePackTest measures it at the test ring (LWE errors
// dominate) and with too little modulus (the fresh error does). The rule: 7.54 sigma <=
// Delta / 4 (a failure per digit below 2^-40 with half the margin).
PackingNoise DoublePackNoiseBound(const RingContext& ring, uint64_t columns);
bool DoublePackNoiseWithinRule(const RingContext& ring, uint64_t columns);

class DoublePackedServer final : public PackedServer {
 public:
  // Wraps a SimplePIR server as PackedSimpleServer::Create does. Returns its errors.
  static absl::StatusOr<std::unique_ptr<DoublePackedServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default());

  const LweConfig& config() const override { return first_->config(); }
  const RingContext& ring() const override { return first_->ring(); }
  const PackingMatrix& matrix() const override { return first_->matrix(); }
  uint64_t query_words() const override { return config().shape.d0 + second_.columns; }
  uint64_t ciphertexts() const override { return 2; }
  uint64_t selection_bytes() const override { return 0; }
  uint64_t response_bytes() const override { return second_.response_bytes; }
  // The first level's (the second level's sums W_t stay on the CPU).
  const PackingEngine& packing_engine() const override { return first_->packing_engine(); }
  void set_packing_engine(std::unique_ptr<PackingEngine> engine) override {
    first_->set_packing_engine(std::move(engine));
  }
  // The sums W_t switch on the CPU whatever the first level's engine.
  bool host_switching() const override { return true; }

  // The first level for every request (one SimplePIR product), then each query's second fold
  // and packing, the queries spread over the threads. The sums W_t need nothing of the first
  // level: where a device's engine runs it (the CPU idle meanwhile), they are made beside it on
  // the server's threads, else after it.
  std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const override;

 private:
  DoublePackedServer(std::unique_ptr<PackedSimpleServer> first, DoublePackShape second,
                     TracePacking w)
      : first_(std::move(first)), second_(second), w_(std::move(w)) {}

  // The sums W_t of one query's second ciphertext (on `threads` workers): TracePacking::Sums'
  // errors.
  absl::StatusOr<std::vector<uint64_t>> SecondSums(absl::Span<const uint8_t> ciphertext,
                                                   const he::GaloisKeys& keys, int threads) const;
  // The second fold and packing of one query with its sums W_t (on `threads` workers).
  absl::StatusOr<std::vector<uint8_t>> Second(absl::Span<const SwitchedCiphertext> first,
                                              absl::Span<const uint32_t> query,
                                              absl::Span<const uint64_t> sums, int threads) const;

  std::unique_ptr<PackedSimpleServer> first_;
  DoublePackShape second_;
  TracePacking w_;  // the sums W_t of A2 (G x n scalars)
};

class DoublePackedClient final : public PackedClient {
 public:
  // As PackedSimpleClient::Create.
  static absl::StatusOr<std::unique_ptr<DoublePackedClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default());

  const RingContext& ring() const override { return first_->ring(); }
  const std::vector<uint8_t>& expansion_keys() const override { return first_->expansion_keys(); }
  uint64_t query_words() const override { return config_.shape.d0 + second_.columns; }
  uint64_t ciphertexts() const override { return 2; }
  uint64_t selection_bytes() const override { return 0; }
  uint64_t response_bytes() const override { return second_.response_bytes; }

  // A query (MakeQuery, FinishQuery) is both levels' queries and ciphertexts; all but the
  // Deltas of the column and of the window's start is prepared ahead.
  absl::StatusOr<PreparedQuery> PrepareQuery(RandomSource& rng = SystemRandom()) const override;
  // Returns INVALID_ARGUMENT for a response of another size, a residue or rebuilt first-level
  // residue not below its prime, a query of another row count or a record of the wrong size.
  absl::Status Decode(const PackedQuery& query, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const override;
  // The second level's 8wN phases before rounding (Decode rounds each to a digit of a
  // first-level residue: digit d of element e at 4 e + d, in units of Delta = 2^24), for
  // measuring the noise. The caller wipes them. Returns INVALID_ARGUMENT for a response of
  // another size or a residue not below q'.
  absl::StatusOr<std::vector<uint32_t>> SecondLevelPhases(absl::Span<const uint8_t> response) const;

 protected:
  uint64_t rows() const override { return config_.shape.rows; }
  std::vector<UnitVector> UnitVectorsOf(uint64_t row) const override;

 private:
  DoublePackedClient(const LweConfig& config, std::unique_ptr<PackedSimpleClient> first,
                     DoublePackShape second)
      : config_(config), first_(std::move(first)), second_(second) {}

  LweConfig config_;
  std::unique_ptr<PackedSimpleClient> first_;  // ExpPack(S): z, the keys, the first query
  DoublePackShape second_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_DOUBLE_PACK_H_
