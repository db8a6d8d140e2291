#include "training_tools/profile.h"

#include <sstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::training {
namespace {

using ::testing::ElementsAre;

TEST(ProfileTest, CountsFrequencyAndRepeatedCoAccess) {
  const std::vector<RowRequest> requests = {{0, 1, 2}, {1, 2, 2}, {1, 3}, {1, 2, 3}, {4, 9}};
  const AccessProfile profile = BuildProfile(requests, 5, 2);
  EXPECT_EQ(profile.num_requests, 5);
  EXPECT_THAT(profile.frequency, ElementsAre(1, 4, 3, 2, 1));  // 9 is outside the table
  EXPECT_THAT(profile.co_accessed[1], ElementsAre(2, 3));      // 2 seen with 1 thrice, 3 twice
  EXPECT_THAT(profile.co_accessed[0], ElementsAre());          // single co-occurrences are noise
  EXPECT_THAT(RowsByFrequency(profile), ElementsAre(1, 2, 3, 0, 4));
  std::ostringstream csv;
  WriteProfileCsv(profile, csv);
  EXPECT_THAT(csv.str(), ::testing::HasSubstr("1,4,2 3\n"));
}

TEST(ProfileTest, DesignLayoutPutsTheMostFrequentRowsInTheHotTable) {
  const std::vector<RowRequest> requests = {{7, 8}, {7, 8}, {7, 3}, {7}};
  const AccessProfile profile = BuildProfile(requests, 10, 4);
  const LayoutChoice choice{.hot_fraction = 0.2,
                            .hot_bins = 5,
                            .hot_rounds = 1,
                            .cold_bins = 4,
                            .cold_rounds = 1,
                            .colocation = 1};
  auto layout = DesignLayout(profile, 32, choice, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_THAT(layout->hot_rows(), ElementsAre(7, 8));
  EXPECT_EQ(layout->shape(embedding::kHotTable).bins, 2);  // clamped to the hot rows
  EXPECT_THAT(layout->Entry(layout->Locate(7)), ElementsAre(7, 8));
  EXPECT_THAT(layout->Entry(layout->Locate(3)), ElementsAre(3, -1));
}

}  // namespace
}  // namespace veil::training
