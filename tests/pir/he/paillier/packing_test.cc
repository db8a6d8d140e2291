#include "pir/he/paillier/packing.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/pir/he/paillier/test_support.h"

namespace veil::he {
namespace {

using ::testing::HasSubstr;
using testing::TestKeys;
using testing::TestSeed;

TEST(PaillierPacking, SlotWidthLeavesHeadroomForTheSummands) {
  const PublicKey& pk = TestKeys(1024).public_key;
  auto packer = Packer::Create(pk, {.value_bits = 16, .max_summands = 671});
  ASSERT_TRUE(packer.ok()) << packer.status();
  EXPECT_EQ(packer->slot_bits(), 26u);  // 671 * 65535 < 2^26
  EXPECT_EQ(packer->slots(), 1023u / 26);
  auto one = Packer::Create(pk, {.value_bits = 1, .max_summands = 1});
  EXPECT_EQ(one->slot_bits(), 1u);
  EXPECT_EQ(one->slots(), 1023u);
}

TEST(PaillierPacking, CreateRejectsBadSpecs) {
  const PublicKey& pk = TestKeys(1024).public_key;
  for (PackingSpec spec : {PackingSpec{0, 1}, PackingSpec{63, 1}, PackingSpec{16, 0},
                           PackingSpec{40, uint64_t{1} << 30}}) {
    EXPECT_EQ(Packer::Create(pk, spec).status().code(), absl::StatusCode::kInvalidArgument)
        << spec.value_bits << " " << spec.max_summands;
  }
}

TEST(PaillierPacking, PackUnpackRoundTripsOnEdgeAndRandomCounts) {
  std::mt19937_64 rng(TestSeed() + 10);
  const PublicKey& pk = TestKeys(1024).public_key;
  for (uint32_t bits : {1u, 7u, 16u, 33u, 62u}) {
    auto packer = Packer::Create(pk, {.value_bits = bits, .max_summands = 3});
    ASSERT_TRUE(packer.ok()) << packer.status();
    const size_t k = packer->slots();
    for (size_t count : {size_t{1}, size_t{2}, k - 1, k, k + 1, 3 * k + 5, 1 + rng() % 500}) {
      std::vector<uint64_t> values(count);
      for (uint64_t& v : values) v = rng() >> (64 - bits);
      values[0] = (uint64_t{1} << bits) - 1;
      auto plaintexts = packer->Pack(values);
      ASSERT_TRUE(plaintexts.ok()) << plaintexts.status();
      EXPECT_EQ(plaintexts->size(), packer->PlaintextsFor(count));
      auto back = packer->Unpack(*plaintexts, count);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, values) << bits << "-bit values, count " << count;
    }
  }
}

TEST(PaillierPacking, RefusesValuesThatDoNotFitAndForeignPlaintexts) {
  const PublicKey& pk = TestKeys(1024).public_key;
  auto packer = Packer::Create(pk, {.value_bits = 8, .max_summands = 4});
  ASSERT_TRUE(packer.ok());
  auto too_big = packer->Pack(std::vector<uint64_t>{1, 2, 256});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("value 2 (256) does not fit in 8 bits"));
  Mpz foreign;
  mpz_setbit(foreign.get(), packer->slots() * packer->slot_bits());
  EXPECT_THAT(packer->Unpack({foreign}, 1).status().message(), HasSubstr("above its last slot"));
  EXPECT_THAT(packer->Unpack({}, 1).status().message(), HasSubstr("1 values need 1 plaintexts"));
}

// max_summands reports of all-maximal values: every slot reaches its largest value and none
// carries into the next; random reports sum slot by slot.
TEST(PaillierPacking, SlotsNeverCarryUpToTheHeadroom) {
  std::mt19937_64 rng(TestSeed() + 11);
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  const PackingSpec spec{.value_bits = 8, .max_summands = 5};
  auto packer = Packer::Create(pk, spec);
  ASSERT_TRUE(packer.ok());
  auto fixed = FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  const size_t count = packer->slots() + 3;
  for (bool maximal : {true, false}) {
    std::vector<CiphertextBatch> reports;
    std::vector<uint64_t> expected(count, 0);
    for (uint64_t r = 0; r < spec.max_summands; ++r) {
      std::vector<uint64_t> values(count);
      for (size_t i = 0; i < count; ++i) {
        values[i] = maximal ? 255 : rng() % 256;
        expected[i] += values[i];
      }
      auto report = EncryptPacked(pk, *packer, values, **fixed);
      ASSERT_TRUE(report.ok()) << report.status();
      reports.push_back(*std::move(report));
    }
    auto total = AggregateBatches(pk, reports, 2);
    ASSERT_TRUE(total.ok()) << total.status();
    EXPECT_EQ(total->summands, spec.max_summands);
    auto sums = DecryptPacked(keys, *packer, *total);
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, expected);
  }
}

TEST(PaillierPacking, RefusesSumsBeyondTheHeadroom) {
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  auto packer = Packer::Create(pk, {.value_bits = 8, .max_summands = 2});
  ASSERT_TRUE(packer.ok());
  auto fixed = FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  std::vector<CiphertextBatch> reports;
  for (int r = 0; r < 3; ++r) {
    reports.push_back(*EncryptPacked(pk, *packer, std::vector<uint64_t>{255, 255}, **fixed));
  }
  auto refused = AggregateBatches(pk, reports, 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("a sum of 3 packed reports exceeds the headroom of 2"));
  // Adding a third report to an aggregate of two is refused the same way.
  auto two = AggregateBatches(pk, absl::MakeSpan(reports).subspan(0, 2), 1);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(AggregateBatches(pk, {*two, reports[2]}, 1).status().code(),
            absl::StatusCode::kOutOfRange);
  CiphertextBatch forged = *two;
  forged.summands = 3;
  EXPECT_EQ(DecryptPacked(keys, *packer, forged).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*DecryptPacked(keys, *packer, *two), (std::vector<uint64_t>{510, 510}));
}

}  // namespace
}  // namespace veil::he
