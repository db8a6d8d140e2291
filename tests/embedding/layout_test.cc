#include "embedding/layout.h"

#include <sodium.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::embedding {
namespace {

using ::testing::HasSubstr;

LayoutParams Params(int32_t rows, int32_t c, TableShape hot, TableShape cold) {
  LayoutParams params;
  params.num_rows = rows;
  params.row_words = 8;
  params.colocation = c;
  params.hot = hot;
  params.cold = cold;
  for (int i = 0; i < 16; ++i) params.seed[i] = static_cast<uint8_t>(i);
  return params;
}

// Every row i is co-located with i+1, i+2, … (mod rows; fewer in tiny tables).
std::vector<std::vector<int32_t>> Companions(int32_t rows, int32_t c) {
  std::vector<std::vector<int32_t>> companions(rows);
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t k = 1; k <= std::min(c, rows - 1); ++k) companions[r].push_back((r + k) % rows);
  }
  return companions;
}

TEST(LayoutTest, PlacesEveryRowOnceInItsTableWithConsistentCopies) {
  for (int32_t rows : {1, 2, 15, 16, 17, 1000}) {
    const int32_t c = 2;
    std::vector<int32_t> hot;
    for (int32_t r = 0; r < rows / 10; ++r) hot.push_back(r * 3 % rows);
    std::sort(hot.begin(), hot.end());
    hot.erase(std::unique(hot.begin(), hot.end()), hot.end());
    const int32_t hot_count = static_cast<int32_t>(hot.size());
    const TableShape hot_shape = hot_count ? TableShape{std::min(hot_count, 4), 2} : TableShape{};
    auto layout = Layout::Create(Params(rows, c, hot_shape, {std::min(rows - hot_count, 7), 1}),
                                 hot, Companions(rows, c));
    ASSERT_TRUE(layout.ok()) << layout.status();
    std::vector<int> seen(rows, 0);
    for (int t = 0; t < kNumLayoutTables; ++t) {
      int32_t placed = 0, smallest = INT32_MAX, largest = 0;
      for (int32_t bin = 0; bin < layout->shape(t).bins; ++bin) {
        int32_t in_bin = 0;
        for (int32_t slot = 0; slot < layout->slots_per_bin(t); ++slot) {
          const auto entry = layout->Entry({t, bin, slot});
          ASSERT_EQ(entry.size(), 3u);
          if (entry[0] < 0) continue;
          ++seen[entry[0]];
          ++in_bin;
          const bool is_hot = std::binary_search(hot.begin(), hot.end(), entry[0]);
          EXPECT_EQ(is_hot, t == kHotTable);
          const SlotRef where = layout->Locate(entry[0]);
          EXPECT_EQ(where.table, t);
          EXPECT_EQ(where.bin, bin);
          EXPECT_EQ(where.slot, slot);
          if (rows > 2) {  // copies equal the source's companion list
            EXPECT_EQ(entry[1], (entry[0] + 1) % rows);
            EXPECT_EQ(entry[2], (entry[0] + 2) % rows);
          }
        }
        placed += in_bin;
        smallest = std::min(smallest, in_bin);
        largest = std::max(largest, in_bin);
      }
      EXPECT_EQ(placed, layout->table_rows(t));
      if (placed > 0) {
        EXPECT_LE(largest - smallest, 1) << "bins are balanced";
      }
    }
    for (int32_t r = 0; r < rows; ++r) EXPECT_EQ(seen[r], 1) << "row " << r;
  }
}

