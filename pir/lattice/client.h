// The client side of the LWE protocols: checks the server's config and hint, makes queries for
// records (fresh secrets every time; the secrets never leave the client) and decodes the
// answers. Serving is wiring: the config and hint blob come from the server's RPCs, the query
// goes to its answer RPC.
#ifndef VEIL_PIR_LATTICE_CLIENT_H_
#define VEIL_PIR_LATTICE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/key.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

// One lookup in flight: which record, and the secrets that decode its answer. Wiped on
// destruction.
class PendingLookup {
 public:
  PendingLookup() = default;
  PendingLookup(PendingLookup&&) = default;
  // Wipes the secrets it replaces.
  PendingLookup& operator=(PendingLookup&& other) noexcept;
  ~PendingLookup();

  uint64_t row() const { return row_; }

 private:
  friend class LweClient;
  uint64_t row_ = 0;
  // SimplePIR: s (n words). DoublePIR: s1, then s2_0 .. s2_{R-1} (n words each).
  std::vector<uint32_t> secrets_;
};

// A lookup's query made ahead of its row (LweClient::PrepareLookups): the encryptions of zero
// vectors under fresh secrets, which LweClient::FinishQuery turns into the row's query by adding
// Delta at each unit vector's hot entry. One lookup's worth; its secrets are wiped on destruction.
class PreparedLookup {
 public:
  PreparedLookup() = default;
  PreparedLookup(PreparedLookup&&) = default;
  PreparedLookup& operator=(PreparedLookup&&) = default;

 private:
  friend class LweClient;
  uint64_t owner_ = 0;           // LweClient::id_ of the client that made it
  std::vector<uint32_t> query_;  // shape().query_words() words, row-free
  PendingLookup lookup_;         // the secrets
};

// Decryption noise of one lookup: the largest distance of a decrypted value from its multiple of
// Delta = 2^24 (decoding fails beyond 2^23), at each level, and the first level's sum of squared
// noise over its decrypted elements (SimplePIR decrypts all D1 elements of the column).
struct DecodeNoise {
  uint32_t first_level = 0;   // the record's bytes
  uint32_t second_level = 0;  // DoublePIR: the digits of the hint rows and answer words
  uint64_t first_level_samples = 0;
  double first_level_sum_squares = 0;
};

class LweClient {
 public:
  // Validates the config (ValidateConfig), the blob against it (size and BLAKE2b digest named by
  // the config) and parses the hint (ParseClientHint). Returns those functions' errors.
  static absl::StatusOr<std::unique_ptr<LweClient>> Create(const LweConfig& config,
                                                           absl::Span<const uint8_t> hint_blob);

  const LweConfig& config() const { return config_; }
  const Shape& shape() const { return config_.shape; }

  // A query for record `row`, written to `query` (shape().query_words() words). Returns
  // INVALID_ARGUMENT if row >= rows or query has the wrong size.
  absl::StatusOr<PendingLookup> MakeQuery(uint64_t row, absl::Span<uint32_t> query,
                                          RandomSource& rng = SystemRandom()) const;
  // Queries for several records at once (a bag), query i at [i * query_words, (i + 1) *
  // query_words): each public matrix is expanded once for all of them. Errors as MakeQuery.
  absl::StatusOr<std::vector<PendingLookup>> MakeQueries(absl::Span<const uint64_t> rows,
                                                         absl::Span<uint32_t> queries,
                                                         RandomSource& rng = SystemRandom()) const;

  // MakeQueries in two steps: `count` lookups' row-free part (nearly all of the work: A's
  // expansion and the products with fresh secrets), made ahead, e.g. while an app is idle; then
  // the query for record `row` from one of them (Delta added at each unit vector's hot entry by
  // a masked pass, no address chosen by the row), written to `query` (query_words() words).
  // FinishQuery returns INVALID_ARGUMENT if row >= rows, query has the wrong size or `prepared`
  // is another client's (or moved from).
  std::vector<PreparedLookup> PrepareLookups(uint64_t count,
                                             RandomSource& rng = SystemRandom()) const;
  absl::StatusOr<PendingLookup> FinishQuery(uint64_t row, PreparedLookup prepared,
                                            absl::Span<uint32_t> query) const;

  // The record's bytes (shape().record_bytes) from the server's answer
  // (shape().answer_words() words). `noise`, if not null, receives the decryption noise.
  // Returns INVALID_ARGUMENT if a span has the wrong size.
  absl::Status Decode(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                      absl::Span<uint8_t> record, DecodeNoise* noise = nullptr) const;

 private:
  LweClient(const LweConfig& config, std::vector<uint32_t> hint);
  // MakeQueries' encryptions for `count` lookups, of `rows` (count of them) or, rows empty, of
  // zero vectors (PrepareLookups). `queries` holds count * query_words() words.
  std::vector<PendingLookup> Encrypt(absl::Span<const uint64_t> rows, uint64_t count,
                                     absl::Span<uint32_t> queries, RandomSource& rng) const;
  absl::Status DecodeDouble(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                            absl::Span<uint8_t> record, DecodeNoise& noise) const;

  LweConfig config_;
  std::vector<uint32_t> hint_;  // SimplePIR H (D1 x n); DoublePIR H2 (4n x n)
  const uint64_t id_ = NewClientId();
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_CLIENT_H_
