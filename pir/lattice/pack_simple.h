// ExpPack(S), "lwe-exppack-s" below the sockets (issue 15): SimplePIR whose answer the server
// ring-packs (packing.h) with special ciphertexts it expands from one RLWE ciphertext of the
// query's LWE secret (expansion.h), so that the client decrypts its record with its RLWE secret
// and needs no hint.
//
//   session the client's expansion keys (ExpansionKeyBytes, 3.4 MiB), uploaded once;
//   client  a SimplePIR query for the record's column (fresh LWE secret s, D0 words) and the
//           ciphertext of s (SecretCiphertextBytes); s is wiped as soon as it is encrypted;
//   server  the SimplePIR answer (D1 words, LweServer::Answer), then the packing engine's sums
//           with the hint H = DB A1 as the a-parts (prepared once: PackingMatrix; on the CPU
//           the expansion's top levels against its folded form, deferred_packing.h), switched:
//           ceil(D1 / N) ciphertexts;
//   client  decrypts every packed row with z and selects the record's rows with masks.
//
// Bytes per lookup: up 4 D0 + 32 + 4 k N, down ceil(D1 / N) x 8N; reusable keys
// ExpansionKeyBytes; no hint.
//
// The hybrid protocol ("lwe-hybrid", PackedProtocol::kHybrid) is the same up to the packed
// ciphertexts, which the server then narrows to the window of the record's rows that the
// query's selection names (hybrid.h): up HybridSelectionBytes more, down HybridResponseBytes,
// keys HybridKeyBytes.
#ifndef VEIL_PIR_LATTICE_PACK_SIMPLE_H_
#define VEIL_PIR_LATTICE_PACK_SIMPLE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/hybrid.h"
#include "pir/lattice/packed.h"
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

// How one query's packing sums are scheduled against the SimplePIR product (a batch's always
// follow it: the queries spread over the threads).
enum class SumsSchedule {
  kAdaptive,          // the faster of the two below on this server, by its own calls' times
  kAfterProduct,      // the product on every thread, then the sums on every thread
  kAlongsideProduct,  // beside the CPU's product, half of the threads each
};

// The adaptive choice: each schedule in turn for the first 2 kTrials calls, then the one whose
// last kTrials calls have the lower median, the other retried once every kRetry calls (the
// table's shape and the machine decide: the sums need nothing of the product, which is bound by
// memory bandwidth, while the sums are mostly key switching; alongside wins when the two take
// about as long on one thread each, e.g. 2^24 x 64 B on two vCPUs, and loses when the product is
// short, e.g. 2^20). Thread-safe.
class SumsScheduleChoice {
 public:
  static constexpr int kTrials = 5;
  static constexpr uint64_t kRetry = 50;
  SumsSchedule Next();
  void Record(SumsSchedule schedule, double seconds);
  // What Next returns outside its trials and retries now.
  SumsSchedule Preferred();

 private:
  SumsSchedule PreferredLocked() const;
  std::mutex mu_;
  uint64_t calls_ = 0;
  std::vector<double> times_[2];  // the last kTrials of kAfterProduct, kAlongsideProduct
};

