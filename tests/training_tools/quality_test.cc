// The statistics of quality.h: the weighted metrics against plain references, Student's t, and
// the bootstrap intervals' coverage on cases whose truth is known.
#include "training_tools/quality.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace veil::training {
namespace {

// AUC by its definition: over all (positive, negative) pairs, 1 when the positive scores higher,
// 1/2 on a tie; each example counted weight[i] times.
double PairwiseAuc(const std::vector<double>& scores, const std::vector<double>& labels,
                   const std::vector<uint32_t>& weight) {
  double sum = 0, pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[i] < 0.5 || labels[j] > 0.5) continue;
      const double w = static_cast<double>(weight[i]) * weight[j];
      sum += w * (scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0.0);
      pairs += w;
    }
  }
  return sum / pairs;
}

// `n` examples, half positive; positive scores ~ N(shift, 1), negative ~ N(0, 1): the AUC is
// Φ(shift / √2). Each example is its own client.
ExampleSet Labels(int n) {
  ExampleSet set;
  set.metric = Metric::kAuc;
  for (int i = 0; i < n; ++i) {
    set.target.push_back(i % 2);
    set.cluster.push_back(i);
  }
  set.clusters = n;
  return set;
}

double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(ArmScorerTest, WeightedAucEqualsThePairwiseDefinitionWithTies) {
  std::mt19937_64 rng(5);
  ExampleSet set;
  set.metric = Metric::kAuc;
  std::vector<double> scores;
  for (int i = 0; i < 60; ++i) {
    set.target.push_back(rng() % 3 == 0);
    scores.push_back(static_cast<double>(rng() % 7));  // many ties
    set.cluster.push_back(i % 20);
  }
  set.clusters = 20;
  const ArmScorer scorer(set, scores);
  std::vector<uint32_t> cluster_weights(20), example_weights(60, 1);
  EXPECT_NEAR(scorer.Score({}), PairwiseAuc(scores, set.target, example_weights), 1e-12);
  for (int trial = 0; trial < 5; ++trial) {
    for (auto& w : cluster_weights) w = rng() % 4;
    for (int i = 0; i < 60; ++i) example_weights[i] = cluster_weights[set.cluster[i]];
    EXPECT_NEAR(scorer.Score(cluster_weights), PairwiseAuc(scores, set.target, example_weights),
                1e-12);
  }
}

TEST(ArmScorerTest, PerplexityAndFetchedShareAreRatiosOfSums) {
  ExampleSet set;
  set.metric = Metric::kPerplexity;
  set.target = {10, 20, 30};  // tokens
  set.cluster = {0, 1, 1};
  set.clusters = 2;
  const std::vector<double> nll = {10, 30, 70};
  EXPECT_DOUBLE_EQ(ArmScorer(set, nll).Score({}), std::exp(110.0 / 60));
  const std::vector<uint32_t> twice_first = {2, 1};
  EXPECT_DOUBLE_EQ(ArmScorer(set, nll).Score(twice_first), std::exp(120.0 / 70));
  set.metric = Metric::kFetchedShare;
  EXPECT_DOUBLE_EQ(ArmScorer(set, {5, 10, 15}).Score({}), 0.5);
}

TEST(QualityTest, StudentQuantilesAndLosses) {
  EXPECT_NEAR(StudentT975(1), 12.706, 1e-3);
  EXPECT_NEAR(StudentT975(2), 4.303, 1e-3);
  EXPECT_NEAR(StudentT975(10), 2.228, 1e-3);
  EXPECT_NEAR(StudentT975(45), 2.014, 2e-3);
  EXPECT_NEAR(StudentT975(INFINITY), 1.960, 1e-3);
  EXPECT_GT(StudentT975(3.5), StudentT975(4));
  EXPECT_LT(StudentT975(3.5), StudentT975(3));
  EXPECT_DOUBLE_EQ(QualityLoss(Metric::kAuc, 0.78, 0.77), 0.78 - 0.77);
  EXPECT_NEAR(QualityLoss(Metric::kPerplexity, 100, 102), 0.02, 1e-15);
  EXPECT_DOUBLE_EQ(QualityAtLoss(Metric::kPerplexity, 100, 0.02), 102);
}

