#include "embedding/torch_table.h"

#include <bit>
#include <memory>
#include <string>

#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/embedding/test_util.h"

namespace veil::embedding {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

TEST(TorchTableTest, EmbeddingWeightRoundTrips) {
  ScratchDir dir;
  torch::manual_seed(1);
  torch::nn::Embedding embedding(7, 5);  // weight requires grad
  const torch::Tensor weight = embedding->weight;
  ASSERT_TRUE(WriteTableFromTensor(weight, dir.File("t"), RowFormat::kFp32, {.epoch = 4}).ok());
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(dir.File("t"));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ((*table)->rows(), 7u);
  ASSERT_EQ((*table)->dim(), 5u);
  EXPECT_EQ((*table)->epoch(), 4u);
  const auto accessor = weight.accessor<float, 2>();
  for (int64_t r = 0; r < 7; ++r) {
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_EQ(std::bit_cast<float>((*table)->row(r)[i]), accessor[r][i]);
    }
  }
}

TEST(TorchTableTest, ConvertsDtypeAndLayout) {
  ScratchDir dir;
  // Half values and a transposed (non-contiguous) view: rows of the table are rows of the view.
  const torch::Tensor base = torch::arange(12, torch::kFloat16).reshape({3, 4});
  const torch::Tensor view = base.t();
  ASSERT_TRUE(WriteTableFromTensor(view, dir.File("t"), RowFormat::kFp16, {}).ok());
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(dir.File("t"));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ((*table)->rows(), 4u);
  std::vector<float> row(3);
  ASSERT_TRUE((*table)->DecodeRow(1, absl::MakeSpan(row)).ok());
  EXPECT_THAT(row, ::testing::ElementsAre(1.0f, 5.0f, 9.0f));
}

TEST(TorchTableTest, RejectsBadTensors) {
  ScratchDir dir;
  EXPECT_THAT(
      WriteTableFromTensor(torch::zeros({4}), dir.File("t"), RowFormat::kFp32, {}).message(),
      HasSubstr("2-D"));
  EXPECT_THAT(
      WriteTableFromTensor(torch::zeros({2, 2}, torch::kInt32), dir.File("t"), RowFormat::kFp32, {})
          .message(),
      HasSubstr("floating point"));
  EXPECT_THAT(
      WriteTableFromTensor(torch::zeros({0, 3}), dir.File("t"), RowFormat::kFp32, {}).message(),
      HasSubstr("[0, 3]"));
  EXPECT_THAT(WriteTableFromTensor(torch::Tensor(), dir.File("t"), RowFormat::kFp32, {}).message(),
              HasSubstr("2-D"));
  EXPECT_TRUE(dir.Entries().empty());
}

}  // namespace
}  // namespace veil::embedding
