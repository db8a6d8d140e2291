// Client side of two-server DPF-PIR: a query is a pair of keys for one row (with a weight, so
// that pooled sums work), and the answer is the sum (or XOR) of the two servers' shares.
#ifndef VEIL_PIR_TWO_SERVER_QUERY_H_
#define VEIL_PIR_TWO_SERVER_QUERY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/key.h"

namespace veil::pir {

struct QueryKeys {
  dpf::DpfKey key[2];  // key[b] goes to server b
};

// Keys for row `index` of a table of `rows` rows (domain LogDomainForRows(rows)), weight `weight`
// (additive; must be 1 for XOR), from the system CSPRNG (dpf::GenerateKeys).
// Returns INVALID_ARGUMENT if index >= rows.
absl::StatusOr<QueryKeys> MakeQuery(uint64_t rows, uint64_t index, uint32_t weight,
                                    dpf::Prg prg = dpf::Prg::kAes128,
                                    dpf::OutputType output = dpf::OutputType::kAdditive);

// out[j] = share0[j] + share1[j] (additive) or share0[j] ^ share1[j] (XOR).
// Returns INVALID_ARGUMENT if the three spans differ in length.
absl::Status Reconstruct(dpf::OutputType output, absl::Span<const uint32_t> share0,
                         absl::Span<const uint32_t> share1, absl::Span<uint32_t> out);

}  // namespace veil::pir

#endif  // VEIL_PIR_TWO_SERVER_QUERY_H_
