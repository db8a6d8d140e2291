// Quality figures with their uncertainty (issue 11). A model's metric over the validation
// examples is recomputed on bootstrap replicates that resample the examples' clients (a user's
// ratings, a document's windows: examples of one client are not independent, so whole clients are
// drawn), paired between layouts (every layout and the reference are scored on the same
// replicates, so their shared noise cancels in the difference), and combined with the variation
// over training seeds. "Preserved" is a non-inferiority test: the upper end of the 95% interval
// of the paired quality loss is within the tolerance.
//
// Interval: value ± t·√(se_examples² + se_seeds²), where se_examples is the standard deviation of
// the bootstrap replicates of the seed mean, se_seeds the standard deviation over seeds / √K, and
// t Student's 97.5% quantile with Welch–Satterthwaite's degrees of freedom (K − 1 for the seed
// part; the bootstrap part counts as exact). With one seed the interval leaves training
// variation out (se_seeds = 0): reported results use K ≥ 3.
#ifndef VEIL_TRAINING_TOOLS_QUALITY_H_
#define VEIL_TRAINING_TOOLS_QUALITY_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"

namespace veil::training {

enum class Metric { kAuc, kPerplexity, kFetchedShare };

const char* MetricName(Metric metric);  // "auc", "perplexity", "fetched_share"
bool HigherIsBetter(Metric metric);
// Issue 5's margins: AUC 0.005 absolute, perplexity 2% relative; fetched share 0.01 absolute.
double DefaultTolerance(Metric metric);
// The loss of `quality` against `reference` in the tolerance's units: reference − quality for AUC
// and fetched share, quality / reference − 1 for perplexity. Positive = worse.
double QualityLoss(Metric metric, double reference, double quality);
// The quality whose loss against `reference` is `loss` (QualityLoss's inverse).
double QualityAtLoss(Metric metric, double reference, double loss);

// The validation examples' side of a metric.
struct ExampleSet {
  Metric metric = Metric::kAuc;
  // Per example: its label (AUC: 1 = click), the tokens it scores (perplexity), or the rows it
  // wants (fetched share).
  std::vector<double> target;
  // Per example: its client (user, document) in [0, clusters), the unit the bootstrap draws.
  std::vector<int32_t> cluster;
  int32_t clusters = 0;
};

// Per example what a model produced: the logit (AUC), the summed negative log-likelihood of its
// tokens (perplexity), or the wanted rows fetched (fetched share).
using Outcomes = std::vector<double>;

// One arm's metric under any cluster weighting, in O(examples) per weighting (AUC: the scores are
// sorted once; ratio metrics: summed per cluster once).
class ArmScorer {
 public:
  ArmScorer(const ExampleSet& examples, absl::Span<const double> outcomes);
  // The metric with every example counted cluster_weights[its cluster] times (empty: once).
  double Score(absl::Span<const uint32_t> cluster_weights) const;

 private:
  Metric metric_;
  // AUC: per example in increasing score order, cluster << 2 | positive << 1 | last-of-tie-group.
  std::vector<uint32_t> sorted_;
  // Ratio metrics: per cluster the summed outcomes and targets.
  std::vector<double> cluster_outcome_, cluster_target_;
};

// Cluster multiplicities of `replicates` bootstrap replicates, each drawing `clusters` clusters
// with replacement; deterministic for a seed.
class BootstrapReplicates {
 public:
  BootstrapReplicates(int32_t clusters, int replicates, uint64_t seed);
  int size() const { return replicates_; }
  absl::Span<const uint32_t> weights(int replicate) const {
    return absl::MakeConstSpan(weights_).subspan(static_cast<size_t>(replicate) * clusters_,
                                                 clusters_);
  }

 private:
  int32_t clusters_;
  int replicates_;
  std::vector<uint32_t> weights_;
};

// A figure with its 95% interval (see the top of this file).
struct Estimate {
  double value = 0;        // mean over seeds, on every validation example
  double se_examples = 0;  // bootstrap standard deviation of that mean
  double se_seeds = 0;     // standard deviation over seeds / √seeds (0 with one seed)
  double df = std::numeric_limits<double>::infinity();
  double low = 0, high = 0;
  double se() const;
};

// `per_seed`: the figure of each seed on every example; `replicate_means`: per bootstrap
// replicate, its mean over the seeds.
Estimate Combine(absl::Span<const double> per_seed, absl::Span<const double> replicate_means);

// Student's t 97.5% quantile (two-sided 95%) for df ≥ 1 degrees of freedom (infinity: 1.96),
// interpolated in 1/df between tabulated values (error < 0.002).
double StudentT975(double df);

// The paired evaluation of arms (layouts) against the reference arm, over K seeds (models) and
// the same bootstrap replicates for every arm.
class PairedEvaluation {
 public:
  // reference[s]: seed s's outcomes with every wanted row fetched.
  PairedEvaluation(const ExampleSet& examples, std::vector<Outcomes> reference, int replicates,
                   uint64_t bootstrap_seed);

  struct ArmResult {
    Estimate quality;
    Estimate loss;  // paired: QualityLoss(reference, arm) per seed and replicate
    // Per seed, its loss on every example, and the upper end of that loss's 95% interval over
    // examples only (one model's view).
    std::vector<double> loss_per_seed, loss_high_per_seed;
  };
  // arm[s]: seed s's outcomes under the arm. Thread-safe.
  ArmResult Evaluate(const std::vector<Outcomes>& arm) const;

  const Estimate& reference() const { return reference_; }
  const std::vector<double>& reference_per_seed() const { return reference_full_; }
  int seeds() const { return static_cast<int>(reference_outcomes_.size()); }
  Metric metric() const { return examples_.metric; }

 private:
  const ExampleSet& examples_;
  std::vector<Outcomes> reference_outcomes_;
  BootstrapReplicates replicates_;
  std::vector<double> reference_full_;                    // [seed]
  std::vector<std::vector<double>> reference_replicate_;  // [seed][replicate]
  Estimate reference_;
};

// One validation example to score with some of its wanted rows missing.
struct ExampleQuery {
  int32_t example = 0;                            // index among the model's evaluated examples
  const std::vector<int32_t>* missing = nullptr;  // sorted rows replaced by the default row
};

// A model's quality on its validation examples when some looked-up rows are missing (replaced by
// the default row). Implemented by the libtorch models (models.h); sweeps need no torch.
class QualityModel {
 public:
  virtual ~QualityModel() = default;
  virtual Metric metric() const = 0;
  // Per evaluated example, its ExampleSet::target.
  virtual std::vector<double> Targets() const = 0;
  // One outcome per query (see Outcomes). Thread-safe: sweeps call it from several threads at
  // once. An example's outcome does not depend on the other queries of the call.
  virtual Outcomes Score(absl::Span<const ExampleQuery> queries) const = 0;

  // The metric over the first missing.size() evaluated examples, missing[i] missing from the i-th.
  double Evaluate(const std::vector<std::vector<int32_t>>& missing) const;
};

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_QUALITY_H_
