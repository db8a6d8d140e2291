// The physical table of a layout: what the two servers serve so that a client can fetch a
// layout's slots with veil::client::Client. Every slot of every bin of every queried table (rounds > 0;
// a table that is never queried is not served) becomes one row of entry_words() words (the
// slot's entry: its primary row followed by its c co-located copies, zeros for -1), table-major,
// then bin-major, then slot-major.
//
// Each bin's slots are a contiguous range of physical rows, [PhysicalIndex(table, bin, 0),
// + slots_per_bin(table)): PrivateEmbeddingBag sends every key over its bin's range only
// (veil::client::Client::LookupInRanges), so a key's DPF domain and the server's scan are the bin's, not
// the physical table's.
#ifndef VEIL_EMBEDDING_LAYOUT_TABLE_H_
#define VEIL_EMBEDDING_LAYOUT_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/layout.h"

namespace veil::embedding {

// Rows of the physical table: Σ over queried tables of bins × slots_per_bin.
int64_t PhysicalRows(const Layout& layout);

// The physical row of `slot` (which must be a slot of a queried table of `layout`).
int64_t PhysicalIndex(const Layout& layout, const SlotRef& slot);

// Arranges `rows` (layout.num_rows() × layout.params().row_words floats, row-major) into the
// physical table: PhysicalRows × entry_words floats. Returns INVALID_ARGUMENT if `rows` has
// another size.
absl::StatusOr<std::vector<float>> ArrangeRows(const Layout& layout, absl::Span<const float> rows);

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_LAYOUT_TABLE_H_
