// The GPU expansion (gpu/expansion.h) on a device against pir/lattice's ExpandLweSecret: every
// leaf, bit for bit, at n = 1,024 on the default ring and at an awkward n, and a batch of queries
// side by side; its timing. Skips without a GPU.
#include <cuda_runtime_api.h>

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

// Eight queries of two sessions side by side (ExpandBatchThen), one with a truncated ciphertext:
// each good query's leaves as the CPU's for it alone; the batch's time per query.
TEST(ExpansionGpu, ABatchExpandsEachQueryAsAlone) {
  SKIP_WITHOUT_GPU();
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  const uint32_t lwe_n = 64;  // the roots' tree at 2^24 x 64 B with four levels deferred
  const testing::Session one(ctx, lwe_n), two(ctx, lwe_n);
  auto gpu = GpuExpansion::Create(ctx, one.keys, lwe_n, 0, GpuExpansion::kMaxBatch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto one_keys = (*gpu)->UploadKeys(one.keys);
  auto two_keys = (*gpu)->UploadKeys(two.keys);
  ASSERT_TRUE(one_keys.ok() && two_keys.ok());
  std::mt19937_64 gen(9);
  std::vector<std::vector<uint8_t>> cts;
  std::vector<absl::Span<const uint8_t>> ct_spans;
  std::vector<const GpuExpansionKeys*> keys;
  for (uint32_t q = 0; q < GpuExpansion::kMaxBatch; ++q) {
    std::vector<uint32_t> secret(lwe_n);
    for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
    cts.push_back(*lattice::EncryptLweSecret(ctx, (q % 2 ? two : one).z, secret));
    keys.push_back(q % 2 ? two_keys->get() : one_keys->get());
  }
  for (const std::vector<uint8_t>& ct : cts) ct_spans.emplace_back(ct);
  ct_spans[5] = ct_spans[5].first(ct_spans[5].size() - 1);
  const size_t leaf_words = uint64_t{lwe_n} * 2 * ctx.k() * ctx.n();
  std::vector<std::vector<uint64_t>> got(keys.size());
  std::vector<size_t> done;
  const std::vector<absl::Status> status = (*gpu)->ExpandBatchThen(
      keys, ct_spans,
      [&](absl::Span<const size_t> expanded, absl::Span<const uint64_t* const> leaves) {
        done.assign(expanded.begin(), expanded.end());
        for (size_t i = 0; i < expanded.size(); ++i) {
          got[expanded[i]].resize(leaf_words);
          ASSERT_EQ(cudaMemcpy(got[expanded[i]].data(), leaves[i], leaf_words * 8,
                               cudaMemcpyDeviceToHost),
                    cudaSuccess);
        }
      });
  ASSERT_EQ(status.size(), keys.size());
  EXPECT_EQ(done, (std::vector<size_t>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_FALSE(status[5].ok());
  for (size_t q = 0; q < keys.size(); ++q) {
    if (q == 5) continue;
    ASSERT_TRUE(status[q].ok()) << status[q];
    EXPECT_TRUE(got[q] == testing::CpuLeaves(ctx, (q % 2 ? two : one).keys, lwe_n, cts[q]))
        << "query " << q;
  }
  absl::StatusOr<double> alone = (*gpu)->MeasureExpand(cts[0], 5);
  absl::StatusOr<double> batch = (*gpu)->MeasureExpand(cts[0], 5, GpuExpansion::kMaxBatch);
  ASSERT_TRUE(alone.ok() && batch.ok());
  std::printf("GPU expansion, n = %u: %.3f ms alone, %.3f ms a query in a batch of %u\n", lwe_n,
              *alone * 1e3, *batch * 1e3 / GpuExpansion::kMaxBatch, GpuExpansion::kMaxBatch);
}

}  // namespace
}  // namespace veil::gpu
