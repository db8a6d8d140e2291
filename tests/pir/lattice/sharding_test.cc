// Several devices serving one table (pir/lattice/sharding.h), with CPU products and engines in
// place of the devices: the split of rows, a row-sharded product equal to the whole one, a
// group-sharded packing engine equal to the whole one and inside a packed server whose lookups
// decode; shards that do not cover the rows are refused.
#include "pir/lattice/sharding.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/pack_simple.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardingTest, SplitsRowsEvenlyAtAlignedBoundaries) {
  EXPECT_THAT(SplitRows(10000, 3, 4096),
              ElementsAre(RowRange{0, 4096}, RowRange{4096, 4096}, RowRange{8192, 1808}));
  EXPECT_THAT(SplitRows(5, 4, 1),
              ElementsAre(RowRange{0, 2}, RowRange{2, 1}, RowRange{3, 1}, RowRange{4, 1}));
  // Fewer aligned blocks than parts: fewer ranges, none empty.
  EXPECT_THAT(SplitRows(100, 8, 4096), ElementsAre(RowRange{0, 100}));
  EXPECT_THAT(SplitRows(7 * 64 + 1, 2, 64), ElementsAre(RowRange{0, 256}, RowRange{256, 193}));
}

TEST(ShardingTest, ARowShardedProductEqualsTheWholeOne) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 300);
  const uint64_t rows = 1001, cols = 37, stride = 64;
  std::vector<int8_t> bytes(rows * stride);
  for (int8_t& b : bytes) b = static_cast<int8_t>(gen());
  const ByteMatrixView db{bytes.data(), rows, cols, stride};
  const int batch = 3;
  std::vector<uint32_t> queries(batch * cols);
  for (uint32_t& w : queries) w = static_cast<uint32_t>(gen());
  std::vector<uint32_t> want(batch * rows), got(want.size(), 7);
  ASSERT_TRUE(MakeCpuProduct(db, 1)->Multiply(queries, batch, absl::MakeSpan(want)).ok());
  std::vector<RowShardedProduct::Shard> shards;
  for (const RowRange& r : SplitRows(rows, 3, 64)) {
    shards.push_back({r, MakeCpuProduct(RowsOf(db, r), 1)});
  }
  auto sharded = RowShardedProduct::Create(rows, std::move(shards));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ((*sharded)->name(), "cpu x 3");
  ASSERT_TRUE((*sharded)->Multiply(queries, batch, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, want);
  EXPECT_THAT((*sharded)->Multiply(queries, batch, absl::MakeSpan(got).first(10)).message(),
              HasSubstr("sharded product"));
  // A gap, an overlap, a short cover.
  for (const std::vector<RowRange>& ranges :
       {std::vector<RowRange>{{0, 500}, {501, 500}}, std::vector<RowRange>{{0, 600}, {500, 501}},
        std::vector<RowRange>{{0, 1000}}}) {
    std::vector<RowShardedProduct::Shard> bad;
    for (const RowRange& r : ranges) bad.push_back({r, MakeCpuProduct(RowsOf(db, r), 1)});
    EXPECT_FALSE(RowShardedProduct::Create(rows, std::move(bad)).ok());
  }
}

TEST(ShardingTest, AGroupShardedEngineServesAsTheWholeOne) {
  // 3,001 records of 100 bytes, 45 per column: D1 = 4,500, two packed groups, one per shard.
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 301);
  const uint64_t rows = 3001;
  const uint32_t record_bytes = 100;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, record_bytes, gen);
  LweServerOptions options;
  options.shape.records_per_column = 45;
  auto make = [&] {
    return PackedSimpleServer::Create(
        *LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(30), options));
  };
  auto whole = make();
  auto split = make();
  ASSERT_TRUE(whole.ok() && split.ok());
  const RingContext& ring = (*split)->ring();
  const PackingMatrix& matrix = (*split)->matrix();
  ASSERT_EQ(matrix.groups(), 2u);
  std::vector<PackingMatrix> parts;  // the CPU engines keep references to them
  std::vector<GroupShardedPackingEngine::Shard> shards;
  const std::vector<RowRange> ranges = SplitRows(matrix.groups(), 2, 1);
  for (const RowRange& r : ranges) parts.push_back(*matrix.Groups(ring, r.first, r.count));
  EXPECT_EQ(parts[1].rows(), 4500u - 4096u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    shards.push_back({ranges[i], std::make_unique<CpuPackingEngine>(ring, parts[i])});
  }
  auto engine = GroupShardedPackingEngine::Create(ring, matrix.groups(), std::move(shards));
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*split)->set_packing_engine(*std::move(engine));
  EXPECT_EQ((*split)->packing_engine().name(), "cpu x 2");
  auto client = PackedSimpleClient::Create((*split)->config());
  ASSERT_TRUE(client.ok());
  const he::GaloisKeys keys = *(*split)->ParseKeys((*client)->expansion_keys());
  for (const uint64_t row : {uint64_t{0}, rows - 1}) {
    const PackedQuery q = *(*client)->MakeQuery(row);
    const auto want = (*whole)->Answer(q.query, q.ciphertext, keys);
    const auto got = (*split)->Answer(q.query, q.ciphertext, keys);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want);
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE((*client)->Decode(q, *got, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + row * record_bytes,
                                           records.begin() + (row + 1) * record_bytes));
  }
  EXPECT_FALSE(matrix.Groups(ring, 1, 2).ok());
  EXPECT_FALSE(matrix.Groups(ring, 0, 0).ok());
}

}  // namespace
}  // namespace veil::lattice