TEST(LayoutTest, PlacementDependsOnlyOnTheSeed) {
  auto a = Layout::Create(Params(500, 0, {}, {10, 1}), {}, {});
  auto b = Layout::Create(Params(500, 0, {}, {10, 1}), {}, {});
  LayoutParams other = Params(500, 0, {}, {10, 1});
  other.seed[0] ^= 1;
  auto c = Layout::Create(other, {}, {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->Serialize(), b->Serialize());
  int moved = 0;
  for (int32_t r = 0; r < 500; ++r) {
    EXPECT_EQ(a->Locate(r).bin, b->Locate(r).bin);
    moved += a->Locate(r).bin != c->Locate(r).bin;
  }
  EXPECT_GT(moved, 400);  // a fresh permutation: ~90% of rows change bin
}

TEST(LayoutTest, SeedFromU64IsSplitMix64) {
  // splitmix64 from state 0: first output 0xe220a8397b1dcdaf (Vigna's reference generator).
  const std::array<uint8_t, 16> seed = LayoutSeedFromU64(0);
  uint64_t first = 0;
  for (int i = 0; i < 8; ++i) first |= uint64_t{seed[i]} << (8 * i);
  EXPECT_EQ(first, 0xe220a8397b1dcdafULL);
  EXPECT_EQ(LayoutSeedFromU64(7), LayoutSeedFromU64(7));
  EXPECT_NE(LayoutSeedFromU64(7), LayoutSeedFromU64(8));
}

TEST(LayoutTest, RejectsInconsistentParameters) {
  EXPECT_THAT(Layout::Create(Params(10, 0, {2, 1}, {2, 1}), {3, 3}, {}).status().message(),
              HasSubstr("listed twice"));
  EXPECT_THAT(Layout::Create(Params(10, 0, {2, 1}, {2, 1}), {10}, {}).status().message(),
              HasSubstr("out of range"));
  EXPECT_THAT(Layout::Create(Params(10, 0, {2, 1}, {2, 1}), {}, {}).status().message(),
              HasSubstr("hot table is empty"));
  EXPECT_THAT(Layout::Create(Params(10, 0, {}, {11, 1}), {}, {}).status().message(),
              HasSubstr("10 rows and 11 bins"));
  EXPECT_THAT(Layout::Create(Params(10, 1, {}, {2, 1}), {}, {{1, 2}}).status().message(),
              HasSubstr("companions for 1 rows"));
  std::vector<std::vector<int32_t>> self(10);
  self[4] = {4};
  EXPECT_THAT(Layout::Create(Params(10, 1, {}, {2, 1}), {}, self).status().message(),
              HasSubstr("companion 4 of row 4"));
  EXPECT_THAT(Layout::Create(Params(10, 17, {}, {2, 1}), {}, {}).status().message(),
              HasSubstr("co-location factor 17"));
}

TEST(LayoutFileTest, RoundTripsAndRejectsMalformedFiles) {
  auto layout = Layout::Create(Params(100, 2, {3, 2}, {8, 1}), {5, 50, 7, 9}, Companions(100, 2));
  ASSERT_TRUE(layout.ok()) << layout.status();
  const std::vector<uint8_t> bytes = layout->Serialize();
  EXPECT_EQ(bytes.size(), 60u + 4 * 4 + 4 * 100 * 2 + 32);
  auto parsed = Layout::Parse(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Serialize(), bytes);
  EXPECT_EQ(parsed->Locate(50).table, kHotTable);

  auto corrupt = bytes;
  corrupt[70] ^= 1;
  EXPECT_THAT(Layout::Parse(corrupt).status().message(), HasSubstr("digest mismatch"));
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_THAT(Layout::Parse(bad_magic).status().message(), HasSubstr("bad magic"));
  auto bad_version = bytes;
  bad_version[8] = 9;
  EXPECT_THAT(Layout::Parse(bad_version).status().message(), HasSubstr("version 9"));
  auto truncated = std::vector<uint8_t>(bytes.begin(), bytes.end() - 1);
  EXPECT_THAT(Layout::Parse(truncated).status().message(), HasSubstr("its header implies"));
  auto huge = bytes;
  huge[12] = huge[13] = huge[14] = 0xFF;
  huge[15] = 0x7F;  // 2^31 − 1 rows
  EXPECT_TRUE(absl::IsInvalidArgument(Layout::Parse(huge).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Layout::Parse({}).status()));

  const std::string path = ::testing::TempDir() + "/layout_test.veillayout";
  ASSERT_TRUE(layout->WriteFile(path).ok());
  auto read = Layout::ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->Serialize(), bytes);
  std::remove(path.c_str());
  EXPECT_TRUE(absl::IsNotFound(Layout::ReadFile(path).status()));
}

// A file of ~100 bytes (co-location 0: nothing per row in the file) may declare 2^30 rows; Parse
// refuses it before allocating rather than building a layout of tens of GiB.
TEST(LayoutFileTest, AFileDeclaringMoreRowsThanTheMemoryLimitIsRefusedBeforeAllocating) {
  auto layout = Layout::Create(Params(100, 0, {}, {8, 1}), {}, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<uint8_t> bytes = layout->Serialize();
  ASSERT_LT(bytes.size(), 128u);
  const uint32_t rows = uint32_t{1} << 30;
  std::memcpy(&bytes[12], &rows, 4);  // little-endian like the file
  crypto_generichash(bytes.data() + bytes.size() - 32, 32, bytes.data(), bytes.size() - 32,
                     nullptr, 0);
  LayoutParams params = layout->params();
  params.num_rows = static_cast<int32_t>(rows);
  EXPECT_GT(Layout::PeakMemoryBytes(params), uint64_t{32} << 30);
  const absl::Status refused = Layout::Parse(bytes).status();
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("above the limit of 1024 MiB"));
  // A limit that fits the real layout lets it through; one just below its need refuses it.
  const std::vector<uint8_t> real = layout->Serialize();
  const uint64_t need = Layout::PeakMemoryBytes(layout->params());
  EXPECT_TRUE(Layout::Parse(real, need).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(Layout::Parse(real, need - 1).status()));
}

TEST(LayoutFileTest, MutatedFilesAreRejectedOrValid) {
  auto layout = Layout::Create(Params(64, 1, {2, 1}, {4, 1}), {1, 2, 3}, Companions(64, 1));
  ASSERT_TRUE(layout.ok());
  const std::vector<uint8_t> bytes = layout->Serialize();
  std::mt19937_64 random(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> mutated = bytes;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < flips; ++i) mutated[random() % mutated.size()] ^= 1 << (random() % 8);
    if (trial % 3 == 0) mutated.resize(random() % mutated.size());
    auto parsed = Layout::Parse(mutated);  // must not crash; the digest catches every flip
    EXPECT_FALSE(parsed.ok() && mutated != bytes);
  }
}

}  // namespace
}  // namespace veil::embedding
