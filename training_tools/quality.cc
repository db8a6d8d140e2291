#include "training_tools/quality.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

namespace veil::training {
namespace {

double Mean(absl::Span<const double> values) {
  return values.empty() ? 0.0 : std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

// Sample standard deviation (n − 1); 0 for fewer than two values.
double StandardDeviation(absl::Span<const double> values) {
  if (values.size() < 2) return 0;
  const double mean = Mean(values);
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

}  // namespace

const char* MetricName(Metric metric) {
  switch (metric) {
    case Metric::kAuc:
      return "auc";
    case Metric::kPerplexity:
      return "perplexity";
    case Metric::kFetchedShare:
      return "fetched_share";
  }
  return "unknown";
}

bool HigherIsBetter(Metric metric) { return metric != Metric::kPerplexity; }

double DefaultTolerance(Metric metric) {
  switch (metric) {
    case Metric::kAuc:
      return 0.005;
    case Metric::kPerplexity:
      return 0.02;
    case Metric::kFetchedShare:
      return 0.01;
  }
  return 0;
}

double QualityLoss(Metric metric, double reference, double quality) {
  if (metric == Metric::kPerplexity) return quality / reference - 1;
  return reference - quality;
}

double QualityAtLoss(Metric metric, double reference, double loss) {
  if (metric == Metric::kPerplexity) return reference * (1 + loss);
  return reference - loss;
}

ArmScorer::ArmScorer(const ExampleSet& examples, absl::Span<const double> outcomes)
    : metric_(examples.metric) {
  const size_t n = outcomes.size();
  if (metric_ != Metric::kAuc) {
    cluster_outcome_.assign(examples.clusters, 0);
    cluster_target_.assign(examples.clusters, 0);
    for (size_t i = 0; i < n; ++i) {
      cluster_outcome_[examples.cluster[i]] += outcomes[i];
      cluster_target_[examples.cluster[i]] += examples.target[i];
    }
    return;
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return outcomes[a] != outcomes[b] ? outcomes[a] < outcomes[b] : a < b;
  });
  sorted_.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = order[k];
    const bool last = k + 1 == n || outcomes[order[k + 1]] != outcomes[i];
    sorted_[k] = static_cast<uint32_t>(examples.cluster[i]) << 2 |
                 (examples.target[i] > 0.5 ? 2u : 0u) | (last ? 1u : 0u);
  }
}

double ArmScorer::Score(absl::Span<const uint32_t> cluster_weights) const {
  const bool unweighted = cluster_weights.empty();
  if (metric_ != Metric::kAuc) {
    double outcome = 0, target = 0;
    for (size_t c = 0; c < cluster_outcome_.size(); ++c) {
      const double w = unweighted ? 1.0 : cluster_weights[c];
      outcome += w * cluster_outcome_[c];
      target += w * cluster_target_[c];
    }
    const double ratio = target > 0 ? outcome / target : 0;
    return metric_ == Metric::kPerplexity ? std::exp(ratio) : ratio;
  }
  // Rank-sum AUC with weights: each positive counts the negatives scored below it, and half of
  // those tied with it.
  double sum = 0, negatives_below = 0, positives = 0;
  double tie_positives = 0, tie_negatives = 0;
  for (uint32_t packed : sorted_) {
    const double w = unweighted ? 1.0 : cluster_weights[packed >> 2];
    (packed & 2u ? tie_positives : tie_negatives) += w;
    if (packed & 1u) {
      sum += tie_positives * (negatives_below + 0.5 * tie_negatives);
      negatives_below += tie_negatives;
      positives += tie_positives;
      tie_positives = tie_negatives = 0;
    }
  }
  if (positives == 0 || negatives_below == 0) return 0.5;
  return sum / (positives * negatives_below);
}

BootstrapReplicates::BootstrapReplicates(int32_t clusters, int replicates, uint64_t seed)
    : clusters_(clusters),
      replicates_(replicates),
      weights_(static_cast<size_t>(clusters) * replicates, 0) {
  std::mt19937_64 rng(seed);
  for (int b = 0; b < replicates; ++b) {
    uint32_t* w = &weights_[static_cast<size_t>(b) * clusters];
    for (int32_t draw = 0; draw < clusters; ++draw) {
      // Lemire's multiply-shift: uniform in [0, clusters), the same on every standard library.
      ++w[static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * clusters) >> 64)];
    }
  }
}

double Estimate::se() const { return std::sqrt(se_examples * se_examples + se_seeds * se_seeds); }

