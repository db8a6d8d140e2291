#include "pir/two_server/query.h"

#include "absl/strings/str_format.h"

namespace veil::pir {

absl::StatusOr<QueryKeys> MakeQuery(uint64_t rows, uint64_t index, uint32_t weight, dpf::Prg prg,
                                    dpf::OutputType output) {
  if (index >= rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("row %d outside a table of %d rows", index, rows));
  }
  dpf::DpfParameters params;
  params.log_domain = dpf::LogDomainForRows(rows);
  params.prg = prg;
  params.output = output;
  params.leaf_words_log2 = output == dpf::OutputType::kXor ? 0 : 4;
  auto keys = dpf::GenerateKeys(params, index, weight);
  if (!keys.ok()) return keys.status();
  QueryKeys query;
  query.key[0] = std::move(keys->first);
  query.key[1] = std::move(keys->second);
  return query;
}

absl::Status Reconstruct(dpf::OutputType output, absl::Span<const uint32_t> share0,
                         absl::Span<const uint32_t> share1, absl::Span<uint32_t> out) {
  if (share0.size() != share1.size() || share0.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shares of %d and %d words cannot reconstruct %d words", share0.size(), share1.size(),
        out.size()));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = output == dpf::OutputType::kXor ? share0[i] ^ share1[i] : share0[i] + share1[i];
  }
  return absl::OkStatus();
}

}  // namespace veil::pir
