// PrivatePooledEmbeddingBag against a real bfv-bag server: the same bags as
// torch::nn::functional::embedding_bag (2-D input, offsets with empty bags, include_last_offset,
// per_sample_weights, mean), and each value exactly the float of the integer pooled sum.
#include <torch/torch.h>

#include <cmath>

#include "embedding/table.h"
#include "gtest/gtest.h"
#include "mobile_client/private_embedding_bag.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::BagClient;
using client::PrivatePooledEmbeddingBag;
using client::PrivatePooledEmbeddingBagOptions;
namespace F = torch::nn::functional;

constexpr int64_t kRows = 120;
constexpr int64_t kDim = 6;

class PrivatePooledEmbeddingBagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path =
        testing::WriteRandomTable("pooled.veil", embedding::RowFormat::kFixed32, kRows, kDim, 21);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
    weight_ = torch::empty({kRows, kDim});
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < kDim; ++j) {
        weight_[r][j] = std::ldexp(static_cast<int32_t>(table_->row(r)[j]), -16);
      }
    }
    auto server = testing::StartBagServer(*path);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client::BagClientOptions options;
    options.server = server_->address();
    auto connected = BagClient::Connect(options);
    ASSERT_TRUE(connected.ok()) << connected.status();
    client_ = std::shared_ptr<BagClient>(std::move(*connected));
  }

  // Bag b of rows [bounds[b], bounds[b+1]) of `rows`: the exact integer sum, as a float.
  float ExactSum(const std::vector<int64_t>& rows, const std::vector<double>& weights,
                 int weight_bits, int64_t from, int64_t to, int64_t j, double divisor) const {
    int64_t sum = 0;
    for (int64_t i = from; i < to; ++i) {
      const int64_t w = weights.empty() ? 1 : std::llround(std::ldexp(weights[i], weight_bits));
      sum += w * static_cast<int32_t>(table_->row(rows[i])[j]);
    }
    return static_cast<float>(std::ldexp(static_cast<double>(sum), -16 - weight_bits) / divisor);
  }

  std::unique_ptr<embedding::Table> table_;
  torch::Tensor weight_;
  std::unique_ptr<tools::ServerProcess> server_;
  std::shared_ptr<BagClient> client_;
};

TEST_F(PrivatePooledEmbeddingBagTest, PoolsLikeEmbeddingBagAndExactly) {
  PrivatePooledEmbeddingBag mean_bag(
      PrivatePooledEmbeddingBagOptions(kRows, kDim).mode(torch::kMean), client_);
  // 2-D input: three bags of two rows (one repeated).
  torch::Tensor input = torch::tensor({{3, 7}, {119, 0}, {5, 5}}, torch::kInt64);
  torch::Tensor got = mean_bag->forward(input);
  torch::Tensor want =
      F::embedding_bag(input, weight_, F::EmbeddingBagFuncOptions().mode(torch::kMean));
  EXPECT_TRUE(torch::allclose(got, want, 1e-6, 1e-6));
  std::vector<int64_t> flat = {3, 7, 119, 0, 5, 5};
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t j = 0; j < kDim; ++j) {
      EXPECT_EQ(got[b][j].item<float>(), ExactSum(flat, {}, 0, 2 * b, 2 * b + 2, j, 2.0));
    }
  }
  EXPECT_EQ(mean_bag->last_call().lookups, 3u);

  // 1-D with offsets, an empty bag, include_last_offset, per_sample_weights.
  PrivatePooledEmbeddingBag sum_bag(
      PrivatePooledEmbeddingBagOptions(kRows, kDim).mode(torch::kSum).include_last_offset(true),
      client_);
  flat = {10, 11, 12, 40, 10};
  const std::vector<double> weights = {0.5, -1.25, 3.0, 0.001, 2.0};
  torch::Tensor input1 = torch::tensor(flat, torch::kInt64);
  torch::Tensor offsets = torch::tensor({0, 3, 3, 5}, torch::kInt64);
  torch::Tensor psw = torch::tensor(weights, torch::kFloat32);
  got = sum_bag->forward(input1, offsets, psw);
  want = F::embedding_bag(input1, weight_,
                          F::EmbeddingBagFuncOptions()
                              .offsets(offsets)
                              .mode(torch::kSum)
                              .per_sample_weights(psw)
                              .include_last_offset(true));
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-4));
  // The float weights as torch holds them (float32), rounded to 16 fractional bits.
  std::vector<double> held(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) held[i] = static_cast<float>(weights[i]);
  for (int64_t j = 0; j < kDim; ++j) {
    EXPECT_EQ(got[0][j].item<float>(), ExactSum(flat, held, 16, 0, 3, j, 1.0));
    EXPECT_EQ(got[1][j].item<float>(), 0.0f);  // the empty bag
    EXPECT_EQ(got[2][j].item<float>(), ExactSum(flat, held, 16, 3, 5, j, 1.0));
  }
}

TEST_F(PrivatePooledEmbeddingBagTest, RefusesWhatTheServerCannotPool) {
  EXPECT_THROW(PrivatePooledEmbeddingBag(
                   PrivatePooledEmbeddingBagOptions(kRows, kDim).mode(torch::kMax), client_),
               c10::Error);
  EXPECT_THROW(
      PrivatePooledEmbeddingBag(PrivatePooledEmbeddingBagOptions(kRows + 1, kDim), client_),
      c10::Error);
  PrivatePooledEmbeddingBag bag(PrivatePooledEmbeddingBagOptions(kRows, kDim), client_);
  torch::Tensor input = torch::tensor({{int64_t{1}, kRows}}, torch::kInt64);
  EXPECT_THROW(bag->forward(input), c10::Error);
  EXPECT_THROW(bag->forward(torch::tensor({{1, 2}}, torch::kInt64), {},
                            torch::ones({1, 2})),  // weights need mode sum
               c10::Error);
}

}  // namespace
}  // namespace veil