Estimate Combine(absl::Span<const double> per_seed, absl::Span<const double> replicate_means) {
  Estimate e;
  e.value = Mean(per_seed);
  e.se_examples = StandardDeviation(replicate_means);
  e.se_seeds = StandardDeviation(per_seed) / std::sqrt(static_cast<double>(per_seed.size()));
  const double seed_variance = e.se_seeds * e.se_seeds;
  if (seed_variance > 0) {
    const double total = seed_variance + e.se_examples * e.se_examples;
    e.df = total * total / (seed_variance * seed_variance / (per_seed.size() - 1));
  }
  const double half = StudentT975(e.df) * e.se();
  e.low = e.value - half;
  e.high = e.value + half;
  return e;
}

double StudentT975(double df) {
  static constexpr std::array<double, 31> kSmall = {
      0,      12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
      2.2010, 2.1788,  2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
      2.0739, 2.0687,  2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  // Beyond 30: (df, quantile) down to df = infinity (1/df = 0).
  static constexpr std::array<std::pair<double, double>, 5> kLarge = {
      {{30, 2.0423}, {40, 2.0211}, {60, 2.0003}, {120, 1.9799}, {1e300, 1.9600}}};
  if (!(df > 1)) return kSmall[1];
  auto between = [](double x, double x0, double y0, double x1, double y1) {
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  };
  if (df <= 30) {
    const int lower = static_cast<int>(df);
    if (lower == 30) return kSmall[30];
    return between(1 / df, 1.0 / lower, kSmall[lower], 1.0 / (lower + 1), kSmall[lower + 1]);
  }
  for (size_t i = 1; i < kLarge.size(); ++i) {
    if (df <= kLarge[i].first) {
      const double upper_inverse = i + 1 == kLarge.size() ? 0 : 1 / kLarge[i].first;
      return between(1 / df, 1 / kLarge[i - 1].first, kLarge[i - 1].second, upper_inverse,
                     kLarge[i].second);
    }
  }
  return kLarge.back().second;
}

PairedEvaluation::PairedEvaluation(const ExampleSet& examples, std::vector<Outcomes> reference,
                                   int replicates, uint64_t bootstrap_seed)
    : examples_(examples),
      reference_outcomes_(std::move(reference)),
      replicates_(examples.clusters, replicates, bootstrap_seed) {
  const int seeds = static_cast<int>(reference_outcomes_.size());
  std::vector<double> means(replicates_.size(), 0);
  reference_replicate_.resize(seeds);
  for (int s = 0; s < seeds; ++s) {
    const ArmScorer scorer(examples_, reference_outcomes_[s]);
    reference_full_.push_back(scorer.Score({}));
    for (int b = 0; b < replicates_.size(); ++b) {
      reference_replicate_[s].push_back(scorer.Score(replicates_.weights(b)));
      means[b] += reference_replicate_[s][b] / seeds;
    }
  }
  reference_ = Combine(reference_full_, means);
}

PairedEvaluation::ArmResult PairedEvaluation::Evaluate(const std::vector<Outcomes>& arm) const {
  const int seeds = static_cast<int>(arm.size());
  const int replicates = replicates_.size();
  const Metric metric = examples_.metric;
  std::vector<double> quality(seeds), loss(seeds);
  std::vector<double> quality_means(replicates, 0), loss_means(replicates, 0);
  std::vector<double> seed_losses(replicates);
  ArmResult result;
  for (int s = 0; s < seeds; ++s) {
    const ArmScorer scorer(examples_, arm[s]);
    quality[s] = scorer.Score({});
    loss[s] = QualityLoss(metric, reference_full_[s], quality[s]);
    for (int b = 0; b < replicates; ++b) {
      const double q = scorer.Score(replicates_.weights(b));
      seed_losses[b] = QualityLoss(metric, reference_replicate_[s][b], q);
      quality_means[b] += q / seeds;
      loss_means[b] += seed_losses[b] / seeds;
    }
    result.loss_high_per_seed.push_back(loss[s] +
                                        StudentT975(INFINITY) * StandardDeviation(seed_losses));
  }
  result.quality = Combine(quality, quality_means);
  result.loss = Combine(loss, loss_means);
  result.loss_per_seed = loss;
  return result;
}

double QualityModel::Evaluate(const std::vector<std::vector<int32_t>>& missing) const {
  std::vector<ExampleQuery> queries;
  for (size_t i = 0; i < missing.size(); ++i) {
    queries.push_back({static_cast<int32_t>(i), &missing[i]});
  }
  ExampleSet examples;
  examples.metric = metric();
  examples.target = Targets();
  examples.target.resize(missing.size());
  examples.cluster.assign(missing.size(), 0);
  examples.clusters = 1;
  return ArmScorer(examples, Score(queries)).Score({});
}

}  // namespace veil::training
