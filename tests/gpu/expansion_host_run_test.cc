// The GPU expansion's phases run on the host (gpu/expansion.h's HostRunExpansion) against
// pir/lattice's ExpandLweSecret: every leaf K_j, both halves, bit for bit, on the default ring
// (awkward n: the tree's last level partly empty) and on the N = 1,024 test ring; bad input.
#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gpu/expansion.h"
#include "gtest/gtest.h"
#include "pir/he/sampling.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/lwe.h"
#include "tests/gpu/expansion_test_support.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::gpu {
namespace {

using ::testing::HasSubstr;

void ExpectHostRunEqualsCpu(const lattice::RingContext& ctx, uint32_t lwe_n) {
  const testing::Session session(ctx, lwe_n);
  std::vector<uint32_t> secret(lwe_n);
  std::mt19937_64 gen(lwe_n);
  for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
  const std::vector<uint8_t> ct = *lattice::EncryptLweSecret(ctx, session.z, secret);
  absl::StatusOr<ExpandedKeys> got = HostRunExpansion(ctx, session.keys, lwe_n, ct);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->lwe_n, lwe_n);
  const std::vector<uint64_t> want = testing::CpuLeaves(ctx, session.keys, lwe_n, ct);
  ASSERT_EQ(got->leaves.size(), want.size());
  const size_t leaf = 2 * ctx.k() * ctx.n();
  for (uint32_t j = 0; j < lwe_n; ++j) {
    ASSERT_TRUE(std::equal(want.begin() + j * leaf, want.begin() + (j + 1) * leaf,
                           got->leaves.begin() + j * leaf))
        << "leaf " << j << " of " << lwe_n;
  }
}

TEST(ExpansionHostRun, EqualsTheCpuOnTheDefaultRing) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  for (uint32_t lwe_n : {1u, 2u, 21u}) ExpectHostRunEqualsCpu(ctx, lwe_n);
}

TEST(ExpansionHostRun, EqualsTheCpuOnASmallRing) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  ExpectHostRunEqualsCpu(ctx, 100);
}

TEST(ExpansionHostRun, RefusesBadInput) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  const testing::Session session(ctx, 4);
  std::vector<uint8_t> ct(lattice::SecretCiphertextBytes(ctx), 0);
  EXPECT_TRUE(HostRunExpansion(ctx, session.keys, 4, ct).ok());
  EXPECT_THAT(HostRunExpansion(ctx, session.keys, 8, ct).status().message(),
              HasSubstr("lack the Galois key"));
  ct.pop_back();
  EXPECT_THAT(HostRunExpansion(ctx, session.keys, 4, ct).status().message(),
              HasSubstr("bytes, got"));
  ct.push_back(0);
  std::fill(ct.begin() + 32, ct.begin() + 36, 0xff);
  EXPECT_THAT(HostRunExpansion(ctx, session.keys, 4, ct).status().message(),
              HasSubstr("not below its prime"));
}

}  // namespace
}  // namespace veil::gpu
