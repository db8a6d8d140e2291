// The collision and cost simulation of a layout on the validation split: the client's planner
// on every request (sweep.h runs it over a grid of layouts).
#ifndef VEIL_TRAINING_TOOLS_SIMULATE_H_
#define VEIL_TRAINING_TOOLS_SIMULATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "embedding/layout.h"
#include "pir/batch/planner.h"
#include "training_tools/profile.h"

namespace veil::training {

struct SimulationResult {
  double fetched_share = 0;   // wanted rows fetched / wanted rows, over all requests
  double complete_share = 0;  // requests with nothing missing
  batch::PlanCost cost;       // per inference (the same for every request)
  double latency_ms = 0;      // words_scanned / backend throughput (0 if unknown)
  std::vector<std::vector<int32_t>> missing;  // per request
};

// Plans every request with the client's planner and accounts what it fetched and what it costs.
// `backend_words_per_s` is the measured scan throughput of one server (veil-bench pir-answer:
// qps × rows × words). Returns the planner's errors.
absl::StatusOr<SimulationResult> Simulate(const embedding::Layout& layout,
                                          const std::vector<RowRequest>& requests,
                                          double backend_words_per_s);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_SIMULATE_H_
