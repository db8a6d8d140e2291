#include "pir/batch/planner.h"

#include <map>
#include <random>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "dpf/key.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::batch {
namespace {

using embedding::Layout;
using embedding::LayoutParams;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Layout MakeLayout(int32_t rows, int32_t c, embedding::TableShape hot, embedding::TableShape cold,
                  std::vector<int32_t> hot_rows,
                  std::vector<std::vector<int32_t>> companions = {}) {
  LayoutParams params;
  params.num_rows = rows;
  params.row_words = 16;
  params.colocation = c;
  params.hot = hot;
  params.cold = cold;
  params.seed[3] = 7;
  return *Layout::Create(params, std::move(hot_rows), companions);
}

TEST(PlannerTest, SendsTheSameKeysToEveryBinWhateverIsWanted) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  std::vector<std::vector<int32_t>> companions(2000);
  for (int32_t r = 0; r < 2000; ++r) companions[r] = {(r * 7 + 1) % 2000};
  std::vector<int32_t> hot;
  for (int32_t r = 0; r < 200; ++r) hot.push_back(r);
  const Layout layout = MakeLayout(2000, 1, {8, 3}, {32, 2}, hot, companions);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> wanted;
    const int n = trial == 0 ? 0 : std::uniform_int_distribution<int>(1, 150)(random);
    for (int i = 0; i < n; ++i) {
      wanted.push_back(std::uniform_int_distribution<int32_t>(0, 1999)(random));
    }
    auto plan = PlanFetch(layout, wanted, random);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->fetches.size(), 8u * 3 + 32u * 2);
    std::map<std::pair<int, int>, int> keys_per_bin;
    for (const SlotFetch& f : plan->fetches) {
      ++keys_per_bin[{f.slot.table, f.slot.bin}];
      ASSERT_GE(f.slot.slot, 0);
      ASSERT_LT(f.slot.slot, layout.slots_per_bin(f.slot.table));
    }
    ASSERT_EQ(keys_per_bin.size(), 8u + 32u);
    for (const auto& [bin, keys] : keys_per_bin) {
      ASSERT_EQ(keys, bin.first == embedding::kHotTable ? 3 : 2);
    }
    // Served rows come from entries that hold them; served + missing = wanted.
    std::set<int32_t> accounted(plan->missing.begin(), plan->missing.end());
    for (const RowSource& s : plan->sources) {
      const SlotFetch& f = plan->fetches[s.fetch];
      ASSERT_FALSE(f.dummy);
      ASSERT_EQ(layout.Entry(f.slot)[s.position], s.row);
      ASSERT_TRUE(accounted.insert(s.row).second) << "row served twice";
    }
    ASSERT_EQ(accounted, std::set<int32_t>(wanted.begin(), wanted.end()));
  }
}

TEST(PlannerTest, CollisionsBeyondTheRoundsAreMissingUnlessCoLocated) {
  // One bin, one key: of three wanted rows only one can be fetched...
  const Layout plain = MakeLayout(10, 0, {}, {1, 1}, {});
  auto selection = ChooseSlots(plain, {2, 5, 7});
  ASSERT_TRUE(selection.ok());
  EXPECT_EQ(selection->fetches.size(), 1u);
  EXPECT_EQ(selection->missing.size(), 2u);
  // ... unless 5 and 7 are stored with 2: then one key serves all three.
  std::vector<std::vector<int32_t>> companions(10);
  companions[2] = {5, 7};
  const Layout colocated = MakeLayout(10, 2, {}, {1, 1}, {}, companions);
  selection = ChooseSlots(colocated, {7, 5, 2, 2});
  ASSERT_TRUE(selection.ok());
  ASSERT_EQ(selection->fetches.size(), 1u);
  EXPECT_TRUE(selection->missing.empty());
  ASSERT_EQ(selection->sources.size(), 3u);
  EXPECT_EQ(selection->sources[1].row, 5);
  EXPECT_EQ(selection->sources[1].position, 1);
}

TEST(PlannerTest, ATableWithoutRoundsIsNeverFetched) {
  const Layout hot_only = MakeLayout(10, 0, {2, 1}, {4, 0}, {0, 1});
  std::mt19937_64 random(1);
  auto plan = PlanFetch(hot_only, {0, 9}, random);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->fetches.size(), 2u);
  EXPECT_THAT(plan->missing, ElementsAre(9));
}

TEST(PlannerTest, RejectsRowsOutsideTheTable) {
  const Layout layout = MakeLayout(10, 0, {}, {2, 1}, {});
  std::mt19937_64 random(1);
  auto plan = PlanFetch(layout, {3, 10}, random);
  EXPECT_TRUE(absl::IsInvalidArgument(plan.status()));
  EXPECT_THAT(plan.status().message(), HasSubstr("out of range [0, 10)"));
  EXPECT_TRUE(absl::IsInvalidArgument(ChooseSlots(layout, {-1}).status()));
}

TEST(PlannerCostTest, CountsKeysWordsAndBytes) {
  // Key sizes (dpf::DpfKey::SerializedSize, additive 16-word leaves): 7 header + 16 root seed + 16
  // per level below the leaves + their control bits + 64 final word.
  auto key_bytes = [](int log_domain) {
    dpf::DpfParameters params;
    params.log_domain = log_domain;
    return static_cast<int64_t>(dpf::DpfKey::SerializedSize(params));
  };
  EXPECT_EQ(key_bytes(20), 7 + 16 + 16 * 16 + 2 + 64);
  EXPECT_EQ(key_bytes(4), 87);
  // 1024 cold rows in 16 bins of 64 slots, 2 rounds, c = 1 → entries of 32 words.
  std::vector<std::vector<int32_t>> companions(1024);
  const Layout layout = MakeLayout(1024, 1, {}, {16, 2}, {}, companions);
  const PlanCost cost = CostOf(layout);
  EXPECT_EQ(cost.keys, 32);
  EXPECT_EQ(cost.words_scanned, 32 * 64 * 32);
  EXPECT_EQ(cost.upload_bytes, 2 * 32 * key_bytes(6));
  EXPECT_EQ(cost.download_bytes, 2 * 32 * 32 * 4);
}

}  // namespace
}  // namespace veil::batch
