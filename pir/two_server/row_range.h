// A contiguous range of a table's rows: what a range query's keys are evaluated over (a batch-PIR
// bin, for instance). One type for the protocol, the server and the client.
#ifndef VEIL_PIR_TWO_SERVER_ROW_RANGE_H_
#define VEIL_PIR_TWO_SERVER_ROW_RANGE_H_

#include <compare>
#include <cstdint>

#include "absl/status/status.h"

namespace veil::pir {

// Rows [first_row, first_row + rows) of a table.
struct RowRange {
  uint64_t first_row = 0;
  uint64_t rows = 0;
  friend bool operator==(const RowRange&, const RowRange&) = default;
  friend auto operator<=>(const RowRange&, const RowRange&) = default;
};

// Checks that `range` is not empty and lies inside a table of `table_rows` rows. Returns
// INVALID_ARGUMENT naming the problem otherwise.
absl::Status CheckRange(const RowRange& range, uint64_t table_rows);

}  // namespace veil::pir

#endif  // VEIL_PIR_TWO_SERVER_ROW_RANGE_H_
