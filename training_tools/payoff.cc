#include "training_tools/payoff.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/layout.h"

namespace veil::training {

absl::StatusOr<Payoff> FindPayoff(const SyntheticFit& fit, const PayoffOptions& options) {
  Payoff payoff;
  payoff.bar = options.bar;
  SweepGrid grid = options.grid;
  grid.colocations = {0};
  SweepOptions sweep = options.sweep;
  sweep.reachable = ReachablePolicy::kAll;
  // Every generated row is a real row of the synthetic table: its training sample only ranks the
  // rows, and would leave most of a large table's tail unseen.
  sweep.unseen = UnseenRowsPolicy::kFetch;
  sweep.min_fetched_share = options.bar;
  sweep.tolerance = 0;
  for (int64_t rows : options.sizes) {
    if (rows < 1 || rows > embedding::kMaxLayoutRows) {
      return absl::InvalidArgumentError(absl::StrCat("payoff: ", rows, " rows"));
    }
    if (sweep.progress) sweep.progress(absl::StrCat("synthetic table, rows: ", rows).c_str(), 0, 0);
    const auto train = GenerateRequests(fit, rows, 4 * options.requests, options.seed);
    ValidationSet validation;
    validation.requests = GenerateRequests(fit, rows, options.requests, options.seed + 1);
    for (size_t i = 0; i < validation.requests.size(); ++i) {
      validation.clients.push_back(static_cast<int32_t>(i));
    }
    const AccessProfile profile = BuildProfile(train, static_cast<int32_t>(rows), 0);
    auto result = Sweep(profile, options.row_words, validation, grid, sweep, {});
    if (!result.ok()) return result.status();
    PayoffStep step;
    step.rows = rows;
    step.reduction = result->Reduction();
    if (result->chosen >= 0) step.chosen_words = result->points[result->chosen].cost.words_scanned;
    if (result->baseline >= 0) {
      step.baseline_words = result->points[result->baseline].cost.words_scanned;
    }
    payoff.steps.push_back(step);
    if (step.reduction && *step.reduction >= options.goal) {
      payoff.rows_at_goal = rows;
      break;
    }
  }
  return payoff;
}

std::string PayoffJson(const Payoff& payoff) {
  std::string steps;
  for (const PayoffStep& s : payoff.steps) {
    absl::StrAppend(
        &steps, steps.empty() ? "" : ",",
        absl::StrFormat("{\"rows\":%d,\"reduction\":%s,\"chosen_words\":%d,"
                        "\"baseline_words\":%d}",
                        s.rows, s.reduction ? absl::StrFormat("%.3f", *s.reduction) : "null",
                        s.chosen_words, s.baseline_words));
  }
  return absl::StrFormat(
      ",\"payoff\":{\"fetched_share_bar\":%.6f,\"rows_at_goal\":%s,\"steps\":[%s]}", payoff.bar,
      payoff.rows_at_goal ? absl::StrCat(*payoff.rows_at_goal) : "null", steps);
}

std::string PayoffInWords(const Payoff& payoff, double goal) {
  std::string steps;
  for (const PayoffStep& s : payoff.steps) {
    absl::StrAppend(&steps, steps.empty() ? "" : ", ", s.rows, " rows: ",
                    s.reduction ? absl::StrFormat("%.2fx", *s.reduction) : "no reduction");
  }
  if (payoff.rows_at_goal) {
    return absl::StrFormat(
        "on synthetic tables fitted to this log (fetched share kept >= %.4f), co-design reaches "
        "%.3gx less computation from %d rows (%s)",
        payoff.bar, goal, *payoff.rows_at_goal, steps);
  }
  return absl::StrFormat(
      "on synthetic tables fitted to this log (fetched share kept >= %.4f), co-design did not "
      "reach %.3gx less computation up to %d rows (%s)",
      payoff.bar, goal, payoff.steps.empty() ? 0 : payoff.steps.back().rows, steps);
}

}  // namespace veil::training
