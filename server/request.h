// Validation of one dpf2 call's parameters, before any work: the checks every answer/answerPooled
// call passes through (sizes, counts, then each key against the server's party and table). Free
// functions, so that tests and the fuzzer reach them without a server.
#ifndef VEIL_SERVER_REQUEST_H_
#define VEIL_SERVER_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dpf/key.h"
#include "pir/two_server/row_range.h"
#include "server/limits.h"
#include "rpc/veil.capnp.h"

namespace veil::server {

// What a key must match: this server's party and the table's row count.
struct KeyRules {
  int party = 0;
  uint64_t rows = 0;
  bool pooled = false;  // answerPooled: additive keys only
  absl::Span<const dpf::Prg> prgs = kDefaultPrgs;  // the PRGs accepted
};

// Parses and validates the keys of one call: the parameters (param_bytes) must fit
// max_message_bytes, the count must be in [1, max_keys_per_call], and each key must parse, be for
// rules.party, fit a table of rules.rows rows (or, when `ranges` is not empty, ranges[i].rows rows)
// and (pooled) be additive, and use one of rules.prgs. `ranges` is what ParseRanges returned for the same call: empty or one
// range per key.
// Returns INVALID_ARGUMENT naming the exceeded limit or the first bad key ("key 3: ...").
absl::StatusOr<std::vector<dpf::DpfKey>> ParseKeys(capnp::List<capnp::Data>::Reader keys,
                                                   uint64_t param_bytes, const KeyRules& rules,
                                                   const ServerLimits& limits,
                                                   absl::Span<const pir::RowRange> ranges = {});

// The row ranges of a call: empty when the call has none (every key over the whole table),
// otherwise one per key, each inside a table of `table_rows` rows and not empty.
// Returns INVALID_ARGUMENT naming the count mismatch or the first bad range ("range 3: ...").
absl::StatusOr<std::vector<pir::RowRange>> ParseRanges(capnp::List<rpc::RowRange>::Reader ranges,
                                                       size_t key_count, uint64_t table_rows);

// The bag sizes of an answerPooled call: each at least 1, adding up to key_count.
// Returns INVALID_ARGUMENT naming the empty bag or the mismatch otherwise.
absl::StatusOr<std::vector<uint32_t>> ParseBagSizes(capnp::List<uint32_t>::Reader sizes,
                                                    size_t key_count);

}  // namespace veil::server

#endif  // VEIL_SERVER_REQUEST_H_
