// What the packed protocols (no hint: the server ring-packs the answer) share, so that serving
// and the client library take any of them: lwe-exppack-s and lwe-hybrid (pack_simple.h) and
// lwe-exppack-d (pack_double.h) and lwe-double-pack (double_pack.h). A session uploads its
// expansion keys once (expansion.h); a lookup sends its LWE query words, the RLWE ciphertexts of
// its LWE secrets and (lwe-hybrid) its selection, and gets response_bytes() back.
#ifndef VEIL_PIR_LATTICE_PACKED_H_
#define VEIL_PIR_LATTICE_PACKED_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/deferred_packing.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

// One query of a batch: its words, its secrets' ciphertexts (one after the other), its session's
// keys and its selection (lwe-hybrid only). A device engine caches the keys of sessions whose
// pointer owns them (PackingEngine); a non-owning one (no control block) is uploaded per call.
struct PackedRequest {
  absl::Span<const uint32_t> query;
  absl::Span<const uint8_t> ciphertext;
  std::shared_ptr<const he::GaloisKeys> keys;
  absl::Span<const uint8_t> selection;
};

// Keys only lent for a call (no control block: an engine never caches them).
inline std::shared_ptr<const he::GaloisKeys> BorrowKeys(const he::GaloisKeys& keys) {
  return std::shared_ptr<const he::GaloisKeys>(std::shared_ptr<const he::GaloisKeys>(), &keys);
}

// Where a packed server does its per-query ring work: expanding one of a query's secret
// ciphertexts into the n special ciphertexts (expansion.h) and summing them against its packing
// matrix (Sums: PackAccumulator's sums, per group sum_j A_{g,j} beta_j then sum_j A_{g,j}
// alpha_j, PackingSumWords residues in NTT form), and switching packed ciphertexts to q'
// (Switch). The CPU's (CpuPackingEngine) or a device's (gpu/exppack.h), bit for bit the same.
class PackingEngine {
 public:
  virtual ~PackingEngine() = default;
  virtual std::string name() const = 0;
  // Builds what the engine needs before its first Sums (the CPU's folded matrix), which Sums
  // otherwise does on its first call; servers call it at start, once their engine is chosen.
  // Thread-safe.
  virtual void Prepare() const {}
  // Host memory the engine holds, once prepared, besides the server's matrix (the CPU's folded
  // matrix).
  virtual uint64_t host_bytes() const { return 0; }
  // sums = the packing sums of the special ciphertexts `ciphertext` expands to under `keys`, on
  // up to `threads` CPU threads. Returns ExpandLweSecret's errors (bad ciphertext or keys),
  // INVALID_ARGUMENT for sums of another size, and a device's errors.
  virtual absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                            absl::Span<const uint8_t> ciphertext, int threads,
                            absl::Span<uint64_t> sums) const = 0;
  // Several queries' Sums, each failing alone (statuses in order; spans of other lengths fail
  // all): by default each query's Sums on one of `threads` workers (ParallelFor); the CPU's
  // deferred engine streams its folded matrix once for several (DeferredPacking::SumsBatch).
  virtual std::vector<absl::Status> SumsBatch(
      absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
      absl::Span<const absl::Span<uint64_t>> sums, int threads) const;
  // SwitchResponse of packed ciphertexts of this ring, on up to `threads` CPU threads (the CPU's
  // engine a ciphertext per worker; a device's takes them at once). Returns INVALID_ARGUMENT for
  // a ciphertext of the wrong size (a device's engine also for a residue not below its prime)
  // and a device's errors.
  virtual absl::StatusOr<std::vector<SwitchedCiphertext>> Switch(
      absl::Span<const RlweCiphertext> packed, int threads) const = 0;
  // Whether Sums key-switches on this CPU with the session's parsed keys (so that they are
  // parsed with the 32-bit copies its key switching reads: ParseExpansionKeys); a device's engine
  // reads only their 64-bit words.
  virtual bool host_switching() const { return true; }
};

namespace internal {
// PackingEngine::Sums' argument checks, for every engine: INVALID_ARGUMENT for missing keys or
// sums other than sum_words long.
absl::Status CheckSumsArguments(const std::shared_ptr<const he::GaloisKeys>& keys,
                                uint64_t sum_words, absl::Span<const uint64_t> sums);
}  // namespace internal

