// Where co-design starts to pay. With every row reachable, each inference scans every row at
// least once (each table is queried at least once, and a query scans its whole bin), so a layout
// cuts computation only where plain batch PIR needs more than one scan to keep the model's
// quality. How much a hot table costs on top of that one scan shrinks as the table grows (the
// popular rows are a smaller share of it). The synthetic generator fitted to the same log
// (synthetic.h) makes larger tables of the same popularity and co-access; a sweep of each, with
// the fetched share that kept the model's quality as the bar, finds the size from which the
// co-designed layout needs `goal` times less computation than plain batch PIR.
#ifndef VEIL_TRAINING_TOOLS_PAYOFF_H_
#define VEIL_TRAINING_TOOLS_PAYOFF_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training_tools/sweep.h"
#include "training_tools/synthetic.h"

namespace veil::training {

struct PayoffOptions {
  double bar = 0.99;           // fetched share to keep
  std::vector<int64_t> sizes;  // table rows, increasing
  int64_t requests = 4000;     // validation requests per size (training: 4 times as many)
  double goal = 2;             // computation reduction that counts as paying
  int32_t row_words = 32;
  SweepGrid grid;      // co-location is left out: the profile has no co-access
  SweepOptions sweep;  // budget, threads, placement key (reachable: all)
  uint64_t seed = 1;   // of the generated requests
};

struct PayoffStep {
  int64_t rows = 0;
  std::optional<double> reduction;               // plain batch PIR's words over the chosen layout's
  int64_t chosen_words = 0, baseline_words = 0;  // 0: no preserved point within the budget
};

struct Payoff {
  double bar = 0;
  std::vector<PayoffStep> steps;  // up to the first size reaching the goal
  std::optional<int64_t> rows_at_goal;
};

// Sweeps synthetic tables of options.sizes rows drawn from `fit`, smallest first, stopping at the
// first whose reduction reaches the goal. Returns Sweep's errors, INVALID_ARGUMENT for a size
// outside [1, 2^30].
absl::StatusOr<Payoff> FindPayoff(const SyntheticFit& fit, const PayoffOptions& options);

// The payoff as JSON (",\"payoff\":{...}") and in words.
std::string PayoffJson(const Payoff& payoff);
std::string PayoffInWords(const Payoff& payoff, double goal);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_PAYOFF_H_
