// The server side of the LWE protocols, below the sockets: a table becomes the database matrix,
// its hint is loaded from (or computed into) the file next to it, and batches of queries are
// answered with one product each. Serving is wiring: config() is the config RPC, HintChunk the
// hint RPC, Answer the answer RPC (the scheduler batches queries across connections).
#ifndef VEIL_PIR_LATTICE_SERVER_H_
#define VEIL_PIR_LATTICE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/table.h"
#include "pir/lattice/hint.h"
#include "pir/lattice/shape.h"

namespace veil::lattice {

// The hint blob is served in chunks of this many bytes (the last one shorter).
inline constexpr uint64_t kHintChunkBytes = uint64_t{1} << 20;

// What a server reports and a client needs: everything public about the protocol instance.
struct LweConfig {
  Shape shape;  // protocol, p, sizes
  Seed seed;    // of A1 and A2: DeriveSeed(shape, table_digest)
  embedding::TableDigestBytes table_digest{};
  uint64_t hint_bytes = 0;  // the client hint blob
  Digest hint_digest{};     // BLAKE2b-256 of the blob
  uint64_t hint_chunk_bytes = kHintChunkBytes;

  friend bool operator==(const LweConfig&, const LweConfig&) = default;
};

// Checks a config received from a server before using it: ValidateShape (the rule holds), the
// seed is DeriveSeed(shape, table_digest) (the server did not choose A), the hint size matches
// the shape and the chunk size is positive. Returns INVALID_ARGUMENT naming the problem.
absl::Status ValidateConfig(const LweConfig& config);

// The server's product of its database matrix with a batch of first-level queries:
// out[b * D1 + r] = sum_c DB[r][c] * queries[b * D0 + c] (mod 2^32). The CPU one is built in;
// gpu/ provides a device one (LweGpuProduct) for servers with a GPU. Calls may run concurrently.
class DatabaseProduct {
 public:
  virtual ~DatabaseProduct() = default;
  virtual std::string name() const = 0;
  // Whether Multiply's work is the CPU's (a device's product leaves the CPU free meanwhile).
  virtual bool on_host() const { return true; }
  virtual absl::Status Multiply(absl::Span<const uint32_t> queries, int batch,
                                absl::Span<uint32_t> out) const = 0;
  // Multiply on at most `threads` of the CPU's threads, for a caller running other work
  // alongside (the packed servers' sums); a product whose work is not the CPU's ignores it.
  virtual absl::Status MultiplyOn(int threads, absl::Span<const uint32_t> queries, int batch,
                                  absl::Span<uint32_t> out) const {
    (void)threads;
    return Multiply(queries, batch, out);
  }
};

struct LweServerOptions {
  Protocol protocol = Protocol::kSimplePir;
  ShapeOptions shape;
  int threads = 1;
  // Where the hint is kept (read when current, else computed and written). Open: empty means
  // HintPathFor(table path, protocol); FromTable: empty means computed in memory, no file.
  std::string hint_path;
};

// Memory a server holds, by part (bytes).
struct LweServerMemory {
  uint64_t database = 0;       // the D1 x D0 matrix
  uint64_t hint_blob = 0;      // the client hint, kept to serve it
  uint64_t server_digits = 0;  // DoublePIR: M1, 4n x D1
  uint64_t a2 = 0;             // DoublePIR: A2, D1 x n words
};

class LweServer {
 public:
  // Maps the table at `table_path`, chooses its shape, builds the matrix and loads its hint from
  // the hint file (computing and writing it when absent, malformed or stale). Returns
  // embedding::Table::Open's errors, ChooseShape's, and LoadOrComputeHint's.
  static absl::StatusOr<std::unique_ptr<LweServer>> Open(const std::string& table_path,
                                                         const LweServerOptions& options);
  // As Open, from a table already in memory (a server's verified copy), which need not outlive
  // the server. Returns ChooseShape's errors and LoadOrComputeHint's (ComputeHint's without a
  // hint_path).
  static absl::StatusOr<std::unique_ptr<LweServer>> FromTable(const embedding::Table& table,
                                                              const LweServerOptions& options);
  // From records in memory (rows * record_bytes bytes) named by `digest`; computes the hint and
  // writes no file. For benchmarks and tests. Returns ChooseShape's and Database's errors.
  static absl::StatusOr<std::unique_ptr<LweServer>> FromRecords(
      absl::Span<const uint8_t> records, uint64_t rows, uint32_t record_bytes,
      const embedding::TableDigestBytes& digest, const LweServerOptions& options);

  ~LweServer();
  LweServer(const LweServer&) = delete;
  LweServer& operator=(const LweServer&) = delete;

  const LweConfig& config() const { return config_; }
  const Shape& shape() const { return config_.shape; }
  const Database& database() const { return database_; }
  // Why the hint was computed rather than read ("" when read from the file).
  const std::string& hint_note() const { return hint_note_; }

  absl::Span<const uint8_t> hint_blob() const { return blob_; }
  uint64_t hint_chunks() const;
  // Chunk `index` of the hint blob. Returns OUT_OF_RANGE if index >= hint_chunks().
  absl::StatusOr<absl::Span<const uint8_t>> HintChunk(uint64_t index) const;

  // Replaces the CPU product of the first level (e.g. by a GPU one). Not for concurrent use
  // with Answer.
  void SetDatabaseProduct(std::unique_ptr<DatabaseProduct> product);
  const DatabaseProduct& database_product() const { return *product_; }

  // Answers `batch` queries in one pass over the database: queries holds batch *
  // shape().query_words() words, answers batch * shape().answer_words(). The work depends only on
  // the sizes, never on the queries' contents. Returns INVALID_ARGUMENT for a batch below 1 or
  // spans of the wrong size, and the product's errors. Calls may run concurrently.
  absl::Status Answer(absl::Span<const uint32_t> queries, int batch,
                      absl::Span<uint32_t> answers) const {
    return Answer(queries, batch, answers, threads_);
  }
  // The same on at most `threads` threads (DatabaseProduct::MultiplyOn). INVALID_ARGUMENT also
  // for threads below 1.
  absl::Status Answer(absl::Span<const uint32_t> queries, int batch, absl::Span<uint32_t> answers,
                      int threads) const;

  LweServerMemory memory() const;
  // LweServerOptions::threads.
  int threads() const { return threads_; }

 private:
  LweServer(Database database, const LweServerOptions& options);
  absl::Status Finish(const embedding::TableDigestBytes& digest, Hint hint);
  absl::Status AnswerDouble(absl::Span<const uint32_t> queries, int batch,
                            absl::Span<uint32_t> answers, int threads) const;

  Database database_;
  int threads_;
  LweConfig config_;
  std::string hint_note_;
  std::vector<uint8_t> blob_;
  std::vector<int8_t> server_digits_;  // DoublePIR M1 (4n rows, AlignedStride(D1) apart)
  std::vector<uint32_t> a2_rows_;      // DoublePIR: A2, AlignedStride(D1) rows of n words (tail 0)
  std::unique_ptr<DatabaseProduct> product_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_SERVER_H_
