#include "embedding/layout_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::embedding {
namespace {

// A table that is never queried (0 rounds) is not served.
int64_t TableRows(const Layout& layout, int table) {
  if (layout.shape(table).rounds == 0) return 0;
  return int64_t{layout.shape(table).bins} * layout.slots_per_bin(table);
}

}  // namespace

int64_t PhysicalRows(const Layout& layout) {
  int64_t rows = 0;
  for (int table = 0; table < kNumLayoutTables; ++table) rows += TableRows(layout, table);
  return rows;
}

int64_t PhysicalIndex(const Layout& layout, const SlotRef& slot) {
  int64_t index = 0;
  for (int table = 0; table < slot.table; ++table) index += TableRows(layout, table);
  return index + int64_t{slot.bin} * layout.slots_per_bin(slot.table) + slot.slot;
}

absl::StatusOr<std::vector<float>> ArrangeRows(const Layout& layout, absl::Span<const float> rows) {
  const int64_t row_words = layout.params().row_words;
  if (static_cast<int64_t>(rows.size()) != int64_t{layout.num_rows()} * row_words) {
    return absl::InvalidArgumentError(absl::StrCat("layout table: expected ", layout.num_rows(),
                                                   " x ", row_words, " floats, got ", rows.size()));
  }
  std::vector<float> physical(static_cast<size_t>(PhysicalRows(layout) * layout.entry_words()),
                              0.0f);
  for (int table = 0; table < kNumLayoutTables; ++table) {
    if (TableRows(layout, table) == 0) continue;
    for (int32_t bin = 0; bin < layout.shape(table).bins; ++bin) {
      for (int32_t slot = 0; slot < layout.slots_per_bin(table); ++slot) {
        const SlotRef ref{table, bin, slot};
        float* out = physical.data() + PhysicalIndex(layout, ref) * layout.entry_words();
        const absl::Span<const int32_t> entry = layout.Entry(ref);
        for (size_t position = 0; position < entry.size(); ++position) {
          if (entry[position] < 0) continue;
          std::copy_n(rows.data() + int64_t{entry[position]} * row_words, row_words,
                      out + position * row_words);
        }
      }
    }
  }
  return physical;
}

}  // namespace veil::embedding
