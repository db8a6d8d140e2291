// The byte-matrix product: every kernel this CPU runs equals the reference bit for bit, on random
// matrices of awkward shapes and batches (the seed is printed), and bad arguments give clear
// errors.
#include "pir/lattice/kernels.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/lattice/roofline.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using Matrix = testing::RandomByteMatrix;

// The definition, written independently of kernels.cc: signed bytes times words, mod 2^32.
uint32_t Expected(const ByteMatrixView& m, const std::vector<uint32_t>& q, int b, uint64_t r) {
  uint32_t sum = 0;
  for (uint64_t c = 0; c < m.cols; ++c) {
    const int8_t value = m.row(r)[c];
    sum += static_cast<uint32_t>(static_cast<int32_t>(value)) * q[b * m.cols + c];
  }
  return sum;
}

// The versions of the int32 forms this CPU runs: its own, and where it has AVX-512 the AVX2 one
// too (internal::UseAvx2Int32ForTesting). Restores the CPU's own at scope exit.
class Int32Versions {
 public:
  ~Int32Versions() { internal::UseAvx2Int32ForTesting(false); }
  std::vector<bool> avx2_forced() const {
    return internal::CpuHasAvx512() && __builtin_cpu_supports("avx2")
               ? std::vector<bool>{false, true}
               : std::vector<bool>{false};
  }
};

TEST(ProductKernelTest, EveryKernelEqualsTheDefinition) {
  std::mt19937_64 gen(testing::TestSeed("lattice_kernels_test"));
  const Int32Versions versions;
  struct Case {
    uint64_t rows, cols;
    int batch;
  };
  // Edge sizes (1, 2, 15, 16, 17, non-powers of 2, a partial column chunk) and a random one.
  std::vector<Case> cases = {
      {1, 1, 1},       {2, 1, 3},
      {1, 2, 1},       {17, 15, 2},
      {5, 16, 32},     {3, 17, 5},
      {4, 64, 1},      {7, 65, 4},
      {9, 2048, 3},    {6, 2049, 2},
      {33, 4100, 1},   {13, 127, 33},
      {100, 1500, 35}, {1 + gen() % 40, 1 + gen() % 3000, 1 + static_cast<int>(gen() % 40)}};
  for (const Case& c : cases) {
    const Matrix m(c.rows, c.cols, gen);
    std::vector<uint32_t> q(c.batch * c.cols);
    for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
    // Extreme words too: the digit split must carry correctly through 0x80 and 0xff bytes.
    if (!q.empty()) q[0] = 0xffffffffu;
    if (q.size() > 1) q[1] = 0x80808080u;
    // And the AVX2 rows form's 16-bit halves at their signed limits (a low half of 2^15 and of
    // 2^15 - 1: the high half then carries one or not).
    if (q.size() > 2) q[2] = 0x00008000u;
    if (q.size() > 3) q[3] = 0x7fff7fffu;
    if (q.size() > 4) q[4] = 0xffff8000u;
    for (ProductKernel kernel : AvailableProductKernels()) {
      for (bool avx2 : versions.avx2_forced()) {
        internal::UseAvx2Int32ForTesting(avx2);
        for (int threads : {1, 3}) {
          const uint64_t out_stride = c.rows + 5;
          std::vector<uint32_t> out(c.batch * out_stride, 0xdeadbeef);
          ASSERT_TRUE(
              MultiplyBytes(m.view, q, c.batch, absl::MakeSpan(out), out_stride, threads, kernel)
                  .ok());
          for (int b = 0; b < c.batch; ++b) {
            for (uint64_t r = 0; r < c.rows; ++r) {
              ASSERT_EQ(out[b * out_stride + r], Expected(m.view, q, b, r))
                  << ProductKernelName(kernel) << " rows " << c.rows << " cols " << c.cols
                  << " batch " << c.batch << " threads " << threads << " avx2 forced " << avx2
                  << " at (" << b << ", " << r << ")";
            }
            // The gap between answers is not written.
            for (uint64_t r = c.rows; r < out_stride && b + 1 < c.batch; ++r) {
              ASSERT_EQ(out[b * out_stride + r], 0xdeadbeefu);
            }
          }
        }
      }
    }
  }
}

