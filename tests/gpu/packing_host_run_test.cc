// The GPU packing kernel's phases run on the host (gpu/packing.h's HostRunPackingSums) against
// pir/lattice's PackAccumulator, bit for bit: the default ring, and 32-bit primes, whose products
// carry out of 64 bits in the kernel's lazy sums; keys in several calls and any order; bad input.
// Several queries' sums in one pass equal each query's alone. And the switch to q'
// (HostRunSwitchResponse) against lattice::SwitchResponse.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gpu/packing.h"
#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "tests/gpu/packing_test_support.h"

namespace veil::gpu {
namespace {

using ::testing::HasSubstr;

// The packed ciphertexts of PackAccumulator (keys added kPackKeysPerBlock at a time, in order)
// and of the host-run sums (the keys in `order`, split into two calls at `split`) for random
// b-parts: equal, group by group.
void ExpectHostRunPacksAsTheAccumulator(const lattice::RingContext& ctx, uint64_t rows,
                                        uint32_t lwe_n, uint32_t split, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, rows, lwe_n, gen);
  const std::vector<uint64_t> beta = testing::RandomKeyHalves(ctx, lwe_n, gen);
  const std::vector<uint64_t> alpha = testing::RandomKeyHalves(ctx, lwe_n, gen);
  std::vector<uint32_t> b(rows);
  for (uint32_t& w : b) w = static_cast<uint32_t>(gen());
  const size_t slots = ctx.k() * ctx.n();

  lattice::PackAccumulator acc(ctx, matrix);
  for (uint32_t j = 0; j < lwe_n; j += lattice::kPackKeysPerBlock) {
    const uint32_t count = std::min(lattice::kPackKeysPerBlock, lwe_n - j);
    std::vector<uint32_t> index(count);
    for (uint32_t i = 0; i < count; ++i) index[i] = j + i;
    acc.Add(count, index.data(), beta.data() + j * slots, alpha.data() + j * slots);
  }
  const std::vector<lattice::RlweCiphertext> expected = *acc.Finish(b);

  std::vector<uint32_t> order(lwe_n);
  for (uint32_t j = 0; j < lwe_n; ++j) order[j] = j;
  std::shuffle(order.begin(), order.end(), gen);
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix), 0);
  for (const auto& [from, to] : {std::pair<uint32_t, uint32_t>{0, split}, {split, lwe_n}}) {
    std::vector<uint32_t> index(order.begin() + from, order.begin() + to);
    std::vector<uint64_t> kb, ka;
    for (uint32_t j : index) {
      kb.insert(kb.end(), beta.begin() + j * slots, beta.begin() + (j + 1) * slots);
      ka.insert(ka.end(), alpha.begin() + j * slots, alpha.begin() + (j + 1) * slots);
    }
    ASSERT_TRUE(HostRunPackingSums(ctx, matrix, index, kb, ka, absl::MakeSpan(sums)).ok());
  }
  ASSERT_EQ(expected.size(), matrix.groups());
  for (uint64_t g = 0; g < matrix.groups(); ++g) {
    const uint64_t first = g * ctx.n(), count = std::min<uint64_t>(ctx.n(), rows - first);
    const lattice::RlweCiphertext got =
        lattice::PackedCiphertext(ctx, absl::MakeConstSpan(b).subspan(first, count),
                                  sums.data() + g * 2 * slots, sums.data() + (g * 2 + 1) * slots);
    EXPECT_EQ(got.c0, expected[g].c0) << "group " << g;
    EXPECT_EQ(got.c1, expected[g].c1) << "group " << g;
  }
}

TEST(PackingHostRun, EqualsTheAccumulatorOnTheDefaultRing) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  // Two groups (the second padded), 40 keys in calls of 25 and 15.
  ExpectHostRunPacksAsTheAccumulator(ctx, ctx.n() + 77, 40, 25, 1);
}

