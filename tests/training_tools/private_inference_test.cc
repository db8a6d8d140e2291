// The recommendation model on the client, its rows fetched from two real veil-server processes
// through PrivateEmbeddingBag and the batch-PIR planner, against the simulation (planner +
// model with missing rows replaced by the default row) on the same layout and requests.
#include "training_tools/private_inference.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/batch/planner.h"
#include "tests/server/two_servers.h"
#include "training_tools/simulate.h"

namespace veil::training {
namespace {

using client::ClientOptions;

constexpr size_t kRequests = 12;

// 12 users × 40 ratings of 60 items: each user likes the items of one of three groups.
std::string WriteLog() {
  const std::string path = veil::testing::TempPath("log.csv");
  std::ofstream out(path);
  out << "user,item,timestamp,rating\n";
  std::mt19937_64 rng(7);
  for (int user = 0; user < 12; ++user) {
    std::vector<int> items(60);
    for (int i = 0; i < 60; ++i) items[i] = i;
    std::shuffle(items.begin(), items.end(), rng);
    for (int k = 0; k < 40; ++k) {
      const bool liked = items[k] % 3 == user % 3;
      const double rating = liked ? 4.0 + 0.5 * (rng() % 3) : 1.0 + 0.5 * (rng() % 5);
      out << "u" << user << ",i" << items[k] << "," << 1000 * k + user << "," << rating << "\n";
    }
  }
  return path;
}

class PrivateInferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    WorkloadOptions options;
    options.interactions = WriteLog();
    options.columns.label = "rating";
    auto loaded = LoadWorkload(options);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    workload_ = new Workload(std::move(*loaded));
    ASSERT_GE(workload_->validation_samples.size(), kRequests);
    TrainOptions train;
    train.epochs = 2;
    train.threads = 1;
    train.max_validation_examples = kRequests;
    auto model = TrainModel(*workload_, train);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete workload_;
  }

  embedding::Layout MakeLayout(const LayoutChoice& choice) {
    const AccessProfile profile = BuildProfile(workload_->train_requests, workload_->num_rows, 4);
    auto layout = DesignLayout(profile, workload_->row_words, choice, {1, 2, 3});
    EXPECT_TRUE(layout.ok()) << layout.status();
    return *layout;
  }

  // Serves the layout's table from two servers and connects a client.
  std::shared_ptr<Client> Serve(const embedding::Layout& layout) {
    const std::string table = veil::testing::TempPath("layout.veil");
    absl::Status written = WriteLayoutTable(*model_, layout, table);
    EXPECT_TRUE(written.ok()) << written;
    auto servers = veil::testing::StartTwoServers(table, table);
    EXPECT_TRUE(servers.ok()) << servers.status();
    if (!servers.ok()) return nullptr;
    servers_.push_back(std::move(*servers));
    ClientOptions options;
    options.server0 = servers_.back().address(0);
    options.server1 = servers_.back().address(1);
    options.timeout = absl::Seconds(20);
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::shared_ptr<Client>(std::move(*client)) : nullptr;
  }

  std::vector<RowRequest> Requests() const {
    return {model_->evaluated_requests().begin(), model_->evaluated_requests().begin() + kRequests};
  }

  static Workload* workload_;
  static WorkloadModel* model_;
  std::vector<veil::testing::TwoServers> servers_;
};
Workload* PrivateInferenceTest::workload_ = nullptr;
WorkloadModel* PrivateInferenceTest::model_ = nullptr;

// Small bins and one key each: many wanted rows collide; c = 1 serves some through copies.
constexpr LayoutChoice kCollidingLayout = {.hot_fraction = 0.2,
                                           .hot_bins = 4,
                                           .hot_rounds = 1,
                                           .cold_bins = 8,
                                           .cold_rounds = 1,
                                           .colocation = 1};

TEST_F(PrivateInferenceTest, DevicePredictionsEqualTheSimulationWithCollisions) {
  const embedding::Layout layout = MakeLayout(kCollidingLayout);
  auto client = Serve(layout);
  ASSERT_NE(client, nullptr);
  auto device = RunPrivateInference(*model_, *workload_, layout, client, kRequests);
  ASSERT_TRUE(device.ok()) << device.status();

  auto simulation = Simulate(layout, Requests(), 0);
  ASSERT_TRUE(simulation.ok()) << simulation.status();
  auto simulated = PredictRecommendations(*model_, simulation->missing);
  ASSERT_TRUE(simulated.ok()) << simulated.status();

  ASSERT_EQ(device->predictions.size(), kRequests);
  size_t missing = 0;
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(device->missing[i], simulation->missing[i]) << "request " << i;
    EXPECT_NEAR(device->predictions[i], (*simulated)[i], 1e-5) << "request " << i;
    EXPECT_EQ(device->keys[i], batch::CostOf(layout).keys) << "constant keys, request " << i;
    missing += device->missing[i].size();
  }
  EXPECT_GT(missing, 0u) << "the layout should make rows collide";

  // The missing rows matter: fetching everything predicts differently for some request.
  auto all_rows = PredictRecommendations(*model_, std::vector<std::vector<int32_t>>(kRequests));
  ASSERT_TRUE(all_rows.ok());
  double largest_change = 0;
  for (size_t i = 0; i < kRequests; ++i) {
    largest_change = std::max(largest_change, std::abs(double{(*all_rows)[i]} - (*simulated)[i]));
  }
  EXPECT_GT(largest_change, 1e-4);
}

