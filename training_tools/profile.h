// Access profile of an embedding table from the training split: how often each row is looked up
// and which rows are looked up together, and the layout the co-design derives from it.
#ifndef VEIL_TRAINING_TOOLS_PROFILE_H_
#define VEIL_TRAINING_TOOLS_PROFILE_H_

#include <array>
#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "embedding/layout.h"

namespace veil::training {

// The rows one inference looks up (distinct, any order).
using RowRequest = std::vector<int32_t>;

struct AccessProfile {
  int32_t num_rows = 0;
  int64_t num_requests = 0;
  std::vector<int64_t> frequency;  // requests that look up each row
  // Per row, up to `top_k` other rows in decreasing co-access count (ties: lower row first),
  // only rows seen together at least twice: a single co-occurrence is noise, not a pattern.
  std::vector<std::vector<int32_t>> co_accessed;
};

// Counts accesses and co-accesses over `requests`. Rows outside [0, num_rows) are ignored.
AccessProfile BuildProfile(const std::vector<RowRequest>& requests, int32_t num_rows, int top_k);

// Rows in decreasing frequency (ties: lower row first).
std::vector<int32_t> RowsByFrequency(const AccessProfile& profile);

// Writes "row,frequency,co_accessed" CSV (co-accessed rows separated by spaces).
void WriteProfileCsv(const AccessProfile& profile, std::ostream& out);

// The co-design knobs of a layout.
struct LayoutChoice {
  double hot_fraction = 0;  // share of rows, most frequent first, in the hot table
  int32_t hot_bins = 0;
  int32_t hot_rounds = 0;
  int32_t cold_bins = 0;
  int32_t cold_rounds = 0;
  int32_t colocation = 0;  // c
};

// Builds the layout of `choice`: the hot table holds the round(hot_fraction · rows) most frequent
// rows; every row is co-located with its c most co-accessed rows. Bins are clamped to the rows of
// their table (a table without rows gets no bins or rounds). Returns Layout::Create's errors.
absl::StatusOr<embedding::Layout> DesignLayout(const AccessProfile& profile, int32_t row_words,
                                               const LayoutChoice& choice,
                                               const std::array<uint8_t, 16>& seed);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_PROFILE_H_
