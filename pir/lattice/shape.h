// How a table becomes the LWE database: a D1 x D0 matrix of Z_256 elements (bytes) in which each
// column holds whole records (table rows), so that the client, asking for one column, gets its
// record among the k = D1 / R records stacked in it (R = record bytes). The shape is chosen per
// table to minimise what a client moves per lookup.
//
// Record i lives in column i % D0, slot t = i / D0: matrix rows [t * R, (t + 1) * R), byte b of
// the record at row t * R + b.
#ifndef VEIL_PIR_LATTICE_SHAPE_H_
#define VEIL_PIR_LATTICE_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/table.h"
#include "pir/he/huge_pages.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/params.h"

namespace veil::lattice {

// Largest record (bytes), table (rows) and matrix height accepted: together they bound every size
// computation (no product of them overflows), including those on a config from a server.
inline constexpr uint32_t kMaxRecordBytes = 1u << 20;
inline constexpr uint64_t kMaxRows = uint64_t{1} << 40;
inline constexpr uint64_t kMaxMatrixRows = uint64_t{1} << 32;

struct ShapeOptions {
  // Lookups a client makes per hint download: the hint's bytes count 1 / lookups_per_hint
  // against each lookup when the shape is chosen (1: the hint weighs like a lookup; large: the
  // square-ish shape that minimises the online bytes alone).
  uint64_t lookups_per_hint = 1024;
  // Records per column, k; 0 chooses the cheapest.
  uint64_t records_per_column = 0;
  // 0: the answer travels as words and the hint is downloaded (SimplePIR, DoublePIR). N: the
  // answer is ring-packed into ceil(D1 / N) ciphertexts of 8N bytes and no hint travels
  // (ExpPack(S), pack_simple.h): the cost is 4 D0 up + ceil(D1 / N) 8N down, ties going to the
  // fewer ciphertexts (less packing work and memory on the server).
  uint32_t packed_ring_n = 0;
};

// The chosen database shape and what it costs. Reported by the server's config.
struct Shape {
  Protocol protocol = Protocol::kSimplePir;
  uint64_t rows = 0;                // records (table rows)
  uint32_t record_bytes = 0;        // R
  uint64_t records_per_column = 0;  // k
  uint64_t d0 = 0;                  // matrix columns: ceil(rows / k)
  uint64_t d1 = 0;                  // matrix rows: k * R
  uint32_t plaintext_modulus = kPlaintextModulus;
  // The widest D0 (and, for DoublePIR, D1) the correctness rule allows for a lookup of R
  // elements at this p (LargestWidth), and the rule's bound on a lookup failing, log2.
  uint64_t width_limit = 0;
  double log2_failure = 0;

  uint64_t column_of(uint64_t row) const { return row % d0; }
  uint64_t slot_of(uint64_t row) const { return row / d0; }

  // Per lookup, in 32-bit words. SimplePIR: query D0, answer D1. DoublePIR: query D0 + R * D1
  // (the first-level query, then one second-level query per record byte), answer
  // R * (n + 1) * 4 (each byte's hint row and answer word, in 4 byte digits: R x 4n words a2,
  // then R x 4 words h2) + 4 * n (h1, the answer's digits times A2, shared by the R
  // second-level queries; k-major, word k of digit row p at 4k + p).
  uint64_t query_words() const;
  uint64_t answer_words() const;
  // Downloaded once per table version: SimplePIR H = DB * A1 (D1 x n); DoublePIR
  // H2 = digits(H1) * A2 (4n x n).
  uint64_t hint_words() const;
  // The per-lookup cost the choice minimises: bytes up + down + hint / lookups_per_hint, or for
  // a packed answer (options.packed_ring_n) bytes up + the packed answer.
  double CostBytes(const ShapeOptions& options) const;

  friend bool operator==(const Shape&, const Shape&) = default;
};

// Where a query's unit vector lies: words [begin, begin + length) of the query words encrypt the
// unit vector whose hot entry is `index` (index < length).
struct UnitVector {
  uint64_t begin = 0;
  uint64_t length = 0;
  uint64_t index = 0;
};

// The unit vectors of record `row`'s query (row < rows): the column (D0 words); DoublePIR also
// byte j's row of the column, slot * R + j, in the j-th block of D1 words after them.
std::vector<UnitVector> QueryUnitVectors(const Shape& shape, uint64_t row);

// Human-readable one-liner for logs and the config report.
std::string ShapeSummary(const Shape& shape);

// The cheapest shape for `rows` records of `record_bytes` bytes under `protocol`: D0 stays within
// the rule's width limit for R-element lookups at p = 2^8 (a table too wide for that becomes
// taller instead: more records per column), as does D1 for DoublePIR, whose second level is D1
// wide. Returns INVALID_ARGUMENT if rows is 0 or above kMaxRows, record_bytes is 0 or above
// kMaxRecordBytes, the matrix would be taller than kMaxMatrixRows, a
// given records_per_column is 0-rows or makes D0 (or D1) wider than the rule allows, or no shape
// fits (DoublePIR tables beyond width_limit^2 bytes).
absl::StatusOr<Shape> ChooseShape(Protocol protocol, uint64_t rows, uint32_t record_bytes,
                                  const ShapeOptions& options = {});

// Checks a shape received from elsewhere (a server's config) against the rule: consistent sizes,
// p = 2^8, D0 (and D1 for DoublePIR) within the width limit, a failure bound of at most 2^-40.
// Returns INVALID_ARGUMENT naming the problem.
absl::Status ValidateShape(const Shape& shape);

// The database matrix: D1 rows of D0 signed bytes, rows AlignedStride(D0) bytes apart.
class Database {
 public:
  // `records` holds rows * R bytes, record i at [i * R, (i + 1) * R); each byte is the Z_256
  // element of its two's-complement value. Returns INVALID_ARGUMENT if the size is not
  // rows * R.
  static absl::StatusOr<Database> FromRecords(const Shape& shape,
                                              absl::Span<const uint8_t> records);
  // A table file's rows, each its 4 * row_words little-endian bytes (any row format; padding
  // excluded). Returns INVALID_ARGUMENT if the shape's rows or R differ from the table's.
  static absl::StatusOr<Database> FromTable(const Shape& shape, const embedding::Table& table);

  const Shape& shape() const { return shape_; }
  ByteMatrixView view() const;
  uint64_t bytes() const { return bytes_.size(); }

 private:
  explicit Database(const Shape& shape);
  void Place(uint64_t row, const uint8_t* record);

  Shape shape_;
  uint64_t stride_ = 0;
  he::HugePageVector<int8_t> bytes_;  // on huge pages where the kernel allows (huge_pages.h)
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_SHAPE_H_
