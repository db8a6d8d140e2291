#include "pir/two_server/row_range.h"

#include "absl/strings/str_format.h"

namespace veil::pir {

absl::Status CheckRange(const RowRange& range, uint64_t table_rows) {
  if (range.rows == 0) return absl::InvalidArgumentError("the row range is empty");
  if (range.first_row >= table_rows || range.rows > table_rows - range.first_row) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rows [%d, %d + %d) are outside the table (%d rows)", range.first_row,
                        range.first_row, range.rows, table_rows));
  }
  return absl::OkStatus();
}

}  // namespace veil::pir
