// The server's one heavy operation: a matrix of database bytes (Z_256 elements, signed int8) times
// a batch of Z_{2^32} vectors, mod 2^32. Five kernels, bit for bit equal (tests/pir/lattice
// compares them), each in two loop forms:
//   reference     the definition, plain C++ (every CPU);
//   int32-rows    AVX-512F: 16 bytes of a row sign-extended to 32-bit lanes (vpmovsxbd) times 16
//                 query words (vpmulld, vpaddd), four rows sharing each query load; lanes hold
//                 columns, summed at the end of a row. For small batches (the mat-vec).
//   int32-lanes   AVX-512F: lanes hold 16 queries (the query vectors transposed), each database
//                 byte broadcast (vpmulld with a {1to16} memory operand) to 12 rows x 32 queries
//                 of register accumulators. For large batches (the GEMM).
//                 On a CPU with AVX2 but no AVX-512 (kernels_avx2.cc) both forms multiply in
//                 16-bit halves (vpmaddwd: each query word y = h 2^16 + l with l, h signed 16-bit,
//                 x y = x l + 2^16 x h mod 2^32): the rows form 16 bytes of 4 rows sign-extended
//                 to 16 bits times 16 query words; the lanes form a row's pair of bytes broadcast
//                 against 16 or 32 queries' halves of those two columns. Such a server computes
//                 neither its answers nor its hint with the reference.
//   planes-rows   AVX-512 VNNI (VIPIR's byte planes): each query word is four base-256 digits,
//   planes-lanes  y = sum_p 2^(8p) byte_p(y), and the product is sum_p 2^(8p) (DB . plane_p): four
//                 u8 x s8 products, vpdpbusd doing 64 byte multiply-adds (query digits unsigned,
//                 database bytes signed: exactly vpdpbusd's operand types). Rows and lanes forms
//                 as above.
// Accumulators wrap mod 2^32, which is all the answer needs (2^(8p) times a wrapped sum is still
// right mod 2^32). Which kernel serves which batch size is measured (FastestKernelForBatch).
#ifndef VEIL_PIR_LATTICE_KERNELS_H_
#define VEIL_PIR_LATTICE_KERNELS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::lattice {

// Rows of a byte matrix are padded to this many bytes (one AVX-512 vector).
inline constexpr uint64_t kRowAlign = 64;

inline uint64_t AlignedStride(uint64_t cols) {
  return (cols + kRowAlign - 1) / kRowAlign * kRowAlign;
}

// A rows x cols matrix of Z_256 elements as signed bytes (the element in [-128, 127]), rows
// `stride` bytes apart. Kernels read AlignedStride(cols) bytes of each row (whole vectors): the
// bytes between cols and AlignedStride(cols) must be 0 and stride at least that. A view of the
// columns [c0, c0 + 64j) of a matrix is such a view. Not owned.
struct ByteMatrixView {
  const int8_t* data = nullptr;
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t stride = 0;
  const int8_t* row(uint64_t r) const { return data + r * stride; }
};

enum class ProductKernel : uint8_t {
  kReference = 0,
  kInt32Rows = 1,
  kInt32Lanes = 2,
  kPlanesRows = 3,
  kPlanesLanes = 4,
};

// "reference", "int32-rows", "int32-lanes", "planes-rows", "planes-lanes".
std::string_view ProductKernelName(ProductKernel kernel);
absl::StatusOr<ProductKernel> ParseProductKernel(std::string_view name);

// The kernels this CPU runs (reference first).
std::vector<ProductKernel> AvailableProductKernels();

// out[b * out_stride + r] = sum_{c < cols} db[r][c] * queries[b * cols + c] (mod 2^32) for
// every row r and query b < batch, on `threads` threads (rows split between them).
// Returns INVALID_ARGUMENT if queries.size() != batch * cols, out_stride < rows, out is too
// small, batch or threads < 1, or the matrix is empty or its stride below AlignedStride(cols);
// FAILED_PRECONDITION if this CPU cannot run `kernel`.
absl::Status MultiplyBytes(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                           absl::Span<uint32_t> out, uint64_t out_stride, int threads,
                           ProductKernel kernel);

// As above with the kernel this CPU runs fastest at this batch size, measured once per
// power-of-two batch bucket on a small synthetic matrix (the first call of a bucket pays a few
// milliseconds).
absl::Status MultiplyBytes(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                           absl::Span<uint32_t> out, uint64_t out_stride, int threads);

