// The GPU packing sums (gpu/packing.h) on a device against the host run of the same phases, bit
// for bit (the host run equals PackAccumulator: packing_host_run_test.cc), and the switch to q'
// against lattice::SwitchResponse. Skips without a GPU.
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/backend.h"
#include "gpu/packing.h"
#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "tests/gpu/packing_test_support.h"

namespace veil::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

void ExpectDeviceEqualsHostRun(const lattice::RingContext& ctx, uint64_t rows, uint32_t lwe_n,
                               uint64_t seed) {
  std::mt19937_64 gen(seed);
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, rows, lwe_n, gen);
  auto gpu = GpuPackingSums::Create(ctx, matrix);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->matrix_bytes(), matrix.bytes());
  std::vector<uint64_t> expected(lattice::PackingSumWords(ctx, matrix), 0), got = expected;
  // Two calls: the first keys, then the rest, each added to the sums so far.
  for (const auto& [from, to] : {std::pair<uint32_t, uint32_t>{0, lwe_n / 3}, {lwe_n / 3, lwe_n}}) {
    std::vector<uint32_t> index;
    for (uint32_t j = from; j < to; ++j) index.push_back(j);
    const std::vector<uint64_t> beta = testing::RandomKeyHalves(ctx, to - from, gen);
    const std::vector<uint64_t> alpha = testing::RandomKeyHalves(ctx, to - from, gen);
    ASSERT_TRUE(HostRunPackingSums(ctx, matrix, index, beta, alpha, absl::MakeSpan(expected)).ok());
    const absl::Status s = (*gpu)->Accumulate(index, beta, alpha, absl::MakeSpan(got));
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(got, expected);
  absl::StatusOr<double> pass = (*gpu)->MeasurePass(3);
  ASSERT_TRUE(pass.ok()) << pass.status();
  EXPECT_GT(*pass, 0);
}

TEST(PackingGpu, EqualsTheHostRun) {
  SKIP_WITHOUT_GPU();
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  ExpectDeviceEqualsHostRun(ctx, 2 * ctx.n() + 9, 1024, 1);
  const lattice::RingContext wide = *lattice::RingContext::Create(
      *lattice::RingParams::Create(10, *he::GenerateNttPrimes(32, 2048, 2)));
  ExpectDeviceEqualsHostRun(wide, 3 * wide.n(), 300, 2);
}

TEST(PackingGpu, RefusesBadInput) {
  SKIP_WITHOUT_GPU();
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  std::mt19937_64 gen(3);
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 100, 8, gen);
  auto gpu = GpuPackingSums::Create(ctx, matrix);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix), 0);
  const std::vector<uint64_t> beta = testing::RandomKeyHalves(ctx, 1, gen);
  EXPECT_EQ((*gpu)->Accumulate({8}, beta, beta, absl::MakeSpan(sums)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SwitchGpu, EqualsSwitchResponse) {
  SKIP_WITHOUT_GPU();
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  std::mt19937_64 gen(5);
  std::vector<lattice::RlweCiphertext> packed(6);
  for (lattice::RlweCiphertext& ct : packed) {
    ct.c0 = testing::RandomKeyHalves(ctx, 1, gen);
    ct.c1 = testing::RandomKeyHalves(ctx, 1, gen);
  }
  auto gpu = GpuResponseSwitch::Create(ctx);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> got = (*gpu)->Switch(packed);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<lattice::SwitchedCiphertext> want = lattice::SwitchResponse(ctx, packed);
  ASSERT_EQ(got->size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_EQ((*got)[t].c0, want[t].c0);
    EXPECT_EQ((*got)[t].c1, want[t].c1);
  }
  absl::StatusOr<double> s = (*gpu)->MeasureSwitch(6, 3);
  ASSERT_TRUE(s.ok()) << s.status();
}

}  // namespace
}  // namespace veil::gpu