TEST(PackingHostRun, CarriesOutOf64BitsWithPrimesNear2To32) {
  // Products of residues below 2^32 overflow 64 bits after a few keys: the lazy sums must carry.
  const lattice::RingContext ctx = *lattice::RingContext::Create(
      *lattice::RingParams::Create(10, *he::GenerateNttPrimes(32, 2048, 2)));
  ASSERT_GT(ctx.base()[0].value(), uint64_t{1} << 31);
  ExpectHostRunPacksAsTheAccumulator(ctx, 3 * ctx.n() - 5, 300, 299, 2);
}

TEST(PackingHostRun, RefusesBadInput) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  std::mt19937_64 gen(3);
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 100, 8, gen);
  std::vector<uint64_t> beta = testing::RandomKeyHalves(ctx, 2, gen);
  const std::vector<uint64_t> alpha = testing::RandomKeyHalves(ctx, 2, gen);
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix), 0);
  const std::vector<uint32_t> index{1, 7};
  EXPECT_TRUE(HostRunPackingSums(ctx, matrix, index, beta, alpha, absl::MakeSpan(sums)).ok());
  const std::vector<uint32_t> past_n{1, 8};
  EXPECT_THAT(HostRunPackingSums(ctx, matrix, past_n, beta, alpha, absl::MakeSpan(sums)).message(),
              HasSubstr("not below n = 8"));
  EXPECT_THAT(HostRunPackingSums(ctx, matrix, {1}, beta, alpha, absl::MakeSpan(sums)).message(),
              HasSubstr("residues per half"));
  std::vector<uint64_t> short_sums(sums.size() - 1);
  EXPECT_THAT(
      HostRunPackingSums(ctx, matrix, index, beta, alpha, absl::MakeSpan(short_sums)).message(),
      HasSubstr("sums of"));
  beta[5] = ctx.base()[0].value();
  EXPECT_THAT(HostRunPackingSums(ctx, matrix, index, beta, alpha, absl::MakeSpan(sums)).message(),
              HasSubstr("key residue 5 is not below its prime"));
  const lattice::RingContext other = *lattice::RingContext::Create(
      *lattice::RingParams::Create(10, *he::GenerateNttPrimes(29, 2048, 3)));
  EXPECT_THAT(HostRunPackingSums(other, matrix, {}, {}, {}, absl::MakeSpan(sums)).message(),
              HasSubstr("another ring"));
}

// Several queries' leaves in one pass (HostRunSumLeavesBatch, the device's SumLeavesBatchThen):
// each query's sums as if alone, for every batch size, with 32-bit primes whose lazy sums carry.
TEST(PackingHostRun, ABatchSumsEachQueryAsAlone) {
  struct Case {
    lattice::RingContext ctx;
    uint64_t rows;
    uint32_t lwe_n;
  };
  const Case cases[] = {
      {*lattice::RingContext::Create(lattice::RingParams::Default()), 4096 + 9, 21},
      {*lattice::RingContext::Create(
           *lattice::RingParams::Create(10, *he::GenerateNttPrimes(32, 2048, 2))),
       2 * 1024 - 5, 300}};
  std::mt19937_64 gen(4);
  for (const Case& c : cases) {
    const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(c.ctx, c.rows, c.lwe_n, gen);
    const size_t sum_words = lattice::PackingSumWords(c.ctx, matrix);
    std::vector<std::vector<uint64_t>> leaves, alone;
    for (uint32_t q = 0; q < GpuPackingSums::kMaxBatch; ++q) {
      // A leaf is its beta's k N residues, then its alpha's.
      leaves.push_back(testing::RandomKeyHalves(c.ctx, 2 * c.lwe_n, gen));
      alone.emplace_back(sum_words);
      ASSERT_TRUE(
          HostRunSumLeaves(c.ctx, matrix, leaves.back(), absl::MakeSpan(alone.back())).ok());
    }
    for (const uint32_t queries : {1u, 2u, 5u, GpuPackingSums::kMaxBatch}) {
      std::vector<std::vector<uint64_t>> sums(queries, std::vector<uint64_t>(sum_words, 3));
      std::vector<absl::Span<const uint64_t>> leaf_spans(leaves.begin(), leaves.begin() + queries);
      std::vector<absl::Span<uint64_t>> sum_spans;
      for (std::vector<uint64_t>& v : sums) sum_spans.push_back(absl::MakeSpan(v));
      ASSERT_TRUE(HostRunSumLeavesBatch(c.ctx, matrix, leaf_spans, sum_spans).ok());
      for (uint32_t q = 0; q < queries; ++q) {
        EXPECT_TRUE(sums[q] == alone[q])
            << "n = " << c.lwe_n << ", query " << q << " of " << queries;
      }
    }
  }
}

