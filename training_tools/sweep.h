// The co-design sweep: every layout of a grid is planned on the validation requests with the
// client's planner, scored by one model per training seed, and the cheapest layout whose quality
// is preserved — the non-inferiority test of quality.h — is chosen under a reachability policy.
//
// Speed: a layout changes a model's inputs only through the rows each example misses, so the
// sweep collects every example's distinct missing-row sets over all layouts, has each model score
// every (example, set) once, and evaluates each layout from those cached outcomes. Layouts are
// planned and evaluated on `threads` threads; the results do not depend on the thread count.
#ifndef VEIL_TRAINING_TOOLS_SWEEP_H_
#define VEIL_TRAINING_TOOLS_SWEEP_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "embedding/layout.h"
#include "pir/batch/planner.h"
#include "training_tools/profile.h"
#include "training_tools/quality.h"

namespace veil::training {

// Whether layouts may leave a table unqueried (0 rounds), making its rows unreachable: never
// (kAll, the default: every table is queried at least once per inference), or on request
// (kOptIn, --allow_unreachable_rows: such layouts are marked everywhere).
enum class ReachablePolicy { kAll, kOptIn };
const char* ReachablePolicyName(ReachablePolicy policy);  // "all", "opt-in"

// Rows never looked up in the training split have untrained embeddings. kDefault: the client
// uses the default row for them without fetching (the list is published with the layout, like
// the hot rows) in every arm, the reference included; kFetch: they are wanted like any row.
enum class UnseenRowsPolicy { kDefault, kFetch };
const char* UnseenRowsPolicyName(UnseenRowsPolicy policy);  // "default", "fetch"
// Returns INVALID_ARGUMENT for a name other than "default" or "fetch".
absl::StatusOr<UnseenRowsPolicy> ParseUnseenRowsPolicy(absl::string_view name);

struct SweepGrid {
  std::vector<double> hot_fractions;
  std::vector<int32_t> hot_bins, hot_rounds, cold_bins, cold_rounds, colocations;
  // The full grid, or a small one for --quick.
  static SweepGrid Default(bool quick);
};

// Whether `choice`, on a table of `num_rows` rows, gives 0 rounds to a table that holds rows.
bool LeavesATableUnqueried(const LayoutChoice& choice, int32_t num_rows);

// The validation requests the models score, and who makes each (user, document): the bootstrap
// draws clients.
struct ValidationSet {
  std::vector<RowRequest> requests;
  std::vector<int32_t> clients;
};

struct SweepOptions {
  std::array<uint8_t, 16> seed{};  // the layouts' public placement key
  double backend_words_per_s = 0;
  int64_t max_bytes_per_inference = 300 * 1000;
  ReachablePolicy reachable = ReachablePolicy::kAll;
  UnseenRowsPolicy unseen = UnseenRowsPolicy::kDefault;
  double tolerance = 0;             // non-inferiority margin; 0: DefaultTolerance(metric)
  double min_fetched_share = 0.99;  // without models (metric: fetched share): 1 − tolerance
  int bootstrap_replicates = 500;
  uint64_t bootstrap_seed = 1;
  // A claim needs the embeddings' worth (all rows against none) to be at least this many
  // standard errors, with its interval above the tolerance.
  double min_worth_in_se = 3;
  int threads = 1;
  std::function<void(const char* stage, size_t done, size_t total)> progress;
};

struct SweepPoint {
  LayoutChoice choice;
  batch::PlanCost cost;  // per inference, the same for every request
  double latency_ms = 0;
  double fetched_share = 0;   // wanted rows fetched / wanted rows (unseen rows under kDefault
                              // are not wanted)
  double complete_share = 0;  // requests with nothing missing
  bool reachable = true;      // every table with rows is queried
  double unreachable_client_share = 0;   // clients with a wanted row in no queried table
  Estimate quality;                      // the metric, mean over seeds, with its interval
  Estimate loss;                         // paired loss against fetching every wanted row
  std::vector<bool> preserved_per_seed;  // each seed's model on its own (examples' interval)
  bool baseline = false;   // plain batch PIR: random bins, no hot table, no co-location
  bool preserved = false;  // loss.high <= tolerance
  bool pareto = false;     // no eligible point is at least as good in quality, words and bytes
  int64_t bytes() const { return cost.upload_bytes + cost.download_bytes; }
};

struct SweepResult {
  Metric metric = Metric::kFetchedShare;
  int seeds = 0;
  double tolerance = 0;
  ReachablePolicy reachable = ReachablePolicy::kAll;
  UnseenRowsPolicy unseen = UnseenRowsPolicy::kDefault;
  int64_t unseen_rows = 0;         // rows never looked up in training
  double unseen_wanted_share = 0;  // of the validation requests' wanted rows
  double unseen_client_share = 0;  // clients wanting at least one
  int64_t one_scan_words = 0;      // rows × row words: what every reachable layout scans
  Estimate reference;              // every wanted row fetched
  Estimate no_rows;                // no row fetched
  Estimate worth;                  // loss of no_rows: what the embeddings are worth
  std::vector<double> reference_per_seed, worth_per_seed;  // each model's
  bool claim_supported = false;
  std::string claim_note;  // why a claim is or is not supported, in words
  std::vector<SweepPoint> points;
  int chosen = -1;    // cheapest preserved point the policy allows, within the byte budget
  int baseline = -1;  // cheapest preserved baseline point within the byte budget
  int chosen_all_reachable = -1;  // cheapest preserved point leaving no table unqueried
  std::vector<int> chosen_per_seed, baseline_per_seed;  // the same choices, one model each

  // Words scanned by the baseline over the chosen point, when the claim is supported and both
  // exist (computed between points the same policy allows).
  std::optional<double> Reduction() const;
  std::optional<double> ReductionAllReachable() const;
  std::vector<std::optional<double>> ReductionPerSeed() const;
  // Whether the cheapest preserved baseline already scans every row just once (one round over its
  // bins): with every row reachable, no layout scans less (co-design cannot cut computation).
  bool OneScanIsTheFloor() const;
  // The fetched share the models need with random bins (where the missing rows are random ones):
  // midway between the largest fetched share of a baseline point that lost quality and the
  // smallest of one that kept it (that smallest share if none lost quality below it; 0 if no
  // baseline kept quality). Midway, so that a bar does not sit on a real layout's share.
  double FetchedShareBar() const;
};

// Evaluates every grid point the policy allows (layouts from `profile`) on `validation` with one
// model per seed; without models the metric is the fetched share. Every model must score
// validation.requests.size() examples. Returns INVALID_ARGUMENT for models of different metrics
// or a validation set whose clients do not match its requests, and DesignLayout's and the
// planner's errors.
absl::StatusOr<SweepResult> Sweep(const AccessProfile& profile, int32_t row_words,
                                  const ValidationSet& validation, const SweepGrid& grid,
                                  const SweepOptions& options,
                                  absl::Span<QualityModel* const> models);

// Evaluates the layouts layout_of(i), described by choices[i] (i < choices.size()), like Sweep.
// `profile` tells which rows were never seen in training. Same errors, and layout_of's.
absl::StatusOr<SweepResult> EvaluateLayouts(
    const AccessProfile& profile, int32_t row_words, const std::vector<LayoutChoice>& choices,
    const std::function<absl::StatusOr<embedding::Layout>(size_t)>& layout_of,
    const ValidationSet& validation, const SweepOptions& options,
    absl::Span<QualityModel* const> models);

// The knobs of an existing layout (its hot share of the rows, bins, rounds and co-location).
LayoutChoice ChoiceOf(const embedding::Layout& layout);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_SWEEP_H_
