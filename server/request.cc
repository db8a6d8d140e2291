#include "server/request.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpf/params.h"

namespace veil::server {

absl::StatusOr<std::vector<dpf::DpfKey>> ParseKeys(capnp::List<capnp::Data>::Reader keys,
                                                   uint64_t param_bytes, const KeyRules& rules,
                                                   const ServerLimits& limits,
                                                   absl::Span<const pir::RowRange> ranges) {
  if (param_bytes > limits.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("request of ", param_bytes,
                                                   " bytes exceeds the limit of ",
                                                   limits.max_message_bytes, " bytes per call"));
  }
  if (keys.size() == 0) return absl::InvalidArgumentError("the call holds no keys");
  if (keys.size() > limits.max_keys_per_call) {
    return absl::InvalidArgumentError(absl::StrCat(keys.size(), " keys exceed the limit of ",
                                                   limits.max_keys_per_call, " keys per call"));
  }
  std::vector<dpf::DpfKey> parsed;
  parsed.reserve(keys.size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    capnp::Data::Reader bytes = keys[i];
    absl::StatusOr<dpf::DpfKey> key =
        dpf::DpfKey::Parse(absl::MakeConstSpan(bytes.begin(), bytes.size()));
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("key ", i, ": ", key.status().message()));
    }
    if (key->party() != rules.party) {
      return absl::InvalidArgumentError(absl::StrCat("key ", i, " is for party ", key->party(),
                                                     " but this server is party ", rules.party));
    }
    const uint64_t rows = ranges.empty() ? rules.rows : ranges[i].rows;
    if (absl::Status fits = dpf::CheckDomainFitsRows(key->params(), rows); !fits.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("key ", i, ": ", fits.message()));
    }
    if (std::find(rules.prgs.begin(), rules.prgs.end(), key->params().prg) == rules.prgs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("key ", i, ": this server does not accept ",
                                                     std::string(dpf::PrgName(key->params().prg)),
                                                     " keys (see its config)"));
    }
    // Narrower leaves cost up to 16 times the evaluation per key (clients make W = 16 only): a
    // key counts as one in every limit, so its cost must not be the client's choice.
    if (key->params().output == dpf::OutputType::kAdditive &&
        key->params().leaf_words_log2 != dpf::kMaxLeafWordsLog2) {
      return absl::InvalidArgumentError(
          absl::StrCat("key ", i, ": additive keys of ", 1 << key->params().leaf_words_log2,
                       "-word leaves (this server takes ", 1 << dpf::kMaxLeafWordsLog2, ")"));
    }
    if (rules.pooled && key->params().output != dpf::OutputType::kAdditive) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key ", i, ": pooled answers need additive keys, not ", dpf::OutputName(key->params())));
    }
    parsed.push_back(*std::move(key));
  }
  return parsed;
}

absl::StatusOr<std::vector<pir::RowRange>> ParseRanges(capnp::List<rpc::RowRange>::Reader ranges,
                                                       size_t key_count, uint64_t table_rows) {
  std::vector<pir::RowRange> parsed;
  if (ranges.size() == 0) return parsed;
  if (ranges.size() != key_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(ranges.size(), " row ranges for ", key_count, " keys"));
  }
  parsed.reserve(ranges.size());
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    pir::RowRange range{ranges[i].getFirstRow(), ranges[i].getRows()};
    if (absl::Status s = pir::CheckRange(range, table_rows); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("range ", i, ": ", s.message()));
    }
    parsed.push_back(range);
  }
  return parsed;
}

absl::StatusOr<std::vector<uint32_t>> ParseBagSizes(capnp::List<uint32_t>::Reader sizes,
                                                    size_t key_count) {
  std::vector<uint32_t> bags;
  uint64_t total = 0;
  for (uint32_t b = 0; b < sizes.size(); ++b) {
    if (sizes[b] == 0) return absl::InvalidArgumentError(absl::StrCat("bag ", b, " is empty"));
    total += sizes[b];
    if (total > key_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("bag sizes add up to more than the ", key_count, " keys of the call"));
    }
    bags.push_back(sizes[b]);
  }
  if (total != key_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("bag sizes add up to ", total, " but the call holds ", key_count, " keys"));
  }
  return bags;
}

}  // namespace veil::server