TEST(QualityTest, CombineAddsTheSeedVarianceWithItsDegreesOfFreedom) {
  const Estimate same = Combine({0.5, 0.5, 0.5}, {0.49, 0.5, 0.51});
  EXPECT_EQ(same.se_seeds, 0);
  EXPECT_TRUE(std::isinf(same.df));
  EXPECT_NEAR(same.high - same.value, 1.96 * same.se_examples, 1e-3);
  const Estimate spread = Combine({0.48, 0.5, 0.52}, {0.49, 0.5, 0.51});
  EXPECT_NEAR(spread.se_seeds, 0.02 / std::sqrt(3.0), 1e-12);
  EXPECT_LT(spread.df, 10);
  EXPECT_GT(spread.high - spread.value, 1.96 * spread.se());
}

// The bootstrap interval of an AUC covers the true AUC at about its stated rate (95%) over
// repeated draws.
TEST(BootstrapTest, IntervalOfAKnownAucCoversTheTruth) {
  constexpr int kDraws = 200, kExamples = 400, kReplicates = 400;
  const double shift = 1.0, truth = Phi(shift / std::sqrt(2.0));
  const ExampleSet set = Labels(kExamples);
  std::mt19937_64 rng(11);
  std::printf("seed 11: %d draws of %d examples, true AUC %.4f\n", kDraws, kExamples, truth);
  std::normal_distribution<double> normal(0, 1);
  int covered = 0;
  for (int draw = 0; draw < kDraws; ++draw) {
    Outcomes scores;
    for (int i = 0; i < kExamples; ++i) scores.push_back(normal(rng) + (i % 2 ? shift : 0));
    const PairedEvaluation evaluation(set, {scores}, kReplicates, draw + 1);
    covered += evaluation.reference().low <= truth && truth <= evaluation.reference().high;
  }
  const double coverage = static_cast<double>(covered) / kDraws;
  std::printf("coverage %.3f\n", coverage);
  // Binomial(200, 0.95) lies in [0.91, 0.985] with probability > 99.5%.
  EXPECT_GE(coverage, 0.91);
  EXPECT_LE(coverage, 0.985);
}

// The paired interval of a loss covers the true difference at its stated rate, and is narrower
// than the two arms' intervals combined as if independent. Arm B adds N(0, 1) noise to arm A's
// scores: its AUC is Φ(shift / 2).
TEST(BootstrapTest, PairedLossIntervalCoversAKnownDifference) {
  constexpr int kDraws = 200, kExamples = 400, kReplicates = 400;
  const double shift = 1.0;
  const double truth = Phi(shift / std::sqrt(2.0)) - Phi(shift / 2.0);
  const ExampleSet set = Labels(kExamples);
  std::mt19937_64 rng(12);
  std::printf("seed 12: true loss %.4f\n", truth);
  std::normal_distribution<double> normal(0, 1);
  int covered = 0, narrower = 0;
  for (int draw = 0; draw < kDraws; ++draw) {
    Outcomes a, b;
    for (int i = 0; i < kExamples; ++i) {
      a.push_back(normal(rng) + (i % 2 ? shift : 0));
      b.push_back(a.back() + normal(rng));
    }
    const PairedEvaluation evaluation(set, {a}, kReplicates, draw + 1);
    const auto arm = evaluation.Evaluate({b});
    covered += arm.loss.low <= truth && truth <= arm.loss.high;
    narrower += arm.loss.se() < std::hypot(evaluation.reference().se(), arm.quality.se());
    EXPECT_NEAR(arm.loss.value, evaluation.reference().value - arm.quality.value, 1e-12);
  }
  const double coverage = static_cast<double>(covered) / kDraws;
  std::printf("coverage %.3f, narrower than unpaired in %d of %d\n", coverage, narrower, kDraws);
  EXPECT_GE(coverage, 0.91);
  EXPECT_LE(coverage, 0.985);
  EXPECT_EQ(narrower, kDraws);
}

TEST(BootstrapTest, ReplicatesAreDeterministicAndDrawEveryClientOnAverage) {
  const BootstrapReplicates a(50, 300, 7), b(50, 300, 7), c(50, 300, 8);
  double total = 0;
  bool differs = false;
  for (int r = 0; r < 300; ++r) {
    uint32_t sum = 0;
    for (int k = 0; k < 50; ++k) {
      ASSERT_EQ(a.weights(r)[k], b.weights(r)[k]);
      differs = differs || a.weights(r)[k] != c.weights(r)[k];
      sum += a.weights(r)[k];
      total += a.weights(r)[k];
    }
    ASSERT_EQ(sum, 50u);
  }
  EXPECT_TRUE(differs);
  EXPECT_NEAR(total / (300 * 50), 1.0, 1e-12);
}

}  // namespace
}  // namespace veil::training