// The CPU's sums: with deferred_levels > 0 DeferredPacking's (deferred_packing.h: the folded
// matrix built by Prepare on `threads` threads, so that a server whose device engine replaces
// this one never builds it), else the full expansion (ExpandLweSecret into one PackAccumulator
// per thread, merged); a device's engine with as many levels deferred equals either bit for
// bit. Both sums decrypt alike; their noise differs. SwitchResponse. Ring and matrix must
// outlive it.
class CpuPackingEngine final : public PackingEngine {
 public:
  CpuPackingEngine(const RingContext& ctx, const PackingMatrix& matrix,
                   uint32_t deferred_levels = kDeferredLevels, int threads = 1);
  std::string name() const override { return "cpu"; }
  void Prepare() const override;
  // The folded matrix is the packing matrix's size.
  uint64_t host_bytes() const override { return levels_ > 0 ? matrix_.bytes() : 0; }
  // min(deferred_levels, L), and 0 when the engine expands fully (n = 1, or n above N, which
  // every Sums refuses).
  uint32_t deferred_levels() const { return levels_; }
  absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                    absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const override;
  std::vector<absl::Status> SumsBatch(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                                      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                      absl::Span<const absl::Span<uint64_t>> sums,
                                      int threads) const override;
  absl::StatusOr<std::vector<SwitchedCiphertext>> Switch(absl::Span<const RlweCiphertext> packed,
                                                         int threads) const override;

 private:
  const RingContext& ctx_;
  const PackingMatrix& matrix_;
  const uint32_t levels_;
  const int threads_;
  mutable absl::once_flag prepared_;
  mutable std::optional<DeferredPacking> deferred_;  // set once, by Prepare
};

// A lookup as the client made it: what travels, and what decodes the response (lwe-exppack-d
// keeps its LWE secrets; the others need none). The secrets are wiped on destruction.
class PackedQuery {
 public:
  PackedQuery() = default;
  PackedQuery(PackedQuery&&) = default;
  // Wipes the secrets it replaces.
  PackedQuery& operator=(PackedQuery&& other) noexcept;
  ~PackedQuery();

  std::vector<uint32_t> query;      // the LWE query words
  std::vector<uint8_t> ciphertext;  // ciphertexts() x SecretCiphertextBytes
  std::vector<uint8_t> selection;   // lwe-hybrid: HybridSelectionBytes; else empty

  uint64_t row() const { return row_; }

 private:
  friend class PackedClient;
  friend class PackedSimpleClient;
  friend class PackedDoubleClient;
  friend class DoublePackedClient;
  uint64_t row_ = 0;
  std::vector<uint32_t> secrets_;
};

// The part of a query that does not depend on its row, made ahead (PackedClient::PrepareQuery):
// the encryptions of zero vectors under fresh secrets, the secrets' RLWE ciphertexts and (the
// hybrid) the selection's encryption of zero. One query's worth: PackedClient::FinishQuery
// consumes it. Its secrets are wiped on destruction.
class PreparedQuery {
 public:
  PreparedQuery() = default;
  PreparedQuery(PreparedQuery&&) = default;
  PreparedQuery& operator=(PreparedQuery&&) = default;

 private:
  friend class PackedClient;
  friend class PackedSimpleClient;
  friend class PackedDoubleClient;
  friend class DoublePackedClient;
  uint64_t owner_ = 0;  // PackedClient::id_ of the client that made it
  PackedQuery query_;   // row-free: every unit vector's hot entry is missing its Delta
};

class PackedServer {
 public:
  virtual ~PackedServer() = default;

  virtual const LweConfig& config() const = 0;
  virtual const RingContext& ring() const = 0;
  virtual const PackingMatrix& matrix() const = 0;
  // Per lookup: the query's words (the LWE shape's, unless a protocol adds a second level), the
  // secrets' ciphertexts (count), the selection's bytes and the response's.
  virtual uint64_t query_words() const { return config().shape.query_words(); }
  virtual uint64_t ciphertexts() const = 0;
  virtual uint64_t selection_bytes() const = 0;
  virtual uint64_t response_bytes() const = 0;

