#include "pir/batch/layout_fetch.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "embedding/layout_table.h"

namespace veil::batch {

RangeLookups LookupsOf(const embedding::Layout& layout, const FetchPlan& plan) {
  RangeLookups lookups;
  lookups.indices.reserve(plan.fetches.size());
  lookups.ranges.reserve(plan.fetches.size());
  for (const SlotFetch& f : plan.fetches) {
    const embedding::SlotRef bin_start{f.slot.table, f.slot.bin, 0};
    lookups.ranges.push_back(
        {static_cast<uint64_t>(embedding::PhysicalIndex(layout, bin_start)),
         static_cast<uint64_t>(layout.slots_per_bin(f.slot.table))});
    lookups.indices.push_back(static_cast<uint64_t>(f.slot.slot));
  }
  return lookups;
}

absl::StatusOr<LayoutRows> UnpackEntries(const embedding::Layout& layout, const FetchPlan& plan,
                                         absl::Span<const int32_t> wanted,
                                         absl::Span<const float> entries, int64_t row_values) {
  const int64_t entry_values = int64_t{layout.entry_rows()} * row_values;
  if (row_values < 1 ||
      entries.size() != static_cast<size_t>(entry_values) * plan.fetches.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        entries.size(), " fetched values for ", plan.fetches.size(), " entries of ",
        layout.entry_rows(), " rows x ", row_values, " values"));
  }
  LayoutRows out;
  out.rows.assign(wanted.begin(), wanted.end());
  std::sort(out.rows.begin(), out.rows.end());
  out.rows.erase(std::unique(out.rows.begin(), out.rows.end()), out.rows.end());
  out.values.assign(out.rows.size() * row_values, 0.0f);
  out.missing.assign(out.rows.size(), 1);
  auto index_of = [&](int32_t row) -> int64_t {
    auto it = std::lower_bound(out.rows.begin(), out.rows.end(), row);
    return it != out.rows.end() && *it == row ? it - out.rows.begin() : -1;
  };
  for (const RowSource& source : plan.sources) {
    const int64_t index = index_of(source.row);
    const bool fetch_ok = source.fetch >= 0 && source.fetch < static_cast<int32_t>(plan.fetches.size());
    const SlotFetch* f = fetch_ok ? &plan.fetches[source.fetch] : nullptr;
    const absl::Span<const int32_t> entry =
        f != nullptr ? layout.Entry(f->slot) : absl::Span<const int32_t>();
    if (f == nullptr || f->dummy || source.position < 0 ||
        source.position >= static_cast<int32_t>(entry.size()) ||
        entry[source.position] != source.row || index < 0) {
      return absl::InternalError(absl::StrCat("layout lookup: the plan's source of row ",
                                              source.row, " is not in its fetched entry"));
    }
    std::memcpy(out.values.data() + index * row_values,
                entries.data() + source.fetch * entry_values + source.position * row_values,
                sizeof(float) * row_values);
    out.missing[index] = 0;
  }
  // The planner reports every wanted row as served or missing; check that they agree.
  for (size_t i = 0; i < out.rows.size(); ++i) {
    const bool reported =
        std::binary_search(plan.missing.begin(), plan.missing.end(), out.rows[i]);
    if (reported != static_cast<bool>(out.missing[i])) {
      return absl::InternalError(absl::StrCat("layout lookup: row ", out.rows[i],
                                              " is neither fetched nor reported missing"));
    }
  }
  return out;
}

}  // namespace veil::batch
