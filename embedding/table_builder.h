// Writes table files (see table.h) from floats in memory, CSV files and raw float32 files.
// Every writer builds the file under a temporary name next to `out_path` and renames it into place
// only when complete, so a failure never leaves a half-written table at `out_path`.
#ifndef VEIL_EMBEDDING_TABLE_BUILDER_H_
#define VEIL_EMBEDDING_TABLE_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"

namespace veil::embedding {

struct TableOptions {
  uint64_t epoch = 0;
  // Used by RowFormat::kFixed32 only (stored as 0 for the other formats).
  int frac_bits = 16;
  // With a key, every row carries its authentication tag (embedding/row_tag.h); the key goes to
  // clients, never to servers.
  std::optional<RowKey> row_key;
  // The tags' kind: kSipHash64Shape; kLinearMac61 for a table whose pooled sums (bfv-bag) are to
  // be checked; or kSipHash64Epoch for a new version of a table served with that kind (a rolling
  // update keeps the kind). INVALID_ARGUMENT for any other.
  RowTag row_tag = RowTag::kSipHash64Shape;
};

// Writes `values` (row-major, rows * dim floats) as a table of `format` rows.
// Returns INVALID_ARGUMENT if the format is unknown, dim is outside [1, kMaxDim], values is empty
// or not a multiple of dim, or a row cannot be encoded (see EncodeRow; the message names the row);
// the errno-derived status if the file cannot be written or renamed.
absl::Status WriteTable(const std::string& out_path, RowFormat format, uint32_t dim,
                        absl::Span<const float> values, const TableOptions& options);

// Reads one row per line of comma-separated floats (surrounding spaces, a trailing '\r' and blank
// lines are ignored) and writes them as WriteTable does. The first line is a header, and skipped,
// if none of its fields is a number. dim = 0 takes the dimension from the first row.
// Returns the errno-derived status if the CSV cannot be read, INVALID_ARGUMENT naming the line
// (and field) for a field that is not a number, a row whose field count differs from dim, or a
// file without rows, and otherwise what WriteTable returns.
absl::Status WriteTableFromCsv(const std::string& csv_path, const std::string& out_path,
                               RowFormat format, uint32_t dim, const TableOptions& options);

// Reads a raw file of little-endian float32 values, rows * dim of them, and writes them as
// WriteTable does. Returns the errno-derived status if the file cannot be read, INVALID_ARGUMENT
// if dim is 0 or the file size is not a nonzero multiple of 4 * dim, and otherwise what WriteTable
// returns.
absl::Status WriteTableFromF32File(const std::string& f32_path, const std::string& out_path,
                                   RowFormat format, uint32_t dim, const TableOptions& options);

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_TABLE_BUILDER_H_