// out[k * out_stride + r] = sum_{c < cols} db[r][c] * a[c * n + k] (mod 2^32) for every row r
// and k < n: the matrix times the n columns of a row-major matrix (the hint's product with A).
// A row-major matrix is already the lanes kernels' query layout, so nothing is transposed. `a`
// holds AlignedStride(cols) rows of n words, those past cols zero; n is a multiple of 32.
// Returns INVALID_ARGUMENT for other sizes or a malformed matrix.
absl::Status MultiplyBytesByMatrix(const ByteMatrixView& db, absl::Span<const uint32_t> a,
                                   uint64_t n, absl::Span<uint32_t> out, uint64_t out_stride,
                                   int threads);

// out[j * out_stride + r] = sum_{k < n} rows[r * n + k] * vectors[j * n + k] (mod 2^32) for
// r < count and j < nvectors: the client's products of A and of the hint with its secrets.
// AVX-512 (vpmulld) where the CPU has it, else AVX2, else plain C++; the same bits either way.
void MultiplyWords(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                   uint64_t nvectors, uint32_t* out, uint64_t out_stride);

// The kernel MultiplyBytes picks for `batch` (measuring it if not yet known).
ProductKernel FastestKernelForBatch(int batch);

namespace internal {

// Words of a column pair's block in the AVX2 lanes form's layout (below): 2 halves x 32 queries x
// 2 columns of 16 bits.
inline constexpr uint64_t kSplitLanesPairWords = 64;

// Queries in the layout of one kernel (kernels.cc prepares them; zero beyond cols and batch), with
// width = AlignedStride(cols) and lanes = batch rounded up to a multiple of 16:
//   rows forms:   words[b * width + c] (int32), planes[(4 * b + p) * width + c] = byte p of word c;
//                 the AVX2 int32 form's words split: the 64 bytes of words [c16, c16 + 16) of
//                 query b (c16 a multiple of 16) hold the 16 words' l, then their h, as 16-bit
//                 numbers (y = h 2^16 + l, l the signed low half of y)
//   AVX2 int32-lanes: for each group of 32 queries and pair of columns (c, c + 1), c even, a
//                 block of kSplitLanesPairWords words (col_stride; group_stride = 32 width): the
//                 16-bit l of query b's two words at 16-bit index (b % 32 / 8) 16 + (b % 8) 2 +
//                 c % 2 (four vectors), then their h the same way (four more)
//   int32-lanes:  word c of query b at words[(b / 32) * group_stride + c * col_stride + b % 32]
//                 (prepared: group_stride = 32 * width, col_stride = 32, so that a group of 32
//                 queries is contiguous; MultiplyBytesByMatrix: A's rows as they are)
//   planes-lanes: byte p of word c of query b at
//                 planes[(((b / 32) * 4 + p) * (width / 4) + c / 4) * 128 + (b % 32) * 4 + c % 4]
struct PreparedQueries {
  int batch = 0;
  uint64_t lanes = 0;
  uint64_t group_stride = 0;
  uint64_t col_stride = 0;
  const uint32_t* words = nullptr;
  const uint8_t* planes = nullptr;
};

// out[b * out_stride + r] for r in [row_begin, row_end) and every query b.
using RowRangeKernel = void (*)(const ByteMatrixView& db, const PreparedQueries& q,
                                uint64_t row_begin, uint64_t row_end, uint32_t* out,
                                uint64_t out_stride);
void Int32Rows(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
               uint64_t);
void Int32Lanes(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
                uint64_t);
void PlanesRows(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
                uint64_t);
void PlanesLanes(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
                 uint64_t);
// The int32 forms on CPUs with AVX2 but no AVX-512 (kernels_avx2.cc): the same prepared queries
// and bits.
void Int32RowsAvx2(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
                   uint64_t);
void Int32LanesAvx2(const ByteMatrixView&, const PreparedQueries&, uint64_t, uint64_t, uint32_t*,
                    uint64_t);
// Whether this CPU (and its OS) runs AVX-512 F + BW: the AVX-512 forms, MultiplyWordsAvx512
// and the roofline's AVX-512 micro-kernels.
bool CpuHasAvx512();
// Tests: the int32 forms and MultiplyWords in their AVX2 version on a CPU with AVX-512 and AVX2,
// so that both versions are checked there (no effect on a CPU without AVX2).
void UseAvx2Int32ForTesting(bool avx2);
// MultiplyWords on AVX-512, n a multiple of 16; on AVX2, n a multiple of 8.
void MultiplyWordsAvx2(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                       uint64_t nvectors, uint32_t* out, uint64_t out_stride);
void MultiplyWordsAvx512(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                         uint64_t nvectors, uint32_t* out, uint64_t out_stride);

}  // namespace internal
}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_KERNELS_H_
