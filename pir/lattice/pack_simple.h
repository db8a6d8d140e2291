// "lwe-pack-s" below the sockets (issue 15): SimplePIR whose answer the server ring-packs
// (packing.h), so that the client decrypts its record with its RLWE secret and needs no hint.
//
//   client  a SimplePIR query for the record's column (fresh LWE secret s, D0 words) and the
//           packing keys of s (PackingKeyBytes); s is wiped as soon as the keys are made;
//   server  the SimplePIR answer (D1 words, LweServer::Answer), then PackResponse with the hint
//           H = DB A1 as the a-parts (prepared once: PackingMatrix), ceil(D1 / N) ciphertexts;
//   client  decrypts every packed row with z and selects the record's rows with masks.
//
// Bytes per lookup: up 4 D0 + PackingKeyBytes (per query, 48 MiB at n = 1024, until ExpPack
// replaces the keys by one RLWE ciphertext), down ceil(D1 / N) x 8N; no hint.
#ifndef VEIL_PIR_LATTICE_PACK_SIMPLE_H_
#define VEIL_PIR_LATTICE_PACK_SIMPLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

// Bytes of one packed response for a shape: ceil(D1 / N) x SwitchedBytes.
uint64_t PackedResponseBytes(const RingContext& ring, const Shape& shape);

class PackedSimpleServer {
 public:
  // Wraps a SimplePIR server: its hint becomes the packing matrix (groups x n x k x N words of
  // 8 bytes, PackingMatrix::bytes()). Returns INVALID_ARGUMENT for a DoublePIR server or ring
  // parameters RingContext::Create refuses.
  static absl::StatusOr<std::unique_ptr<PackedSimpleServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default());

  const LweConfig& config() const { return server_->config(); }
  const RingContext& ring() const { return ring_; }
  const PackingMatrix& matrix() const { return matrix_; }

  // The packed response to one query (D0 words) with the client's packing keys (wire form):
  // PackedResponseBytes bytes. Returns INVALID_ARGUMENT for keys ParsePackingKeys refuses or a
  // query of the wrong size (LweServer::Answer).
  absl::StatusOr<std::vector<uint8_t>> Answer(absl::Span<const uint32_t> query,
                                              absl::Span<const uint8_t> keys) const;

 private:
  PackedSimpleServer(std::unique_ptr<LweServer> server, RingContext ring, PackingMatrix matrix)
      : server_(std::move(server)), ring_(std::move(ring)), matrix_(std::move(matrix)) {}

  std::unique_ptr<LweServer> server_;
  RingContext ring_;
  PackingMatrix matrix_;
};

struct PackedQuery {
  std::vector<uint32_t> query;  // D0 words
  std::vector<uint8_t> keys;    // PackingKeyBytes(ring, n)
};

class PackedSimpleClient {
 public:
  // Checks the config (ValidateConfig) and draws the session's RLWE secret. Returns
  // ValidateConfig's errors, INVALID_ARGUMENT for a DoublePIR config or ring parameters
  // RingContext::Create refuses.
  static absl::StatusOr<std::unique_ptr<PackedSimpleClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default());

  const RingContext& ring() const { return ring_; }

  // The query for record `row` and its packing keys. Returns INVALID_ARGUMENT if row >= rows.
  absl::StatusOr<PackedQuery> MakeQuery(uint64_t row, RandomSource& rng = SystemRandom()) const;

  // Record `row`'s bytes (record_bytes) from a packed response. Returns INVALID_ARGUMENT for a
  // response of another size (PackedResponseBytes), a residue ParseSwitched refuses, row >= rows
  // or a record span of the wrong size.
  absl::Status Decode(uint64_t row, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const;

 private:
  PackedSimpleClient(const LweConfig& config, RingContext ring, RlweSecret secret)
      : config_(config), ring_(std::move(ring)), secret_(std::move(secret)) {}

  LweConfig config_;
  RingContext ring_;
  RlweSecret secret_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACK_SIMPLE_H_
