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

  // The record's bytes (shape().record_bytes) from the server's answer
  // (shape().answer_words() words). `noise`, if not null, receives the decryption noise.
  // Returns INVALID_ARGUMENT if a span has the wrong size.
  absl::Status Decode(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                      absl::Span<uint8_t> record, DecodeNoise* noise = nullptr) const;

 private:
  LweClient(const LweConfig& config, std::vector<uint32_t> hint);
  absl::Status DecodeDouble(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                            absl::Span<uint8_t> record, DecodeNoise& noise) const;

  LweConfig config_;
  std::vector<uint32_t> hint_;  // SimplePIR H (D1 x n); DoublePIR H2 (4n x n)
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_CLIENT_H_