TEST(PackingHostRun, ABatchRefusesBadInput) {
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  std::mt19937_64 gen(5);
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 100, 4, gen);
  const std::vector<uint64_t> leaves = testing::RandomKeyHalves(ctx, 2 * 4, gen);
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix)), other(sums.size());
  const std::vector<absl::Span<const uint64_t>> nine(GpuPackingSums::kMaxBatch + 1, leaves);
  const std::vector<absl::Span<uint64_t>> nine_sums(GpuPackingSums::kMaxBatch + 1,
                                                    absl::MakeSpan(sums));
  EXPECT_THAT(HostRunSumLeavesBatch(ctx, matrix, {}, {}).message(), HasSubstr("1 to 8 queries"));
  EXPECT_THAT(HostRunSumLeavesBatch(ctx, matrix, nine, nine_sums).message(),
              HasSubstr("1 to 8 queries' leaves (got 9)"));
  EXPECT_THAT(
      HostRunSumLeavesBatch(ctx, matrix, {leaves, leaves}, {absl::MakeSpan(sums)}).message(),
      HasSubstr("as many sums (got 1)"));
  const absl::Span<const uint64_t> short_leaves =
      absl::MakeConstSpan(leaves).first(leaves.size() - 1);
  EXPECT_THAT(HostRunSumLeavesBatch(ctx, matrix, {leaves, short_leaves},
                                    {absl::MakeSpan(sums), absl::MakeSpan(other)})
                  .message(),
              HasSubstr("leaf words"));
  EXPECT_TRUE(HostRunSumLeavesBatch(ctx, matrix, {leaves, leaves},
                                    {absl::MakeSpan(sums), absl::MakeSpan(other)})
                  .ok());
  EXPECT_EQ(sums, other);
}

TEST(SwitchHostRun, EqualsSwitchResponse) {
  // Random packed ciphertexts (NTT form over Q): the inverse NTTs and the switch to q' fused, on
  // the default ring and on 16 primes of up to 32 bits (N = 1,024).
  std::mt19937_64 gen(4);
  for (const lattice::RingParams& params :
       {lattice::RingParams::Default(),
        *lattice::RingParams::Create(10, *he::GenerateNttPrimes(32, 2048, 16))}) {
    const lattice::RingContext ctx = *lattice::RingContext::Create(params);
    std::vector<lattice::RlweCiphertext> packed(3);
    for (lattice::RlweCiphertext& ct : packed) {
      ct.c0 = testing::RandomKeyHalves(ctx, 1, gen);
      ct.c1 = testing::RandomKeyHalves(ctx, 1, gen);
    }
    absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> got =
        HostRunSwitchResponse(ctx, packed);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<lattice::SwitchedCiphertext> want = lattice::SwitchResponse(ctx, packed);
    ASSERT_EQ(got->size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_EQ((*got)[t].c0, want[t].c0) << "ciphertext " << t << ", " << ctx.k() << " primes";
      EXPECT_EQ((*got)[t].c1, want[t].c1) << "ciphertext " << t << ", " << ctx.k() << " primes";
    }
  }
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  std::vector<lattice::RlweCiphertext> bad(1);
  bad[0].c0 = testing::RandomKeyHalves(ctx, 1, gen);
  bad[0].c1 = bad[0].c0;
  bad[0].c1.pop_back();
  EXPECT_THAT(HostRunSwitchResponse(ctx, bad).status().message(), HasSubstr("residues, expected"));
  bad[0].c1 = bad[0].c0;
  bad[0].c1[7] = ctx.base()[0].value();
  EXPECT_THAT(HostRunSwitchResponse(ctx, bad).status().message(), HasSubstr("not below"));
}

}  // namespace
}  // namespace veil::gpu
