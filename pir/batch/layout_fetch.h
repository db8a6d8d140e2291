// From a fetch plan to range lookups, and from the fetched entries back to the wanted rows: the
// two halves of a layout lookup around the network (Client::LookupLayout, PrivateEmbeddingBag).
//
// The servers serve the layout's physical table (embedding/layout_table.h): each bin is a
// contiguous range of physical rows, and every key of the plan (dummies too) is a lookup of its
// slot within its bin's range, so a key's DPF domain and the servers' scan are the bin's. Each
// physical row is an entry: the slot's primary row followed by its co-located copies.
#ifndef VEIL_PIR_BATCH_LAYOUT_FETCH_H_
#define VEIL_PIR_BATCH_LAYOUT_FETCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/layout.h"
#include "pir/batch/planner.h"
#include "pir/two_server/row_range.h"

namespace veil::batch {

// One range lookup per fetch of `plan`, in order: fetch i is row indices[i] of ranges[i].
struct RangeLookups {
  std::vector<uint64_t> indices;
  std::vector<pir::RowRange> ranges;
};
RangeLookups LookupsOf(const embedding::Layout& layout, const FetchPlan& plan);

// The wanted rows of a layout lookup.
struct LayoutRows {
  std::vector<int32_t> rows;     // the distinct wanted rows, increasing
  std::vector<float> values;     // rows.size() x row_values: each row's values, zeros where missing
  std::vector<uint8_t> missing;  // per rows[i]: 1 if the plan could not serve it
};

// Reads the wanted rows out of `entries`, the fetched entries of `plan` in its fetch order
// (plan.fetches.size() x entry_rows() x row_values values). `wanted` is what was planned (any
// order, duplicates allowed). Returns INVALID_ARGUMENT if `entries` has another size, and
// INTERNAL if the plan's sources do not match the layout (a row's source is not in its fetched
// entry, or a row is neither served nor reported missing): never a wrong row.
absl::StatusOr<LayoutRows> UnpackEntries(const embedding::Layout& layout, const FetchPlan& plan,
                                         absl::Span<const int32_t> wanted,
                                         absl::Span<const float> entries, int64_t row_values);

}  // namespace veil::batch

#endif  // VEIL_PIR_BATCH_LAYOUT_FETCH_H_
