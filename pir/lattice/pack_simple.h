// ExpPack(S), "lwe-exppack-s" below the sockets (issue 15): SimplePIR whose answer the server
// ring-packs (packing.h) with special ciphertexts it expands from one RLWE ciphertext of the
// query's LWE secret (expansion.h), so that the client decrypts its record with its RLWE secret
// and needs no hint.
//
//   session the client's expansion keys (ExpansionKeyBytes, 1.6 MiB), uploaded once;
//   client  a SimplePIR query for the record's column (fresh LWE secret s, D0 words) and the
//           ciphertext of s (SecretCiphertextBytes); s is wiped as soon as it is encrypted;
//   server  the SimplePIR answer (D1 words, LweServer::Answer), then ExpandLweSecret into a
//           PackAccumulator with the hint H = DB A1 as the a-parts (prepared once:
//           PackingMatrix), switched: ceil(D1 / N) ciphertexts;
//   client  decrypts every packed row with z and selects the record's rows with masks.
//
// Bytes per lookup: up 4 D0 + 32 + 4 k N, down ceil(D1 / N) x 8N; reusable keys
// ExpansionKeyBytes; no hint.
#ifndef VEIL_PIR_LATTICE_PACK_SIMPLE_H_
#define VEIL_PIR_LATTICE_PACK_SIMPLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

// Bytes of one packed response for a shape: ceil(D1 / N) x SwitchedBytes.
uint64_t PackedResponseBytes(const RingContext& ring, const Shape& shape);

// One query of a batch: its words, its secret's ciphertext and its session's keys (which must
// outlive the call).
struct PackedRequest {
  absl::Span<const uint32_t> query;
  absl::Span<const uint8_t> ciphertext;
  const he::GaloisKeys* keys = nullptr;
};

class PackedSimpleServer {
 public:
  // Wraps a SimplePIR server: its hint becomes the packing matrix (groups x n x k x N residues
  // of 4 bytes, PackingMatrix::bytes()). Returns INVALID_ARGUMENT for a DoublePIR server or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION for ring parameters without a
  // special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default());

  const LweConfig& config() const { return server_->config(); }
  const RingContext& ring() const { return ring_; }
  const PackingMatrix& matrix() const { return matrix_; }

  // A session's expansion keys (ParseExpansionKeys' errors).
  absl::StatusOr<he::GaloisKeys> ParseKeys(absl::Span<const uint8_t> bytes) const;

  // The packed response to one query (D0 words) and its secret's ciphertext, with the session's
  // keys, on the wrapped server's threads (LweServerOptions::threads): PackedResponseBytes
  // bytes. Returns INVALID_ARGUMENT for a query of the wrong size
  // (LweServer::Answer) or ExpandLweSecret's errors.
  absl::StatusOr<std::vector<uint8_t>> Answer(absl::Span<const uint32_t> query,
                                              absl::Span<const uint8_t> secret_ciphertext,
                                              const he::GaloisKeys& keys) const;

  // Several queries (of any sessions) with one pass of the SimplePIR product over the database
  // for all of them; then each query's expansion and packing, the queries spread over the
  // threads (one query alone gets them all). One result per request, as Answer's: a request's
  // errors (a query of the wrong size, a ciphertext or keys ExpandLweSecret refuses) fail that
  // request only.
  std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const;

 private:
  // Expansion, packing and switching of one query whose SimplePIR answer is `answer`.
  absl::StatusOr<std::vector<uint8_t>> Pack(absl::Span<const uint32_t> answer,
                                            absl::Span<const uint8_t> secret_ciphertext,
                                            const he::GaloisKeys& keys, int threads) const;

  PackedSimpleServer(std::unique_ptr<LweServer> server, RingContext ring, PackingMatrix matrix)
      : server_(std::move(server)), ring_(std::move(ring)), matrix_(std::move(matrix)) {}

  std::unique_ptr<LweServer> server_;
  RingContext ring_;
  PackingMatrix matrix_;
};

struct PackedQuery {
  std::vector<uint32_t> query;      // D0 words
  std::vector<uint8_t> ciphertext;  // SecretCiphertextBytes(ring)
};

class PackedSimpleClient {
 public:
  // Checks the config (ValidateConfig), draws the session's RLWE secret and makes its expansion
  // keys. Returns ValidateConfig's errors, INVALID_ARGUMENT for a DoublePIR config or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION without a special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default());

  const RingContext& ring() const { return ring_; }
  // The session's expansion keys (ExpansionKeyBytes), for the server once.
  const std::vector<uint8_t>& expansion_keys() const { return keys_; }

  // The query for record `row` and the ciphertext of its LWE secret. Returns INVALID_ARGUMENT if
  // row >= rows.
  absl::StatusOr<PackedQuery> MakeQuery(uint64_t row, RandomSource& rng = SystemRandom()) const;

  // Record `row`'s bytes (record_bytes) from a packed response. Returns INVALID_ARGUMENT for a
  // response of another size (PackedResponseBytes), a residue ParseSwitched refuses, row >= rows
  // or a record span of the wrong size.
  absl::Status Decode(uint64_t row, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const;

 private:
  PackedSimpleClient(const LweConfig& config, RingContext ring, RlweSecret secret,
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

#endif  // VEIL_PIR_LATTICE_PACK_SIMPLE_H_
