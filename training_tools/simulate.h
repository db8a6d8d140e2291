// The collision and cost simulation of a layout on the validation split, and the sweep over the
// co-design grid that picks the cheapest layout at preserved model quality.
#ifndef VEIL_TRAINING_TOOLS_SIMULATE_H_
#define VEIL_TRAINING_TOOLS_SIMULATE_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "embedding/layout.h"
#include "pir/batch/planner.h"
#include "training_tools/profile.h"

namespace veil::training {

// A model's quality on the validation requests when some looked-up rows are missing (replaced
// by the default row). Implemented by the libtorch models; the simulation does not need torch.
class QualityModel {
 public:
  virtual ~QualityModel() = default;
  virtual std::string metric() const = 0;  // "auc", "perplexity"
  virtual bool higher_is_better() const = 0;
  // Quality of the validation set when missing[i] (sorted rows) are missing from request i.
  virtual double Evaluate(const std::vector<std::vector<int32_t>>& missing) = 0;
  // Whether `quality` is preserved relative to `reference` (all rows fetched): the targets of
  // issue 5 (AUC within 0.005 absolute, perplexity within 2%).
  virtual bool Preserved(double quality, double reference) const = 0;
};

struct SimulationResult {
  double fetched_share = 0;   // wanted rows fetched / wanted rows, over all requests
  double complete_share = 0;  // requests with nothing missing
  batch::PlanCost cost;      // per inference (the same for every request)
  double latency_ms = 0;      // words_scanned / backend throughput (0 if unknown)
  std::vector<std::vector<int32_t>> missing;  // per request
};

// Plans every request with the client's planner and accounts what it fetched and what it costs.
// `backend_words_per_s` is the measured scan throughput of one server (veil-bench pir-answer:
// qps × rows × words). Returns the planner's errors.
absl::StatusOr<SimulationResult> Simulate(const embedding::Layout& layout,
                                          const std::vector<RowRequest>& requests,
                                          double backend_words_per_s);

struct SweepGrid {
  std::vector<double> hot_fractions;
  std::vector<int32_t> hot_bins, hot_rounds, cold_bins, cold_rounds, colocations;
  // The full grid, or a small one for --quick.
  static SweepGrid Default(bool quick);
};

struct SweepPoint {
  LayoutChoice choice;
  SimulationResult simulation;  // `missing` is dropped after evaluation
  double quality = 0;           // model metric, or fetched share without a model
  bool baseline = false;        // random bins, no hot table, no co-location
  bool preserved = false;
  bool pareto = false;  // no other point is at least as good in quality, computation and bytes
  int64_t bytes() const { return simulation.cost.upload_bytes + simulation.cost.download_bytes; }
};

struct SweepOptions {
  std::array<uint8_t, 16> seed{};
  double backend_words_per_s = 0;
  int64_t max_bytes_per_inference = 300 * 1000;
  // Without a model, quality is the fetched share and "preserved" means at least this share.
  double min_fetched_share = 0.99;
  std::function<void(size_t done, size_t total)> progress;
};

struct SweepResult {
  std::string metric;
  bool higher_is_better = true;
  double reference_quality = 0;  // every wanted row fetched
  double no_rows_quality = 0;    // no row fetched: what the embeddings are worth to the model
  std::vector<SweepPoint> points;
  int chosen = -1;    // cheapest preserved point within the byte budget
  int baseline = -1;  // cheapest preserved baseline point within the byte budget
};

// Evaluates every grid point (layouts from `profile`) on `validation`. `model` may be null.
absl::StatusOr<SweepResult> Sweep(const AccessProfile& profile, int32_t row_words,
                                  const std::vector<RowRequest>& validation, const SweepGrid& grid,
                                  const SweepOptions& options, QualityModel* model);

// One CSV line per point, with a header.
void WriteSweepCsv(const SweepResult& result, std::ostream& out);

// Writes `png` through gnuplot: quality against computation and against bytes per inference,
// baseline and co-design points apart, the chosen point marked. Returns INTERNAL if gnuplot fails.
absl::Status PlotSweep(const SweepResult& result, const std::string& csv_path,
                       const std::string& png_path);

// The JSON summary line of a sweep.
std::string SweepSummaryJson(const std::string& workload, const SweepResult& result);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_SIMULATE_H_
