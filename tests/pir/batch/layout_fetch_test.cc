// From a plan to range lookups and back (pir/batch/layout_fetch.h), against the physical table
// (embedding/layout_table.h) read directly: every served row comes back exact, every other wanted
// row is marked missing, and a plan that disagrees with its layout is an error, never a wrong row.
#include "pir/batch/layout_fetch.h"

#include <cstdio>
#include <random>
#include <vector>

#include "embedding/layout_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::batch {
namespace {

using embedding::Layout;
using ::testing::HasSubstr;

constexpr int32_t kRows = 600;
constexpr int32_t kDim = 3;

Layout MakeLayout() {
  embedding::LayoutParams params;
  params.num_rows = kRows;
  params.row_words = kDim;
  params.colocation = 2;
  params.hot = {4, 2};
  params.cold = {16, 1};
  params.seed[0] = 9;
  std::vector<int32_t> hot;
  for (int32_t r = 0; r < 60; ++r) hot.push_back(r * 3);
  std::vector<std::vector<int32_t>> companions(kRows);
  for (int32_t r = 0; r < kRows; ++r) companions[r] = {(r + 1) % kRows, (r * 5 + 2) % kRows};
  return *Layout::Create(params, hot, companions);
}

// Row r's values: r + j / 10.
std::vector<float> LogicalRows() {
  std::vector<float> rows(kRows * kDim);
  for (int32_t r = 0; r < kRows; ++r) {
    for (int32_t j = 0; j < kDim; ++j) rows[r * kDim + j] = r + j / 10.0f;
  }
  return rows;
}

// What the servers would return for `lookups`: the physical table's rows, read in the clear.
std::vector<float> FetchInTheClear(const Layout& layout, const RangeLookups& lookups) {
  const std::vector<float> physical = *embedding::ArrangeRows(layout, LogicalRows());
  const int64_t entry = layout.entry_words();
  std::vector<float> entries;
  for (size_t i = 0; i < lookups.indices.size(); ++i) {
    EXPECT_LT(lookups.indices[i], lookups.ranges[i].rows);
    const uint64_t row = lookups.ranges[i].first_row + lookups.indices[i];
    entries.insert(entries.end(), physical.begin() + row * entry,
                   physical.begin() + (row + 1) * entry);
  }
  return entries;
}

TEST(LayoutFetchTest, ServedRowsAreExactAndTheRestMissing) {
  const Layout layout = MakeLayout();
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int32_t> wanted;
    const int n = std::uniform_int_distribution<int>(1, 80)(random);
    for (int i = 0; i < n; ++i) wanted.push_back(std::uniform_int_distribution<int32_t>(0, kRows - 1)(random));
    auto plan = PlanFetch(layout, wanted, random);
    ASSERT_TRUE(plan.ok());
    const RangeLookups lookups = LookupsOf(layout, *plan);
    ASSERT_EQ(lookups.indices.size(), plan->fetches.size());
    for (size_t i = 0; i < lookups.ranges.size(); ++i) {
      // Every key is over its bin: the range of its table's bin size.
      EXPECT_EQ(lookups.ranges[i].rows,
                static_cast<uint64_t>(layout.slots_per_bin(plan->fetches[i].slot.table)));
    }
    auto rows = UnpackEntries(layout, *plan, wanted, FetchInTheClear(layout, lookups), kDim);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->values.size(), rows->rows.size() * kDim);
    int served = 0;
    for (size_t i = 0; i < rows->rows.size(); ++i) {
      const bool missing = std::binary_search(plan->missing.begin(), plan->missing.end(),
                                              rows->rows[i]);
      ASSERT_EQ(rows->missing[i] != 0, missing);
      for (int32_t j = 0; j < kDim; ++j) {
        const float expected = missing ? 0.0f : rows->rows[i] + j / 10.0f;
        ASSERT_EQ(rows->values[i * kDim + j], expected) << "row " << rows->rows[i];
      }
      served += !missing;
    }
    EXPECT_GT(served, 0);
  }
}

TEST(LayoutFetchTest, APlanThatDisagreesWithTheLayoutIsAnError) {
  const Layout layout = MakeLayout();
  std::mt19937_64 random(3);
  auto plan = PlanFetch(layout, {5, 6, 7}, random);
  ASSERT_TRUE(plan.ok());
  ASSERT_FALSE(plan->sources.empty());
  const std::vector<float> entries = FetchInTheClear(layout, LookupsOf(layout, *plan));
  FetchPlan bad = *plan;
  bad.sources[0].position = (bad.sources[0].position + 1) % layout.entry_rows();
  auto rows = UnpackEntries(layout, bad, {5, 6, 7}, entries, kDim);
  EXPECT_TRUE(absl::IsInternal(rows.status()));
  EXPECT_THAT(rows.status().message(), HasSubstr("is not in its fetched entry"));
  bad = *plan;
  bad.missing.push_back(bad.sources[0].row);
  std::sort(bad.missing.begin(), bad.missing.end());
  EXPECT_THAT(UnpackEntries(layout, bad, {5, 6, 7}, entries, kDim).status().message(),
              HasSubstr("neither fetched nor reported missing"));
  EXPECT_TRUE(absl::IsInvalidArgument(
      UnpackEntries(layout, *plan, {5, 6, 7}, absl::MakeConstSpan(entries).subspan(1), kDim)
          .status()));
}

}  // namespace
}  // namespace veil::batch
