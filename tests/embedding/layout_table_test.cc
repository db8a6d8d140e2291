// The physical table of a layout (embedding/layout_table.h): every slot's entry in its row.
#include "embedding/layout_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace veil::embedding {
namespace {

Layout MakeLayout(TableShape hot, TableShape cold, int32_t colocation) {
  LayoutParams params;
  params.num_rows = 50;
  params.row_words = 3;
  params.colocation = colocation;
  params.hot = hot;
  params.cold = cold;
  params.seed = {9};
  std::vector<std::vector<int32_t>> companions(50);
  for (int32_t r = 0; r < 50; ++r) {
    for (int32_t k = 1; k <= colocation; ++k) companions[r].push_back((r + 7 * k) % 50);
  }
  auto layout = Layout::Create(params, {1, 4, 9, 16, 25, 36, 49}, companions);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

TEST(LayoutTableTest, EverySlotHoldsItsEntry) {
  const Layout layout = MakeLayout({.bins = 3, .rounds = 1}, {.bins = 5, .rounds = 2}, 2);
  std::vector<float> rows(50 * 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i) + 0.5f;
  auto physical = ArrangeRows(layout, rows);
  ASSERT_TRUE(physical.ok()) << physical.status();
  ASSERT_EQ(PhysicalRows(layout),
            3 * layout.slots_per_bin(kHotTable) + 5 * layout.slots_per_bin(kColdTable));
  ASSERT_EQ(static_cast<int64_t>(physical->size()), PhysicalRows(layout) * layout.entry_words());
  std::vector<bool> seen(PhysicalRows(layout), false);
  for (int table = 0; table < kNumLayoutTables; ++table) {
    for (int32_t bin = 0; bin < layout.shape(table).bins; ++bin) {
      for (int32_t slot = 0; slot < layout.slots_per_bin(table); ++slot) {
        const SlotRef ref{table, bin, slot};
        const int64_t index = PhysicalIndex(layout, ref);
        ASSERT_LT(index, PhysicalRows(layout));
        EXPECT_FALSE(seen[index]) << "two slots in one physical row";
        seen[index] = true;
        const auto entry = layout.Entry(ref);
        for (size_t p = 0; p < entry.size(); ++p) {
          for (int w = 0; w < 3; ++w) {
            const float expected = entry[p] < 0 ? 0.0f : rows[entry[p] * 3 + w];
            EXPECT_EQ((*physical)[index * layout.entry_words() + p * 3 + w], expected);
          }
        }
      }
    }
  }
  EXPECT_EQ(PhysicalIndex(layout, layout.Locate(1)) < 3 * layout.slots_per_bin(kHotTable), true)
      << "the hot table comes first";
}

TEST(LayoutTableTest, TablesNeverQueriedAreNotServed) {
  const Layout layout = MakeLayout({.bins = 7, .rounds = 1}, {.bins = 5, .rounds = 0}, 0);
  EXPECT_EQ(PhysicalRows(layout), 7);
  std::vector<float> rows(50 * 3, 1.0f);
  auto physical = ArrangeRows(layout, rows);
  ASSERT_TRUE(physical.ok());
  EXPECT_EQ(physical->size(), 7u * 3);
}

TEST(LayoutTableTest, RejectsRowsOfAnotherSize) {
  const Layout layout = MakeLayout({.bins = 3, .rounds = 1}, {.bins = 5, .rounds = 1}, 0);
  EXPECT_EQ(ArrangeRows(layout, std::vector<float>(49 * 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace veil::embedding