TEST_F(PrivateInferenceTest, DevicePredictionsEqualTheModelWhenEveryRowFits) {
  // One row per bin: every wanted row is fetched.
  const embedding::Layout layout = MakeLayout({.cold_bins = workload_->num_rows, .cold_rounds = 1});
  auto client = Serve(layout);
  ASSERT_NE(client, nullptr);
  auto device = RunPrivateInference(*model_, *workload_, layout, client, kRequests);
  ASSERT_TRUE(device.ok()) << device.status();
  auto expected = PredictRecommendations(*model_, std::vector<std::vector<int32_t>>(kRequests));
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_THAT(device->missing[i], ::testing::IsEmpty());
    EXPECT_NEAR(device->predictions[i], (*expected)[i], 1e-5) << "request " << i;
    EXPECT_EQ(device->keys[i], workload_->num_rows);
  }
  EXPECT_GT(device->bytes_up, 0u);
  EXPECT_GT(device->bytes_down, 0u);
}

// PrivateEmbeddingBag::forward against EmbeddingBag computed by hand from the model's table:
// one plan for the whole input, missing rows (the planner's) replaced by the default row, and
// the mask says which elements those were.
TEST_F(PrivateInferenceTest, EmbeddingBagForwardPoolsFetchedRowsAndMasksMissingOnes) {
  const embedding::Layout layout = MakeLayout(kCollidingLayout);
  auto client = Serve(layout);
  ASSERT_NE(client, nullptr);
  const int32_t dim = workload_->row_words;
  const std::vector<float> table = model_->EmbeddingTable();
  std::vector<float> default_row(dim, 0.0f);
  for (int32_t r = 0; r < workload_->num_rows; ++r) {
    for (int32_t d = 0; d < dim; ++d) default_row[d] += table[r * dim + d] / workload_->num_rows;
  }
  // Three bags over two requests' rows (with a repeated row), and weights.
  const auto requests = Requests();
  std::vector<int64_t> input(requests[0].begin(), requests[0].end());
  const std::vector<int64_t> offsets = {0, 5, static_cast<int64_t>(input.size())};
  input.insert(input.end(), requests[1].begin(), requests[1].end());
  input.push_back(requests[0][0]);
  std::vector<float> weights;
  for (size_t i = 0; i < input.size(); ++i) weights.push_back(0.25f * static_cast<float>(i % 5));

  std::vector<int32_t> distinct(input.begin(), input.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  auto selection = batch::ChooseSlots(layout, distinct);
  ASSERT_TRUE(selection.ok());
  ASSERT_FALSE(selection->missing.empty()) << "the layout should make rows collide";
  auto missing = [&](int64_t row) {
    return std::binary_search(selection->missing.begin(), selection->missing.end(), row);
  };
  auto value = [&](int64_t row, int32_t d) {
    return missing(row) ? default_row[d] : table[row * dim + d];
  };

  for (const std::string mode : {"sum", "mean", "max"}) {
    SCOPED_TRACE(mode);
    const std::vector<float> no_weights;
    auto pooled = PrivateEmbeddingBagForward(client, layout, default_row, input, offsets,
                                             mode == "sum" ? weights : no_weights, mode);
    ASSERT_TRUE(pooled.ok()) << pooled.status();
    EXPECT_EQ(pooled->missing_rows, selection->missing);
    EXPECT_EQ(pooled->call.keys, batch::CostOf(layout).keys);
    ASSERT_EQ(pooled->missing_mask.size(), input.size());
    for (size_t i = 0; i < input.size(); ++i) {
      EXPECT_EQ(pooled->missing_mask[i] != 0, missing(input[i])) << "element " << i;
    }
    ASSERT_EQ(pooled->pooled.size(), offsets.size() * dim);
    for (size_t b = 0; b < offsets.size(); ++b) {
      const size_t end = b + 1 < offsets.size() ? offsets[b + 1] : input.size();
      for (int32_t d = 0; d < dim; ++d) {
        double expected = mode == "max" ? -1e30 : 0;
        for (size_t i = offsets[b]; i < end; ++i) {
          const double v = value(input[i], d);
          if (mode == "max") {
            expected = std::max(expected, v);
          } else {
            expected += mode == "sum" ? v * weights[i] : v;
          }
        }
        if (mode == "mean") expected /= static_cast<double>(end - offsets[b]);
        EXPECT_NEAR(pooled->pooled[b * dim + d], expected, 1e-5) << "bag " << b << " dim " << d;
      }
    }
  }
  EXPECT_EQ(PrivateEmbeddingBagForward(client, layout, default_row, input, offsets, {}, "median")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PrivateEmbeddingBagForward(client, layout, default_row, {workload_->num_rows}, {0}, {}, "sum")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(PrivateInferenceTest, RefusesServersOfAnotherLayout) {
  const embedding::Layout served = MakeLayout({.cold_bins = 8, .cold_rounds = 1});
  const embedding::Layout other = MakeLayout({.cold_bins = 4, .cold_rounds = 2, .colocation = 1});
  auto client = Serve(served);
  ASSERT_NE(client, nullptr);
  auto device = RunPrivateInference(*model_, *workload_, other, client, 1);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
}

}  // namespace
}  // namespace veil::training
