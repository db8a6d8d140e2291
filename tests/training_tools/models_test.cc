// Training is bit-reproducible: the same workload, options and seed give the same parameters and
// metric, in one process or many, whatever torch's thread count. Small runs of the real models
// (the batch and model shapes of `veil-codesign`, few batches) on the real data.
#include "training_tools/models.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "training_tools/recommender.h"
#include "training_tools/workload.h"

namespace veil::training {
namespace {

const Workload& LoadPreset(const std::string& preset) {
  static auto* workloads = new std::map<std::string, Workload>;
  auto it = workloads->find(preset);
  if (it == workloads->end()) {
    WorkloadOptions options;
    options.preset = preset;
    options.data_dir = std::string(VEIL_SOURCE_DIR) + "/data";
    auto loaded = LoadWorkload(options);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    it = workloads->emplace(preset, loaded.ok() ? std::move(*loaded) : Workload{}).first;
  }
  return it->second;
}

// `veil-codesign`'s options for the preset, cut to a few batches.
TrainOptions SmallRun(const std::string& preset, uint64_t seed, int threads) {
  TrainOptions options;
  options.epochs = 1;
  options.seed = seed;
  options.threads = threads;
  if (preset == "brown") {
    options.batch_size = 64;
    options.hidden = 64;
    options.learning_rate = 5e-3;
    options.max_train_examples = 256;
    options.max_validation_examples = 64;
  } else {
    options.max_train_examples = 4096;
    options.max_validation_examples = 2000;
  }
  return options;
}

struct Trained {
  std::unique_ptr<WorkloadModel> model;
  torch::OrderedDict<std::string, torch::Tensor> parameters;
  double metric = 0;  // validation metric with every row fetched
};

Trained Train(const std::string& preset, uint64_t seed, int threads) {
  auto model = TrainModel(LoadPreset(preset), SmallRun(preset, seed, threads));
  EXPECT_TRUE(model.ok()) << model.status();
  Trained trained;
  if (!model.ok()) return trained;
  trained.model = std::move(*model);
  trained.parameters = TrainedParameters(*trained.model);
  trained.metric = trained.model->Evaluate(
      std::vector<std::vector<int32_t>>(trained.model->evaluated_requests().size()));
  return trained;
}

// Every parameter and the metric bit for bit (`what` names the runs in failure messages).
void ExpectSameModel(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.parameters.size(), b.parameters.size()) << what;
  for (const auto& item : a.parameters) {
    const torch::Tensor* other = b.parameters.find(item.key());
    ASSERT_NE(other, nullptr) << what << ": " << item.key();
    EXPECT_TRUE(torch::equal(item.value(), *other)) << what << ": " << item.key() << " differs";
  }
  EXPECT_EQ(a.metric, b.metric) << what;
}

class ModelsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelsTest, SameSeedGivesTheSameModel) {
  const Trained first = Train(GetParam(), 1, 2);
  const Trained second = Train(GetParam(), 1, 2);
  ASSERT_FALSE(first.parameters.is_empty());
  ExpectSameModel(first, second, "two runs with seed 1");
}

TEST_P(ModelsTest, DifferentSeedGivesADifferentModel) {
  const Trained seed1 = Train(GetParam(), 1, 2);
  const Trained seed2 = Train(GetParam(), 2, 2);
  ASSERT_FALSE(seed1.parameters.is_empty());
  for (const auto& item : seed1.parameters) {
    const torch::Tensor* other = seed2.parameters.find(item.key());
    ASSERT_NE(other, nullptr) << item.key();
    EXPECT_FALSE(torch::equal(item.value(), *other)) << item.key() << " same for seeds 1 and 2";
  }
  EXPECT_NE(seed1.metric, seed2.metric);
}

TEST_P(ModelsTest, SameModelForAnyThreadCount) {
  const Trained two = Train(GetParam(), 1, 2);
  ASSERT_FALSE(two.parameters.is_empty());
  for (int threads : {1, 3}) {
    ExpectSameModel(two, Train(GetParam(), 1, threads), "2 threads vs " + std::to_string(threads));
  }
}

TEST_P(ModelsTest, ModelsTrainedSideBySideEqualModelsTrainedAlone) {
  TrainOptions options = SmallRun(GetParam(), 1, 2);
  auto together = TrainModels(LoadPreset(GetParam()), options, {1, 2, 3});
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->size(), 3u);
  for (uint64_t seed : {1, 3}) {
    Trained side_by_side;
    side_by_side.parameters = TrainedParameters(*(*together)[seed - 1]);
    side_by_side.metric = (*together)[seed - 1]->Evaluate(
        std::vector<std::vector<int32_t>>((*together)[seed - 1]->evaluated_requests().size()));
    ExpectSameModel(side_by_side, Train(GetParam(), seed, 2), "seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, ModelsTest, ::testing::Values("movielens", "brown"),
                         [](const auto& info) { return info.param; });

// The language model's plain C++ forward pass (language_scorer.h) against torch's, on validation
// windows with random rows missing (printed seed): the same negative log-likelihoods up to float
// rounding.
TEST(LanguageScorerTest, FastLanguageScoresMatchTorch) {
  const Trained trained = Train("brown", 1, 2);
  ASSERT_NE(trained.model, nullptr);
  const auto& requests = trained.model->evaluated_requests();
  std::mt19937_64 rng(21);
  std::printf("seed 21\n");
  std::vector<std::vector<int32_t>> missing(requests.size());
  std::vector<ExampleQuery> queries;
  for (size_t e = 0; e < requests.size(); ++e) {
    for (int32_t row : requests[e]) {
      if (rng() % 4 == 0) missing[e].push_back(row);  // sorted, as requests are
    }
    queries.push_back({static_cast<int32_t>(e), &missing[e]});
  }
  const Outcomes fast = trained.model->Score(queries);
  auto reference = LanguageOutcomesWithTorch(*trained.model, queries);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(fast.size(), reference->size());
  for (size_t i = 0; i < fast.size(); ++i) {
    EXPECT_NEAR(fast[i], (*reference)[i], 1e-4 * (*reference)[i]) << "window " << i;
  }
  auto recommendation = TrainModel(LoadPreset("movielens"), SmallRun("movielens", 1, 2));
  ASSERT_TRUE(recommendation.ok());
  EXPECT_TRUE(
      absl::IsInvalidArgument(LanguageOutcomesWithTorch(**recommendation, queries).status()));
}

}  // namespace
}  // namespace veil::training
