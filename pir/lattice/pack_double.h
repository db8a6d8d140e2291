// ExpPack(D), "lwe-exppack-d" below the sockets (issue 15, after VIPIR's ExpPack over DoublePIR):
// DoublePIR whose second-level answers the server ring-packs, so that the client needs no hint.
//
// DoublePIR's answer (server.h) holds, for each record byte j, the 4n words a2_j = H2 s2_j + e +
// Delta digits(H1[row]) (second-level LWE ciphertexts whose a-parts are the rows of the hint
// H2 = digits(H1) A2, 4n x n), 4 words h2_j (their a-part is the online h1, sent in the clear)
// and the 4n words h1 shared by the record's bytes. A client decrypts a2_j with H2, the 16 MiB
// hint. Here the server packs a2_j with H2 as the packing matrix (4n = 4,096 rows: one
// ciphertext at N = 4,096) and special ciphertexts it expands from an RLWE ciphertext of s2_j
// (expansion.h): R packed ciphertexts replace R x 4n words and the hint.
//
//   session the client's expansion keys (ExpansionKeyBytes), uploaded once;
//   client  DoublePIR's query (D0 + R D1 words: fresh s1, and s2_j per record byte: reusing one
//           s2 with A2 would reveal the query) and R ciphertexts of the s2_j (SecretCiphertextBytes
//           each); it keeps s1 and the s2_j to decrypt h2 and the first level (wiped with the
//           lookup);
//   server  DoublePIR's answer, then per byte one expansion and packing (the byte's a2_j
//           as b-parts), switched: R ciphertexts, then the h2 and h1 words;
//   client  decrypts each packed ciphertext with z into digits(H1[row]), the h2 words with
//           h1 s2_j into digits(a1), and then the first level as DoublePIR does.
//
// Bytes per lookup: up 4 (D0 + R D1) + R SecretCiphertextBytes; down R x 8N + 4 (4R + 4n);
// reusable keys ExpansionKeyBytes; no hint. Every byte costs an expansion on the server (127 + 7
// key switches on the CPU, deferred_packing.h): this is a protocol for records of a few bytes
// (docs/lattice.md).
#ifndef VEIL_PIR_LATTICE_PACK_DOUBLE_H_
#define VEIL_PIR_LATTICE_PACK_DOUBLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/lattice/packed.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

// Bytes of one response: R x SwitchedBytes + 4 (4R + 4n).
uint64_t PackedDoubleResponseBytes(const RingContext& ring, const Shape& shape);

// The packed phases' noise in words (sigma): DoublePIR's second-level error, a2_j's M1 e2_j
// (D1 centered byte digits of the hint, E[d^2] = (256^2 + 2) / 12, against errors of sigma
// kErrorSigma), and the packing's (ExpPackNoiseBound: H2's entries are words, as the hint's).
// DoublePIR's parameter rule bounds the first, ExpPackNoiseWithinRule the second.
PackingNoise PackedDoubleNoiseBound(const RingContext& ring, const Shape& shape);

class PackedDoubleServer final : public PackedServer {
 public:
  // Wraps a DoublePIR server: its hint H2 becomes the packing matrix (one group of 4n rows).
  // Returns INVALID_ARGUMENT for a SimplePIR server or ring parameters RingContext::Create
  // refuses or whose N is below 4n, FAILED_PRECONDITION without a special prime.
  static absl::StatusOr<std::unique_ptr<PackedDoubleServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default());

  const LweConfig& config() const override { return server_->config(); }
  const RingContext& ring() const override { return ring_; }
  const PackingMatrix& matrix() const override { return matrix_; }
  // R: one per record byte.
  uint64_t ciphertexts() const override { return config().shape.record_bytes; }
  uint64_t selection_bytes() const override { return 0; }
  uint64_t response_bytes() const override {
    return PackedDoubleResponseBytes(ring_, config().shape);
  }

  // One DoublePIR product for the batch, then every query's R expansions and packings spread
  // over the wrapped server's threads. A request's query or ciphertexts of the wrong size, any
  // selection, or ExpandLweSecret's errors fail that request.
  std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const override;

 private:
  PackedDoubleServer(std::unique_ptr<LweServer> server, RingContext ring, PackingMatrix matrix)
      : server_(std::move(server)), ring_(std::move(ring)), matrix_(std::move(matrix)) {}

  std::unique_ptr<LweServer> server_;
  RingContext ring_;
  PackingMatrix matrix_;
};

class PackedDoubleClient final : public PackedClient {
 public:
  // Checks the config (ValidateConfig), draws the session's RLWE secret and makes its expansion
  // keys. Returns ValidateConfig's errors, INVALID_ARGUMENT for a SimplePIR config or ring
  // parameters RingContext::Create refuses or whose N is below 4n, FAILED_PRECONDITION without a
  // special prime.
  static absl::StatusOr<std::unique_ptr<PackedDoubleClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default());

  const RingContext& ring() const override { return ring_; }
  const std::vector<uint8_t>& expansion_keys() const override { return keys_; }
  uint64_t query_words() const override { return config_.shape.query_words(); }
  uint64_t ciphertexts() const override { return config_.shape.record_bytes; }
  uint64_t selection_bytes() const override { return 0; }
  uint64_t response_bytes() const override {
    return PackedDoubleResponseBytes(ring_, config_.shape);
  }

  // A query (MakeQuery, FinishQuery) is DoublePIR's words and the R ciphertexts of the s2_j; it
  // keeps s1 and the s2_j (wiped with it). All but the Deltas of the column and of the record's
  // rows is prepared ahead.
  absl::StatusOr<PreparedQuery> PrepareQuery(RandomSource& rng = SystemRandom()) const override;

  // The record's bytes (record_bytes) from the response to `query`. Returns INVALID_ARGUMENT for
  // a response of another size, a residue ParseSwitched refuses, a query of another client (or
  // moved from) or a record span of the wrong size.
  absl::Status Decode(const PackedQuery& query, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const override;
  // The R packed ciphertexts' phases before rounding, byte after byte: 4n each, the digits of
  // H1[row] in units of Delta = 2^24 plus noise (PackedDoubleNoiseBound). For measuring the
  // noise; the caller wipes them. Returns INVALID_ARGUMENT for a response of another size or a
  // residue ParseSwitched refuses.
  absl::StatusOr<std::vector<uint32_t>> PackedPhases(absl::Span<const uint8_t> response) const;

 protected:
  uint64_t rows() const override { return config_.shape.rows; }
  std::vector<UnitVector> UnitVectorsOf(uint64_t row) const override;

 private:
  PackedDoubleClient(const LweConfig& config, RingContext ring, RlweSecret secret,
                     std::vector<uint8_t> keys)
      : config_(config),
        ring_(std::move(ring)),
        secret_(std::move(secret)),
        keys_(std::move(keys)) {}

  LweConfig config_;
  RingContext ring_;
  RlweSecret secret_;
  std::vector<uint8_t> keys_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACK_DOUBLE_H_
