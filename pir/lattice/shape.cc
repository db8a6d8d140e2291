#include "pir/lattice/shape.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kN = kLweDimension;

// The rule's width limit for R-element lookups, capped at the samples LWE is analysed for.
uint64_t WidthLimit(Protocol protocol, uint32_t record_bytes) {
  return std::min(kMaxSamples, LargestWidth(protocol, kPlaintextModulus, record_bytes));
}

// log2(2^a + 2^b).
double Log2Sum(double a, double b) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log2(1.0 + std::exp2(lo - hi));
}

Shape MakeShape(Protocol protocol, uint64_t rows, uint32_t record_bytes, uint64_t k) {
  Shape s;
  s.protocol = protocol;
  s.rows = rows;
  s.record_bytes = record_bytes;
  s.records_per_column = k;
  s.d0 = (rows + k - 1) / k;
  s.d1 = k * record_bytes;
  s.width_limit = WidthLimit(protocol, record_bytes);
  // SimplePIR: R decryptions at width D0. DoublePIR: R at width D0 (first level) and
  // R * (n + 1) * 4 at width D1 (the second-level digits).
  s.log2_failure = Log2FailureBound(kPlaintextModulus, s.d0, record_bytes);
  if (protocol == Protocol::kDoublePir) {
    s.log2_failure =
        Log2Sum(s.log2_failure,
                Log2FailureBound(kPlaintextModulus, s.d1, uint64_t{record_bytes} * (kN + 1) * 4));
  }
  return s;
}

bool Fits(const Shape& s) {
  return s.d0 <= s.width_limit && (s.protocol == Protocol::kSimplePir || s.d1 <= s.width_limit);
}

}  // namespace

uint64_t Shape::query_words() const {
  return protocol == Protocol::kSimplePir ? d0 : d0 + uint64_t{record_bytes} * d1;
}

std::vector<UnitVector> QueryUnitVectors(const Shape& s, uint64_t row) {
  std::vector<UnitVector> out = {{0, s.d0, s.column_of(row)}};
  if (s.protocol == Protocol::kDoublePir) {
    for (uint64_t j = 0; j < s.record_bytes; ++j) {
      out.push_back({s.d0 + j * s.d1, s.d1, s.slot_of(row) * s.record_bytes + j});
    }
  }
  return out;
}

uint64_t Shape::answer_words() const {
  return protocol == Protocol::kSimplePir
             ? d1
             : uint64_t{record_bytes} * (kN + 1) * kDigitsPerWord + kDigitsPerWord * kN;
}

uint64_t Shape::hint_words() const {
  return protocol == Protocol::kSimplePir ? d1 * kN : kDigitsPerWord * kN * kN;
}

double Shape::CostBytes(const ShapeOptions& options) const {
  if (options.packed_ring_n != 0) {
    const uint64_t n = options.packed_ring_n;
    return 4.0 * query_words() + 8.0 * n * double((d1 + n - 1) / n);
  }
  return 4.0 * (query_words() + answer_words()) +
         4.0 * hint_words() / static_cast<double>(std::max<uint64_t>(1, options.lookups_per_hint));
}

std::string ShapeSummary(const Shape& s) {
  return absl::StrFormat(
      "%s: %d records x %d B, %d per column: %d x %d matrix (D1 x D0), p = %d; query %d B, "
      "answer %d B, hint %d B; width limit %d, failure <= 2^%.1f",
      std::string(ProtocolName(s.protocol)), s.rows, s.record_bytes, s.records_per_column, s.d1,
      s.d0, s.plaintext_modulus, 4 * s.query_words(), 4 * s.answer_words(), 4 * s.hint_words(),
      s.width_limit, s.log2_failure);
}

