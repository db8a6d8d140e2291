// The GPU expansion (gpu/expansion.h) on a device against pir/lattice's ExpandLweSecret: every
// leaf, bit for bit, at n = 1,024 on the default ring and at an awkward n; its timing. Skips
// without a GPU.
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/backend.h"
#include "gpu/expansion.h"
#include "gtest/gtest.h"
#include "pir/lattice/lwe.h"
#include "tests/gpu/expansion_test_support.h"

namespace veil::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

TEST(ExpansionGpu, EqualsTheCpu) {
  SKIP_WITHOUT_GPU();
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  for (uint32_t lwe_n : {lattice::kLweDimension, 300u}) {
    const testing::Session session(ctx, lwe_n);
    std::vector<uint32_t> secret(lwe_n);
    std::mt19937_64 gen(lwe_n);
    for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
    const std::vector<uint8_t> ct = *lattice::EncryptLweSecret(ctx, session.z, secret);
    auto gpu = GpuExpansion::Create(ctx, session.keys, lwe_n);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    absl::StatusOr<ExpandedKeys> got = (*gpu)->Expand(ct);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->leaves == testing::CpuLeaves(ctx, session.keys, lwe_n, ct)) << "n " << lwe_n;
    absl::StatusOr<double> s = (*gpu)->MeasureExpand(ct, 3);
    ASSERT_TRUE(s.ok()) << s.status();
    std::printf("GPU expansion, n = %u: %.3f ms\n", lwe_n, *s * 1e3);
  }
}

}  // namespace
}  // namespace veil::gpu
