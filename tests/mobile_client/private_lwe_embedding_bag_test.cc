// PrivateEmbeddingBag over one LWE server (lwe-simple, lwe-double, lwe-exppack-s, lwe-hybrid; the
// client path of lwe-exppack-d is the same, and it expands one ciphertext per row byte: too slow
// for this many rows, tested in lwe_pack_rpc_test): the same bags as
// torch::nn::functional::embedding_bag over the plaintext fp32 table, bit for bit, with the
// distinct rows of each inference padded to a multiple of pad_rows queries.
#include <torch/torch.h>

#include <cstring>

#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/private_embedding_bag.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::LweClient;
using client::PrivateEmbeddingBag;
using client::PrivateEmbeddingBagOptions;
using ::testing::HasSubstr;
namespace F = torch::nn::functional;

constexpr int64_t kRows = 90;
constexpr int64_t kDim = 5;

class PrivateLweEmbeddingBagTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("lwe_bag.veil", embedding::RowFormat::kFp32, kRows, kDim,
                                          31, 1, nullptr);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    weight_ = torch::empty({kRows, kDim});
    for (int64_t r = 0; r < kRows; ++r) {
      std::memcpy(weight_[r].data_ptr<float>(), (*table)->row(r).data(), sizeof(float) * kDim);
    }
    auto server = testing::StartLweServer(*path, GetParam());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client::LweClientOptions options;
    options.server = server_->address();
    options.protocol = GetParam();
    auto connected = LweClient::Connect(options);
    ASSERT_TRUE(connected.ok()) << connected.status();
    client_ = std::shared_ptr<LweClient>(std::move(*connected));
  }

  torch::Tensor weight_;
  std::unique_ptr<tools::ServerProcess> server_;
  std::shared_ptr<LweClient> client_;
};

TEST_P(PrivateLweEmbeddingBagTest, PoolsLikeEmbeddingBagBitForBitWithPaddedQueries) {
  PrivateEmbeddingBag sum_bag(PrivateEmbeddingBagOptions(kRows, kDim).mode(torch::kSum), client_,
                              torch::Tensor(), /*pad_rows=*/8);
  // 1-D input with offsets, weights; rows repeated and at both ends of the table.
  torch::Tensor input = torch::tensor({0, 89, 89, 7, 3, 44}, torch::kInt64);
  torch::Tensor offsets = torch::tensor({0, 3, 5}, torch::kInt64);
  torch::Tensor weights = torch::tensor({0.5f, -1.f, 2.f, 1.f, 0.25f, 3.f});
  torch::Tensor got = sum_bag->forward(input, offsets, weights);
  torch::Tensor want = F::embedding_bag(
      input, weight_,
      F::EmbeddingBagFuncOptions().offsets(offsets).mode(torch::kSum).per_sample_weights(weights));
  EXPECT_TRUE(torch::equal(got, want)) << got << want;
  EXPECT_FALSE(sum_bag->last_missing_mask().any().item<bool>());
  EXPECT_EQ(sum_bag->last_call().keys, 8u);  // 5 distinct rows, padded to 8 queries

  // 2-D input, mean; 11 distinct rows: 16 queries.
  PrivateEmbeddingBag mean_bag(PrivateEmbeddingBagOptions(kRows, kDim), client_, torch::Tensor(),
                               8);
  torch::Tensor rows = torch::tensor({{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 1}}, torch::kInt64);
  EXPECT_TRUE(torch::equal(
      mean_bag->forward(rows),
      F::embedding_bag(rows, weight_, F::EmbeddingBagFuncOptions().mode(torch::kMean))));
  EXPECT_EQ(mean_bag->last_call().keys, 16u);

  // Single rows out of one fetch (Embed), as a model does for a candidate row.
  auto fetched = mean_bag->Fetch({42, 17});
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  torch::Tensor one = torch::tensor({17, 42, 17}, torch::kInt64);
  EXPECT_TRUE(torch::equal(mean_bag->Embed(*fetched, one), F::embedding(one, weight_)));
}

TEST_P(PrivateLweEmbeddingBagTest, BadArgumentsAreClearErrors) {
  PrivateEmbeddingBag bag(PrivateEmbeddingBagOptions(kRows, kDim), client_, torch::Tensor(), 4);
  auto outside = bag->Fetch({3, kRows});
  EXPECT_TRUE(absl::IsInvalidArgument(outside.status())) << outside.status();
  EXPECT_THAT(outside.status().message(), HasSubstr("row 90 outside [0, 90)"));
  EXPECT_THROW(bag->forward(torch::tensor({{-1, 2}}, torch::kInt64)), c10::Error);
  try {
    PrivateEmbeddingBag wrong(PrivateEmbeddingBagOptions(kRows, kDim + 1), client_, torch::Tensor(),
                              4);
    FAIL() << "a module of another shape was built";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the server's table (90 x 5) is not 90 x 6"));
  }
  EXPECT_THROW(
      PrivateEmbeddingBag(PrivateEmbeddingBagOptions(kRows, kDim), client_, torch::Tensor(), 0),
      c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Protocols, PrivateLweEmbeddingBagTest,
                         ::testing::Values("lwe-simple", "lwe-double", "lwe-exppack-s",
                                           "lwe-hybrid"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "lwe-simple"      ? std::string("Simple")
                                  : info.param == "lwe-double"    ? std::string("Double")
                                  : info.param == "lwe-exppack-s" ? std::string("ExpPackS")
                                                                  : std::string("Hybrid");
                         });

}  // namespace
}  // namespace veil