class PackedSimpleServer final : public PackedServer {
 public:
  // Wraps a SimplePIR server: its hint becomes the packing matrix (groups x n x k x N residues
  // of 4 bytes, PackingMatrix::bytes()). Returns INVALID_ARGUMENT for a DoublePIR server or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION for ring parameters without a
  // special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleServer>> Create(
      std::unique_ptr<LweServer> server, const RingParams& ring = RingParams::Default(),
      PackedProtocol protocol = PackedProtocol::kExpPackS);

  const LweConfig& config() const override { return server_->config(); }
  const RingContext& ring() const override { return ring_; }
  const PackingMatrix& matrix() const override { return matrix_; }
  uint64_t ciphertexts() const override { return 1; }
  uint64_t selection_bytes() const override;
  uint64_t response_bytes() const override;
  // The hybrid's keys add the conversion key (hybrid.h); ExpPack(S)'s are the expansion's.
  uint64_t key_bytes() const override;
  absl::StatusOr<std::vector<uint8_t>> MakeKeys(const he::SecretKey& key) const override;
  absl::StatusOr<he::GaloisKeys> ParseKeys(absl::Span<const uint8_t> bytes) const override;
  // The hybrid's selection is expanded on the CPU whatever the engine.
  bool host_switching() const override {
    return protocol_ == PackedProtocol::kHybrid || PackedServer::host_switching();
  }
  PackedProtocol protocol() const { return protocol_; }
  int threads() const { return server_->threads(); }
  // kAdaptive by default; alongside needs two threads or more and the CPU's product (else the
  // sums follow the product). Not for concurrent use with AnswerBatch.
  void set_sums_schedule(SumsSchedule schedule) { schedule_ = schedule; }
  // The schedule set, or the adaptive choice's preference now.
  SumsSchedule sums_schedule() const {
    return schedule_ == SumsSchedule::kAdaptive ? choice_.Preferred() : schedule_;
  }

  // One SimplePIR product for the batch, then each query's expansion and packing sums, the
  // queries spread over the threads (a query alone: as set_sums_schedule says); then each
  // query's b-parts, (the hybrid) selection and switching. Any selection for ExpPack(S), or one
  // ExpandHybridSelection refuses, fails its request.
  std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const override;
  // AnswerBatch before serialization: each request's switched ciphertexts (double packing packs
  // them again, double_pack.h).
  std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> SwitchedBatch(
      absl::Span<const PackedRequest> requests) const;

 private:
  // What a request needs of the packing before its SimplePIR answer: (the hybrid) its
  // selection's bits, and the packing engine's sums.
  struct PackSums {
    std::vector<uint64_t> sums;
    std::vector<he::QRgswCiphertext> bits;
  };
  // The selections of requests[r] for r in `which` (Selection's), spread over `threads` workers
  // (one request alone: on all of them).
  struct Selected {
    std::vector<PackSums> made;
    std::vector<absl::Status> status;
  };
  Selected Selections(absl::Span<const PackedRequest> requests, absl::Span<const size_t> which,
                      int threads) const;
  // Their sums once selected: the engine's SumsBatch (one request alone: its Sums on all
  // `threads`); each fails alone.
  std::vector<absl::StatusOr<PackSums>> Sums(absl::Span<const PackedRequest> requests,
                                             absl::Span<const size_t> which, Selected selected,
                                             int threads) const;
  // A request's selection's bits (lwe-hybrid) into `out`, on `threads` threads, and its sums
  // sized. Returns ExpandHybridSelection's errors, INVALID_ARGUMENT for a selection
  // lwe-exppack-s does not take.
  absl::Status Selection(const PackedRequest& request, PackSums& out, int threads) const;
  // Its packed ciphertexts with the answer's b-parts, (the hybrid) narrowed to the window,
  // switched: each step on `threads` threads (the switches where the CPU's engine runs them).
  absl::StatusOr<std::vector<SwitchedCiphertext>> Finish(absl::Span<const uint32_t> answer,
                                                         const PackSums& sums, int threads) const;

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
  SumsSchedule schedule_ = SumsSchedule::kAdaptive;
  mutable SumsScheduleChoice choice_;
};

class PackedSimpleClient final : public PackedClient {
 public:
  // Checks the config (ValidateConfig), draws the session's RLWE secret and makes its expansion
  // keys. Returns ValidateConfig's errors, INVALID_ARGUMENT for a DoublePIR config or ring
  // parameters RingContext::Create refuses, FAILED_PRECONDITION without a special prime.
  static absl::StatusOr<std::unique_ptr<PackedSimpleClient>> Create(
      const LweConfig& config, const RingParams& ring = RingParams::Default(),
      PackedProtocol protocol = PackedProtocol::kExpPackS);

  const RingContext& ring() const override { return ring_; }
  const std::vector<uint8_t>& expansion_keys() const override { return keys_; }
  uint64_t query_words() const override { return config_.shape.query_words(); }
  uint64_t ciphertexts() const override { return 1; }
  uint64_t selection_bytes() const override;
  uint64_t response_bytes() const override;
  PackedProtocol protocol() const { return protocol_; }

  // A query (MakeQuery, FinishQuery) is the SimplePIR query for the record's column (a fresh LWE
  // secret s, wiped as soon as it is encrypted), the ciphertext of s and (the hybrid) the
  // selection of its window; all but the column's Delta and the window's bits is prepared ahead.
  absl::StatusOr<PreparedQuery> PrepareQuery(RandomSource& rng = SystemRandom()) const override;

  // Record `row`'s bytes (record_bytes) from a packed response (Decode of a query is this for
  // its row). Returns INVALID_ARGUMENT for a response of another size (response_bytes()), a
  // residue ParseSwitched refuses, row >= rows or a record span of the wrong size.
  absl::Status Decode(uint64_t row, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const;
  absl::Status Decode(const PackedQuery& query, absl::Span<const uint8_t> response,
                      absl::Span<uint8_t> record) const override {
    return Decode(query.row(), response, record);
  }

 protected:
  uint64_t rows() const override { return config_.shape.rows; }
  std::vector<UnitVector> UnitVectorsOf(uint64_t row) const override;
  absl::Status AddSelection(uint64_t row, absl::Span<uint8_t> selection) const override;

 private:
  friend class DoublePackedClient;  // its second level uses z and the first level's decoding

  // The record from the switched ciphertexts holding the column's rows from `first` on.
  absl::Status DecodeRows(uint64_t row, absl::Span<const SwitchedCiphertext> cts, uint64_t first,
                          absl::Span<uint8_t> record) const;

  PackedSimpleClient(const LweConfig& config, RingContext ring, PackedProtocol protocol,
                     const he::SecretKey& key, std::vector<uint8_t> keys)
      : config_(config),
        ring_(std::move(ring)),
        protocol_(protocol),
        secret_(RlweSecret::FromKey(ring_, key)),
        keys_(std::move(keys)) {}

  LweConfig config_;
  RingContext ring_;
  PackedProtocol protocol_;
  RlweSecret secret_;
  std::vector<uint8_t> keys_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACK_SIMPLE_H_