  // A session's keys: their wire size, a client's making of them under `key` (veil-server
  // sizes a session's parsed keys on one) and their parsing. The expansion keys
  // (ExpansionKeyBytes, MakeExpansionKeys, ParseExpansionKeys' errors) unless a protocol adds
  // to them (lwe-hybrid: HybridKeyBytes, hybrid.h).
  virtual uint64_t key_bytes() const;
  virtual absl::StatusOr<std::vector<uint8_t>> MakeKeys(const he::SecretKey& key) const;
  // Parsed for this CPU's key switching where the server's uses the keys on the CPU
  // (host_switching()).
  virtual absl::StatusOr<he::GaloisKeys> ParseKeys(absl::Span<const uint8_t> bytes) const;
  // Whether the server key-switches with a session's keys on the CPU: its engine's
  // host_switching(), or a CPU step of the protocol (double packing's sums W_t).
  virtual bool host_switching() const { return packing_engine().host_switching(); }

  // Where the expansions, packing sums and switches run: CpuPackingEngine unless replaced by an
  // engine made for this server's ring() and matrix() (double packing's second fold and its
  // sums W_t stay on the CPU). Not for concurrent use with AnswerBatch.
  virtual const PackingEngine& packing_engine() const { return *packing_engine_; }
  virtual void set_packing_engine(std::unique_ptr<PackingEngine> engine) {
    packing_engine_ = std::move(engine);
  }

  // Several queries (of any sessions) with one pass of the LWE product over the database for all
  // of them, then their expansions and packings spread over the wrapped server's threads. One
  // result per request, response_bytes() long, or that request's error (INVALID_ARGUMENT for a
  // query, ciphertexts or selection of the wrong size or form, ExpandLweSecret's errors); a bad
  // request fails alone.
  virtual std::vector<absl::StatusOr<std::vector<uint8_t>>> AnswerBatch(
      absl::Span<const PackedRequest> requests) const = 0;
  // One query: AnswerBatch of one, the keys lent (BorrowKeys: a device engine does not cache them).
  absl::StatusOr<std::vector<uint8_t>> Answer(absl::Span<const uint32_t> query,
                                              absl::Span<const uint8_t> ciphertext,
                                              const he::GaloisKeys& keys,
                                              absl::Span<const uint8_t> selection = {}) const;

 private:
  std::unique_ptr<PackingEngine> packing_engine_;
};

class PackedClient {
 public:
  PackedClient();
  virtual ~PackedClient() = default;

  virtual const RingContext& ring() const = 0;
  // The session's keys (PackedServer::key_bytes()), for the server once.
  virtual const std::vector<uint8_t>& expansion_keys() const = 0;
  virtual uint64_t query_words() const = 0;
  virtual uint64_t ciphertexts() const = 0;
  virtual uint64_t selection_bytes() const = 0;
  virtual uint64_t response_bytes() const = 0;

  // The query for record `row`: FinishQuery(row, PrepareQuery(rng)). Returns INVALID_ARGUMENT if
  // row >= rows.
  absl::StatusOr<PackedQuery> MakeQuery(uint64_t row, RandomSource& rng = SystemRandom()) const;
  // A query's row-free part: nearly all of MakeQuery's time (the LWE encryptions over the public
  // matrices, the RLWE encryptions of their secrets), so an app can make it ahead, while idle.
  // Each serves one query.
  virtual absl::StatusOr<PreparedQuery> PrepareQuery(RandomSource& rng = SystemRandom()) const = 0;
  // The query for record `row` from `prepared`: Delta added at each unit vector's hot entry by a
  // masked pass over the vector (no address chosen by the row), and the hybrid's window added to
  // its prepared selection.
  // Returns INVALID_ARGUMENT if row >= rows or `prepared` is another client's (or moved from).
  absl::StatusOr<PackedQuery> FinishQuery(uint64_t row, PreparedQuery prepared) const;
  // The record's bytes (record_bytes) from the response to `query`. Returns INVALID_ARGUMENT for
  // a response of another size or with a residue not below its prime, a query of another client
  // or a record span of the wrong size.
  virtual absl::Status Decode(const PackedQuery& query, absl::Span<const uint8_t> response,
                              absl::Span<uint8_t> record) const = 0;

 protected:
  virtual uint64_t rows() const = 0;
  // The unit vectors of record `row`'s query (row < rows()).
  virtual std::vector<UnitVector> UnitVectorsOf(uint64_t row) const = 0;
  // lwe-hybrid: row's window added to the prepared selection (selection_bytes() long); the
  // others have none.
  virtual absl::Status AddSelection(uint64_t /*row*/, absl::Span<uint8_t> /*selection*/) const {
    return absl::OkStatus();
  }
  // A fresh PreparedQuery of this client holding `query` (row-free).
  PreparedQuery Prepared(PackedQuery query) const;

 private:
  const uint64_t id_;  // distinct per client in this process
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PACKED_H_
