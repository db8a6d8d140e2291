// The GPU expansion's phases run on the host (gpu/expansion.h's HostRunExpansion) against
// pir/lattice's ExpandLweSecret: every leaf K_j, both halves, bit for bit, on the default ring
// (awkward n: the tree's last level partly empty) and on the N = 1,024 test ring; several
// queries side by side; bad input.
#include <cstdint>
#include <memory>
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

// Several queries of different sessions expanded side by side (HostRunExpansionBatch, as the
// device's ExpandBatchThen): each one's leaves as ExpandLweSecret's for it alone; a query whose
// ciphertext does not parse or whose key arrays are of another plan fails alone.
TEST(ExpansionHostRun, ABatchExpandsEachQueryAsAlone) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const uint32_t lwe_n = 21;
  const internal::ExpansionPlan plan = *internal::MakeExpansionPlan(ctx, lwe_n);
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_expansion_host_run_test"));
  std::vector<std::unique_ptr<testing::Session>> sessions;
  std::vector<internal::ExpansionKeyArrays> arrays;
  for (int s = 0; s < 3; ++s) {
    sessions.push_back(std::make_unique<testing::Session>(ctx, lwe_n));
    arrays.push_back(*internal::MakeExpansionKeyArrays(ctx, sessions.back()->keys, lwe_n));
  }
  const internal::ExpansionKeyArrays small =
      *internal::MakeExpansionKeyArrays(ctx, testing::Session(ctx, 4).keys, 4);
  // Five queries: query 1's ciphertext truncated, query 3's key arrays of another plan.
  const size_t count = 5;
  std::vector<std::vector<uint8_t>> cts;
  std::vector<absl::Span<const uint8_t>> ct_spans;
  std::vector<const internal::ExpansionKeyArrays*> keys;
  for (size_t q = 0; q < count; ++q) {
    std::vector<uint32_t> secret(lwe_n);
    for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
    cts.push_back(*lattice::EncryptLweSecret(ctx, sessions[q % 3]->z, secret));
    keys.push_back(&arrays[q % 3]);
  }
  for (const std::vector<uint8_t>& ct : cts) ct_spans.emplace_back(ct);
  ct_spans[1] = ct_spans[1].first(ct_spans[1].size() - 1);
  keys[3] = &small;
  const std::vector<absl::StatusOr<ExpandedKeys>> got =
      internal::HostRunExpansionBatch(ctx, plan, keys, ct_spans);
  ASSERT_EQ(got.size(), count);
  EXPECT_THAT(got[1].status().message(), HasSubstr("bytes, got"));
  EXPECT_THAT(got[3].status().message(), HasSubstr("of another plan"));
  for (size_t q : {0, 2, 4}) {
    ASSERT_TRUE(got[q].ok()) << "query " << q << ": " << got[q].status();
    EXPECT_TRUE(got[q]->leaves == testing::CpuLeaves(ctx, sessions[q % 3]->keys, lwe_n, cts[q]))
        << "query " << q;
  }
  // No query, too many, or spans that disagree: every query fails.
  EXPECT_TRUE(internal::HostRunExpansionBatch(ctx, plan, {}, {}).empty());
  const std::vector<const internal::ExpansionKeyArrays*> nine(internal::kExpansionMaxQueries + 1,
                                                              &arrays[0]);
  const std::vector<absl::Span<const uint8_t>> nine_cts(nine.size(), ct_spans[0]);
  for (const auto& r : internal::HostRunExpansionBatch(ctx, plan, nine, nine_cts)) {
    EXPECT_THAT(r.status().message(), HasSubstr("1 to 8 of each"));
  }
  for (const auto& r :
       internal::HostRunExpansionBatch(ctx, plan, keys, absl::MakeSpan(ct_spans).first(2))) {
    EXPECT_THAT(r.status().message(), HasSubstr("an expansion batch of 5 key arrays and 2"));
  }
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
