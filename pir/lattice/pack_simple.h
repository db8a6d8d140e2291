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
//
// The hybrid protocol ("lwe-hybrid", PackedProtocol::kHybrid) is the same up to the packed
// ciphertexts, which the server then narrows to the window of the record's rows that the
// query's RGSW selection names (hybrid.h): up HybridSelectionBytes more, down
// HybridResponseBytes.
#ifndef VEIL_PIR_LATTICE_PACK_SIMPLE_H_
#define VEIL_PIR_LATTICE_PACK_SIMPLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/hybrid.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

enum class PackedProtocol {
  kExpPackS,  // every packed ciphertext down
  kHybrid,    // the window a selection names (hybrid.h)
};

// "lwe-exppack-s", "lwe-hybrid".
const char* PackedProtocolName(PackedProtocol protocol);

// Bytes of one packed response for a shape: ceil(D1 / N) x SwitchedBytes (ExpPack(S)), or
// HybridResponseBytes; and of a query's selection: 0 (ExpPack(S)), or HybridSelectionBytes.
uint64_t PackedResponseBytes(const RingContext& ring, const Shape& shape,
                             PackedProtocol protocol = PackedProtocol::kExpPackS);
uint64_t PackedSelectionBytes(const RingContext& ring, const Shape& shape, PackedProtocol protocol);

// One query of a batch: its words, its secret's ciphertext, its selection (the hybrid only) and
// its session's keys (which must outlive the call).
struct PackedRequest {
  absl::Span<const uint32_t> query;
  absl::Span<const uint8_t> ciphertext;
  const he::GaloisKeys* keys = nullptr;
  absl::Span<const uint8_t> selection;
};

class PackedSimpleServer {
 public:
  // Wraps a SimplePIR server: its hint becomes the packing matrix (groups x n x k x N residues
  // of 4 bytes, PackingMatrix::bytes()). Returns INVALID_ARGUMENT for a DoublePIR server or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION for ring parameters without a
  // special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default(),
      PackedProtocol protocol = PackedProtocol::kExpPackS);

  const LweConfig& config() const { return server_->config(); }
  PackedProtocol protocol() const { return protocol_; }
  uint64_t response_bytes() const;
  uint64_t selection_bytes() const;
  const RingContext& ring() const { return ring_; }
  const PackingMatrix& matrix() const { return matrix_; }

  // A session's expansion keys (ParseExpansionKeys' errors).
  absl::StatusOr<he::GaloisKeys> ParseKeys(absl::Span<const uint8_t> bytes) const;

  // The packed response to one query (D0 words), its secret's ciphertext and (the hybrid) its
  // selection, with the session's keys, on the wrapped server's threads
  // (LweServerOptions::threads): response_bytes(). Returns INVALID_ARGUMENT for a query of the
  // wrong size (LweServer::Answer), a selection ParseHybridSelection refuses (or any selection
  // for ExpPack(S)), or ExpandLweSecret's errors.
  absl::StatusOr<std::vector<uint8_t>> Answer(absl::Span<const uint32_t> query,
                                              absl::Span<const uint8_t> secret_ciphertext,
                                              const he::GaloisKeys& keys,
                                              absl::Span<const uint8_t> selection = {}) const;

  // Several queries (of any sessions) with one pass of the SimplePIR product over the database
  // for all of them; then each query's expansion and packing, the queries spread over the
  // threads (one query alone gets them all). One result per request, as Answer's: a request's
  // errors (a query of the wrong size, a ciphertext or keys ExpandLweSecret refuses) fail that
  // request only, as does a selection Answer refuses.
  std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const;

 private:
  // Expansion, packing, (the hybrid) selection and switching of one request whose SimplePIR
  // answer is `answer`.
  absl::StatusOr<std::vector<uint8_t>> Pack(absl::Span<const uint32_t> answer,
                                            const PackedRequest& request, int threads) const;

  PackedSimpleServer(std::unique_ptr<LweServer> server, RingContext ring, PackingMatrix matrix,
                     PackedProtocol protocol)
      : server_(std::move(server)),
        ring_(std::move(ring)),
        matrix_(std::move(matrix)),
        protocol_(protocol) {}

  std::unique_ptr<LweServer> server_;
  RingContext ring_;
  PackingMatrix matrix_;
  PackedProtocol protocol_;
};

struct PackedQuery {
  std::vector<uint32_t> query;      // D0 words
  std::vector<uint8_t> ciphertext;  // SecretCiphertextBytes(ring)
  std::vector<uint8_t> selection;   // PackedSelectionBytes: empty for ExpPack(S)
};

class PackedSimpleClient {
 public:
  // Checks the config (ValidateConfig), draws the session's RLWE secret and makes its expansion
  // keys. Returns ValidateConfig's errors, INVALID_ARGUMENT for a DoublePIR config or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION without a special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default(),
      PackedProtocol protocol = PackedProtocol::kExpPackS);

  const RingContext& ring() const { return ring_; }
  PackedProtocol protocol() const { return protocol_; }
  uint64_t response_bytes() const;
  // The session's expansion keys (ExpansionKeyBytes), for the server once.
  const std::vector<uint8_t>& expansion_keys() const { return keys_; }

  // The query for record `row`, the ciphertext of its LWE secret and (the hybrid) the selection
  // of its window. Returns INVALID_ARGUMENT if row >= rows.
  absl::StatusOr<PackedQuery> MakeQuery(uint64_t row, RandomSource& rng = SystemRandom()) const;

  // Record `row`'s bytes (record_bytes) from a packed response. Returns INVALID_ARGUMENT for a
  // response of another size (response_bytes()), a residue ParseSwitched refuses, row >= rows
  // or a record span of the wrong size.
  absl::Status Decode(uint64_t row, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const;

 private:
  PackedSimpleClient(const LweConfig& config, RingContext ring, PackedProtocol protocol,
                     he::SecretKey key, std::vector<uint8_t> keys)
      : config_(config),
        ring_(std::move(ring)),
        protocol_(protocol),
        secret_(RlweSecret::FromKey(ring_, key)),
        keys_(std::move(keys)) {
    // Only the hybrid's selections need the secret over QP (wiped with the client).
    if (protocol_ == PackedProtocol::kHybrid) key_ = std::move(key);
  }

  LweConfig config_;
  RingContext ring_;
  PackedProtocol protocol_;
  RlweSecret secret_;
  he::SecretKey key_;
  std::vector<uint8_t> keys_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACK_SIMPLE_H_
