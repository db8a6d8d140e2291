#include "training_tools/simulate.h"

namespace veil::training {

absl::StatusOr<SimulationResult> Simulate(const embedding::Layout& layout,
                                          const std::vector<RowRequest>& requests,
                                          double backend_words_per_s) {
  SimulationResult result;
  result.cost = batch::CostOf(layout);
  if (backend_words_per_s > 0) {
    result.latency_ms = 1e3 * static_cast<double>(result.cost.words_scanned) / backend_words_per_s;
  }
  int64_t wanted = 0, fetched = 0, complete = 0;
  result.missing.reserve(requests.size());
  for (const RowRequest& request : requests) {
    auto selection = batch::ChooseSlots(layout, request);
    if (!selection.ok()) return selection.status();
    wanted += static_cast<int64_t>(selection->sources.size() + selection->missing.size());
    fetched += static_cast<int64_t>(selection->sources.size());
    complete += selection->missing.empty();
    result.missing.push_back(std::move(selection->missing));
  }
  result.fetched_share = wanted ? static_cast<double>(fetched) / wanted : 1.0;
  result.complete_share = requests.empty() ? 1.0 : static_cast<double>(complete) / requests.size();
  return result;
}

}  // namespace veil::training
