#include "pir/batch/bags.h"

#include <algorithm>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace veil::batch {

absl::Status CheckBagSizes(absl::Span<const uint32_t> bag_sizes, uint64_t entries) {
  uint64_t total = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (bag_sizes[b] == 0) return absl::InvalidArgumentError(absl::StrCat("bag ", b, " is empty"));
    total += bag_sizes[b];
  }
  if (total != entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("bag sizes add up to ", total, " but there are ", entries, " entries"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PaddedBags> PadBags(absl::Span<const uint64_t> indices,
                                   absl::Span<const uint32_t> bag_sizes,
                                   absl::Span<const int32_t> weights, uint64_t rows,
                                   uint32_t pad_to, absl::BitGenRef random) {
  if (absl::Status s = CheckBagSizes(bag_sizes, indices.size()); !s.ok()) return s;
  if (!weights.empty() && weights.size() != indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights.size(), " weights for ", indices.size(), " indices"));
  }
  for (uint64_t index : indices) {
    if (index >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", index, " is outside the table (", rows, " rows)"));
    }
  }
  PaddedBags out;
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (pad_to != 0 && bag_sizes[b] > pad_to) {
      return absl::InvalidArgumentError(absl::StrCat("bag ", b, " holds ", bag_sizes[b],
                                                     " rows, more than the padded bag size (",
                                                     pad_to, "; raise pad_bags_to)"));
    }
    const uint32_t sent = std::max(bag_sizes[b], pad_to);
    for (uint32_t k = 0; k < sent; ++k) {
      if (k < bag_sizes[b]) {
        out.indices.push_back(indices[next + k]);
        out.weights.push_back(weights.empty() ? 1u : static_cast<uint32_t>(weights[next + k]));
      } else {
        out.indices.push_back(absl::Uniform<uint64_t>(random, 0, rows));
        out.weights.push_back(0);
      }
    }
    out.bag_sizes.push_back(sent);
    next += bag_sizes[b];
  }
  return out;
}

void SumBags(absl::Span<const uint32_t> shares, absl::Span<const uint32_t> bag_sizes,
             uint32_t row_words, absl::Span<uint32_t> out) {
  // Shares are linear: the sum of a bag's shares is a share of the (weighted) sum of its rows,
  // mod 2^32 like every additive share.
  size_t key = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    for (uint32_t j = 0; j < row_words; ++j) {
      uint32_t sum = 0;
      for (uint32_t k = 0; k < bag_sizes[b]; ++k) sum += shares[(key + k) * row_words + j];
      out[b * row_words + j] = sum;
    }
    key += bag_sizes[b];
  }
}

}  // namespace veil::batch
