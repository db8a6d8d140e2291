// The LWE GPU kernels' phases run on the host (CI, no GPU needed) against pir/lattice's reference
// product, bit for bit: both methods, every pass shape (1 .. 16 queries on the CUDA cores, 4 ..
// 32 and several passes on the tensor cores), row tiles and column chunks cut mid-way.
#include <random>
#include <vector>

#include "gpu/lwe.h"
#include "gtest/gtest.h"
#include "pir/lattice/kernels.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::gpu {
namespace {

using Matrix = lattice::testing::RandomByteMatrix;

TEST(LweHostRunTest, BothMethodsEqualTheReferenceProduct) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_lwe_host_run_test"));
  struct Case {
    uint64_t rows, cols;
    int batch;
    LweGpuMethod method;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, LweGpuMethod::kCudaCores},       {33, 17, 1, LweGpuMethod::kCudaCores},
      {17, 1025, 2, LweGpuMethod::kCudaCores},   {70, 2100, 3, LweGpuMethod::kCudaCores},
      {9, 600, 16, LweGpuMethod::kCudaCores},    {5, 100, 19, LweGpuMethod::kCudaCores},
      {1, 1, 1, LweGpuMethod::kTensorCores},     {65, 300, 2, LweGpuMethod::kTensorCores},
      {30, 1100, 9, LweGpuMethod::kTensorCores}, {3, 64, 32, LweGpuMethod::kTensorCores},
      {66, 70, 35, LweGpuMethod::kTensorCores},  {20, 50, 1, LweGpuMethod::kAuto},
      {20, 50, 3, LweGpuMethod::kAuto}};
  for (const Case& c : cases) {
    const Matrix m(c.rows, c.cols, gen);
    std::vector<uint32_t> q(c.batch * c.cols);
    for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
    if (q.size() > 1) q[1] = 0x80808080u;  // digits at the signed boundary
    std::vector<uint32_t> expected(c.batch * c.rows), got(c.batch * c.rows, 7);
    ASSERT_TRUE(lattice::MultiplyBytes(m.view, q, c.batch, absl::MakeSpan(expected), c.rows, 1,
                                       lattice::ProductKernel::kReference)
                    .ok());
    ASSERT_TRUE(LweHostRunMultiply(m.view, q, c.batch, c.method, absl::MakeSpan(got)).ok());
    EXPECT_EQ(got, expected) << LweGpuMethodName(c.method) << " " << c.rows << " x " << c.cols
                             << ", batch " << c.batch;
  }
}

TEST(LweHostRunTest, BadCallsAreRejected) {
  std::mt19937_64 gen(1);
  const Matrix m(4, 10, gen);
  std::vector<uint32_t> q(10), out(4);
  EXPECT_EQ(LweHostRunMultiply(m.view, absl::MakeConstSpan(q).first(9), 1, LweGpuMethod::kCudaCores,
                               absl::MakeSpan(out))
                .message(),
            "a batch of 1 needs 1 x 10 query words and 1 x 4 answer words, got 9 and 4");
  lattice::ByteMatrixView odd = m.view;
  odd.stride = 48;
  EXPECT_EQ(LweHostRunMultiply(odd, q, 1, LweGpuMethod::kCudaCores, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLweGpuMethod("tensor-cores").value(), LweGpuMethod::kTensorCores);
  EXPECT_EQ(ParseLweGpuMethod("tpu").status().message(),
            "unknown GPU method 'tpu' (auto, cuda-cores or tensor-cores)");
}

}  // namespace
}  // namespace veil::gpu
