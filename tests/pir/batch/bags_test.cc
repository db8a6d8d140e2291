// Bag padding and summing (pir/batch/bags.h).
#include "pir/batch/bags.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::batch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BagsTest, PadsEveryBagToTheSameSizeWithWeightZero) {
  std::mt19937_64 random(1);
  auto padded = PadBags({4, 5, 6}, {2, 1}, {3, -1, 7}, 10, 4, random);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_THAT(padded->bag_sizes, ElementsAre(4, 4));
  ASSERT_EQ(padded->indices.size(), 8u);
  EXPECT_THAT(padded->weights, ElementsAre(3, static_cast<uint32_t>(-1), 0, 0, 7, 0, 0, 0));
  EXPECT_EQ(padded->indices[0], 4u);
  EXPECT_EQ(padded->indices[1], 5u);
  EXPECT_EQ(padded->indices[4], 6u);
  for (uint64_t index : padded->indices) EXPECT_LT(index, 10u);
}

TEST(BagsTest, WithoutPaddingBagsKeepTheirSizesAndWeightOne) {
  std::mt19937_64 random(1);
  auto padded = PadBags({1, 2, 3}, {1, 2}, {}, 10, 0, random);
  ASSERT_TRUE(padded.ok());
  EXPECT_THAT(padded->bag_sizes, ElementsAre(1, 2));
  EXPECT_THAT(padded->weights, ElementsAre(1, 1, 1));
}

TEST(BagsTest, RejectsBadBags) {
  std::mt19937_64 random(1);
  EXPECT_THAT(PadBags({1, 2}, {1, 0, 1}, {}, 10, 0, random).status().message(),
              HasSubstr("bag 1 is empty"));
  EXPECT_THAT(PadBags({1, 2}, {1}, {}, 10, 0, random).status().message(),
              HasSubstr("bag sizes add up to 1 but there are 2 entries"));
  EXPECT_THAT(PadBags({1, 2}, {2}, {1}, 10, 0, random).status().message(),
              HasSubstr("1 weights for 2 indices"));
  EXPECT_THAT(PadBags({1, 12}, {2}, {}, 10, 0, random).status().message(),
              HasSubstr("row 12 is outside the table (10 rows)"));
  EXPECT_THAT(PadBags({1, 2, 3}, {3}, {}, 10, 2, random).status().message(),
              HasSubstr("bag 0 holds 3 rows, more than the padded bag size (2; raise pad_bags_to)"));
}

TEST(BagsTest, SumsEachBagsSharesModTwoToThe32) {
  // Two words per key; bags of 2 and 1 keys.
  const std::vector<uint32_t> shares = {1, 0xffffffffu, 2, 3, 10, 20};
  std::vector<uint32_t> out(4);
  SumBags(shares, {2, 1}, 2, absl::MakeSpan(out));
  EXPECT_THAT(out, ElementsAre(3, 2, 10, 20));
}

}  // namespace
}  // namespace veil::batch