absl::StatusOr<Shape> ChooseShape(Protocol protocol, uint64_t rows, uint32_t record_bytes,
                                  const ShapeOptions& options) {
  if (rows == 0 || rows > kMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a table of %d rows is outside [1, 2^40]", rows));
  }
  if (record_bytes == 0 || record_bytes > kMaxRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record size %d bytes is outside [1, %d]", record_bytes, kMaxRecordBytes));
  }
  const uint64_t limit = WidthLimit(protocol, record_bytes);
  if (options.records_per_column != 0) {
    if (options.records_per_column > rows ||
        options.records_per_column > kMaxMatrixRows / record_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d records per column is more than the table's %d rows or makes the matrix taller "
          "than 2^32",
          options.records_per_column, rows));
    }
    const Shape s = MakeShape(protocol, rows, record_bytes, options.records_per_column);
    if (!Fits(s)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d records per column gives a %d x %d matrix, wider than the %d columns the "
          "correctness rule allows at p = %d",
          s.records_per_column, s.d1, s.d0, limit, kPlaintextModulus));
    }
    return s;
  }
  // The smallest k with D0 within the limit; cost = (a falling term in D0) + (a term growing at
  // least 4 * k * R, packed too): stop once the growing term alone exceeds the best cost.
  const uint64_t k_min = (rows + limit - 1) / limit;
  std::optional<Shape> best;
  double best_cost = 0;
  for (uint64_t k = k_min; k <= rows && k * record_bytes <= kMaxMatrixRows; ++k) {
    const Shape s = MakeShape(protocol, rows, record_bytes, k);
    if (best && 4.0 * double(k) * record_bytes > best_cost) break;
    if (!Fits(s)) continue;
    const double cost = s.CostBytes(options);
    if (!best || cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  if (!best) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no %s shape fits %d records of %d bytes within the width limit %d",
                        std::string(ProtocolName(protocol)), rows, record_bytes, limit));
  }
  return *best;
}

absl::Status ValidateShape(const Shape& s) {
  if (s.protocol != Protocol::kSimplePir && s.protocol != Protocol::kDoublePir) {
    return absl::InvalidArgumentError("unknown protocol in the shape");
  }
  if (s.plaintext_modulus != kPlaintextModulus) {
    return absl::InvalidArgumentError(absl::StrFormat("plaintext modulus %d, expected %d",
                                                      s.plaintext_modulus, kPlaintextModulus));
  }
  if (s.rows == 0 || s.rows > kMaxRows || s.record_bytes == 0 || s.record_bytes > kMaxRecordBytes ||
      s.records_per_column == 0 || s.records_per_column > s.rows ||
      s.records_per_column > kMaxMatrixRows / s.record_bytes) {
    return absl::InvalidArgumentError(
        "the shape's rows, record size or records per column are "
        "out of range");
  }
  const Shape expected = MakeShape(s.protocol, s.rows, s.record_bytes, s.records_per_column);
  if (s.d0 != expected.d0 || s.d1 != expected.d1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a %d x %d matrix does not hold %d records of %d bytes, %d per column",
                        s.d1, s.d0, s.rows, s.record_bytes, s.records_per_column));
  }
  if (!Fits(expected) || expected.log2_failure > kLog2FailureBound) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a %d x %d matrix is wider than the correctness rule allows (limit %d, failure 2^%.1f)",
        s.d1, s.d0, expected.width_limit, expected.log2_failure));
  }
  return absl::OkStatus();
}

Database::Database(const Shape& shape)
    : shape_(shape), stride_(AlignedStride(shape.d0)), bytes_(shape.d1 * stride_, 0) {}

void Database::Place(uint64_t row, const uint8_t* record) {
  const uint64_t column = shape_.column_of(row);
  const uint64_t first = shape_.slot_of(row) * shape_.record_bytes;
  for (uint32_t b = 0; b < shape_.record_bytes; ++b) {
    bytes_[(first + b) * stride_ + column] = static_cast<int8_t>(record[b]);
  }
}

absl::StatusOr<Database> Database::FromRecords(const Shape& shape,
                                               absl::Span<const uint8_t> records) {
  if (records.size() != shape.rows * shape.record_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d bytes of records, expected %d x %d", records.size(), shape.rows, shape.record_bytes));
  }
  Database db(shape);
  for (uint64_t i = 0; i < shape.rows; ++i) db.Place(i, records.data() + i * shape.record_bytes);
  return db;
}

absl::StatusOr<Database> Database::FromTable(const Shape& shape, const embedding::Table& table) {
  if (table.rows() != shape.rows || 4ull * table.row_words() != shape.record_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the shape is for %d records of %d bytes, the table has %d rows of %d bytes", shape.rows,
        shape.record_bytes, table.rows(), 4ull * table.row_words()));
  }
  Database db(shape);
  for (uint64_t i = 0; i < shape.rows; ++i) {
    db.Place(i, reinterpret_cast<const uint8_t*>(table.row(i).data()));
  }
  return db;
}

ByteMatrixView Database::view() const { return {bytes_.data(), shape_.d1, shape_.d0, stride_}; }

}  // namespace veil::lattice