// A view of columns [64, 64 + 150) of a wider matrix (its stride the parent's): what the hint
// computation multiplies chunk by chunk.
TEST(ProductKernelTest, ColumnSliceViewsMultiplyOnlyTheirColumns) {
  std::mt19937_64 gen(testing::TestSeed("lattice_kernels_test"));
  const Matrix parent(21, 214, gen);
  const ByteMatrixView slice{parent.view.data + 64, 21, 150, parent.view.stride};
  const int batch = 20;
  std::vector<uint32_t> q(batch * 150);
  for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
  for (ProductKernel kernel : AvailableProductKernels()) {
    std::vector<uint32_t> out(batch * 21);
    ASSERT_TRUE(MultiplyBytes(slice, q, batch, absl::MakeSpan(out), 21, 2, kernel).ok());
    for (int b = 0; b < batch; ++b) {
      for (uint64_t r = 0; r < 21; ++r) {
        ASSERT_EQ(out[b * 21 + r], Expected(slice, q, b, r)) << ProductKernelName(kernel);
      }
    }
  }
}

// The hint's product (db times the n columns of a row-major matrix), in every version of the
// int32 lanes form this CPU runs, against the definition, on awkward shapes and column slices.
TEST(ProductKernelTest, ByMatrixEqualsTheDefinition) {
  std::mt19937_64 gen(testing::TestSeed("lattice_kernels_test"));
  const Int32Versions versions;
  struct Case {
    uint64_t rows, cols, n;
  };
  for (const Case& c : {Case{1, 1, 32}, Case{5, 63, 32}, Case{49, 65, 64}, Case{30, 1030, 96},
                        Case{7, 2100, 1280}, Case{4100, 65, 32}}) {
    const Matrix m(c.rows, c.cols, gen);
    const uint64_t width = AlignedStride(c.cols);
    std::vector<uint32_t> a(width * c.n, 0);
    for (uint64_t i = 0; i < c.cols * c.n; ++i) a[i] = static_cast<uint32_t>(gen());
    a[0] = 0xffffffffu;
    // The AVX2 lanes form's 16-bit halves at their signed limits, in both columns of a pair.
    a[1] = 0x00008000u;
    if (c.cols > 1) {
      a[c.n] = 0xffff8000u;
      a[c.n + 1] = 0x7fff7fffu;
    }
    for (bool avx2 : versions.avx2_forced()) {
      internal::UseAvx2Int32ForTesting(avx2);
      for (int threads : {1, 2}) {
        const uint64_t out_stride = c.rows + 3;
        std::vector<uint32_t> out(c.n * out_stride, 0xdeadbeef);
        ASSERT_TRUE(
            MultiplyBytesByMatrix(m.view, a, c.n, absl::MakeSpan(out), out_stride, threads).ok());
        for (uint64_t k = 0; k < c.n; ++k) {
          for (uint64_t r = 0; r < c.rows; ++r) {
            uint32_t expected = 0;
            for (uint64_t col = 0; col < c.cols; ++col) {
              expected += static_cast<uint32_t>(static_cast<int32_t>(m.view.row(r)[col])) *
                          a[col * c.n + k];
            }
            ASSERT_EQ(out[k * out_stride + r], expected)
                << "rows " << c.rows << " cols " << c.cols << " n " << c.n << " threads " << threads
                << " avx2 forced " << avx2 << " at (" << k << ", " << r << ")";
          }
        }
      }
    }
  }
  std::vector<uint32_t> out(32);
  const Matrix m(1, 10, gen);
  EXPECT_EQ(
      MultiplyBytesByMatrix(m.view, std::vector<uint32_t>(64 * 31), 31, absl::MakeSpan(out), 1, 1)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// The client's products (MultiplyWords), in every version this CPU runs and on widths that take
// the vector paths or not (multiples of 16 and 8, and neither), against the definition.
TEST(ProductKernelTest, MultiplyWordsEqualsTheDefinition) {
  std::mt19937_64 gen(testing::TestSeed("lattice_kernels_test"));
  const Int32Versions versions;
  for (uint64_t n : {uint64_t{1}, uint64_t{8}, uint64_t{24}, uint64_t{40}, uint64_t{1280}}) {
    const uint64_t count = 5, nvectors = 3, out_stride = count + 2;
    std::vector<uint32_t> rows(count * n), vectors(nvectors * n);
    for (uint32_t& w : rows) w = static_cast<uint32_t>(gen());
    for (uint32_t& w : vectors) w = static_cast<uint32_t>(gen());
    rows[0] = vectors[0] = 0xffffffffu;
    for (bool avx2 : versions.avx2_forced()) {
      internal::UseAvx2Int32ForTesting(avx2);
      std::vector<uint32_t> out(nvectors * out_stride, 0xdeadbeef);
      MultiplyWords(rows.data(), count, n, vectors.data(), nvectors, out.data(), out_stride);
      for (uint64_t j = 0; j < nvectors; ++j) {
        for (uint64_t r = 0; r < count; ++r) {
          uint32_t expected = 0;
          for (uint64_t k = 0; k < n; ++k) expected += rows[r * n + k] * vectors[j * n + k];
          ASSERT_EQ(out[j * out_stride + r], expected)
              << "n " << n << " avx2 forced " << avx2 << " at (" << j << ", " << r << ")";
        }
        for (uint64_t r = count; r < out_stride; ++r)
          ASSERT_EQ(out[j * out_stride + r], 0xdeadbeefu);
      }
    }
  }
}

// The roofline's bandwidth reads (roofline.h) return the XOR of every 64-bit word they read, on
// sizes with and without whole groups of the AVX2 read's four 64 KiB segments, so that a read that
// skipped or repeated bytes would show.
TEST(ProductKernelTest, BandwidthReadsReadEveryWord) {
  std::mt19937_64 gen(testing::TestSeed("lattice_kernels_test"));
  for (uint64_t bytes :
       {uint64_t{256}, uint64_t{4} << 16, (uint64_t{4} << 16) + 768, (uint64_t{9} << 16) + 256}) {
    std::vector<uint64_t> words(bytes / 8);
    uint64_t expected = 0;
    for (uint64_t& w : words) expected ^= (w = gen());
    const auto* data = reinterpret_cast<const uint8_t*>(words.data());
    if (__builtin_cpu_supports("avx2"))
      EXPECT_EQ(internal::ReadAvx2(data, bytes), expected) << bytes;
    if (internal::CpuHasAvx512()) EXPECT_EQ(internal::ReadAvx512(data, bytes), expected) << bytes;
    // One word changed changes the result: every word is read.
    words[words.size() / 2 + 3] ^= 1;
    if (__builtin_cpu_supports("avx2")) EXPECT_EQ(internal::ReadAvx2(data, bytes), expected ^ 1);
  }
}

TEST(ProductKernelTest, AutomaticChoiceIsAnAvailableKernel) {
  const std::vector<ProductKernel> available = AvailableProductKernels();
  for (int batch : {1, 3, 32}) {
    const ProductKernel k = FastestKernelForBatch(batch);
    EXPECT_NE(std::find(available.begin(), available.end(), k), available.end());
  }
}

TEST(ProductKernelTest, BadArgumentsAreRejected) {
  std::mt19937_64 gen(1);
  const Matrix m(4, 10, gen);
  std::vector<uint32_t> q(2 * 10), out(2 * 4);
  auto run = [&](const ByteMatrixView& v, size_t q_words, int batch, size_t out_words,
                 uint64_t stride) {
    std::vector<uint32_t> qq(q_words), oo(out_words);
    return MultiplyBytes(v, qq, batch, absl::MakeSpan(oo), stride, 1, ProductKernel::kReference);
  };
  EXPECT_EQ(run(m.view, 19, 2, 8, 4).message(), "queries hold 19 words, expected 2 x 10");
  EXPECT_EQ(run(m.view, 20, 2, 7, 4).message(),
            "out holds 7 words with stride 4, expected 2 answers of 4 words");
  EXPECT_EQ(run(m.view, 20, 2, 8, 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(m.view, 0, 0, 8, 4).message(), "batch and threads must be at least 1");
  ByteMatrixView bad = m.view;
  bad.stride = 48;
  EXPECT_EQ(run(bad, 20, 2, 8, 4).message(), "the byte matrix's stride 48 is below 64");
  bad = m.view;
  bad.rows = 0;
  EXPECT_EQ(run(bad, 20, 2, 8, 4).message(), "the byte matrix is empty");
  EXPECT_EQ(ParseProductKernel("avx").status().message(),
            "unknown product kernel 'avx' (reference, int32-rows, int32-lanes, planes-rows or "
            "planes-lanes)");
}

}  // namespace
}  // namespace veil::lattice
