// What a sweep reports: one CSV line per point, the gnuplot figure, and the JSON summary line.
#ifndef VEIL_TRAINING_TOOLS_SWEEP_REPORT_H_
#define VEIL_TRAINING_TOOLS_SWEEP_REPORT_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "training_tools/sweep.h"

namespace veil::training {

// One CSV line per point, with a header: the layout, its cost, fetched share, reachability, the
// quality and paired loss with their 95% intervals, and the baseline / preserved / Pareto /
// chosen flags.
void WriteSweepCsv(const SweepResult& result, std::ostream& out);

// Writes `png` through gnuplot from the CSV at `csv_path`: the paired quality loss (95% interval
// whiskers) against computation and against bytes per inference, the tolerance band, the
// reachability policy (points leaving a table unqueried drawn apart), chosen and baseline
// labelled. Returns INTERNAL if gnuplot fails.
absl::Status PlotSweep(const SweepResult& result, const std::string& title,
                       const std::string& csv_path, const std::string& png_path);

// The JSON fields (without braces) of point i: its layout, quality and paired loss with their
// intervals, preserved, fetched and unreachable shares, reachability, cost.
std::string PointFieldsJson(const SweepResult& result, int i);

// The JSON fields (without braces) of every quality report: metric, seeds, policies, unseen rows,
// tolerance, the reference, no rows and the embeddings' worth with their intervals, the claim.
std::string QualityContextJson(const SweepResult& result);

// The JSON summary line: the policies, the reference and the embeddings' worth with their
// intervals, the chosen point and the baseline (quality with interval, fetched and unreachable
// shares, words, bytes), compute_reduction_at_preserved_quality (null when the data cannot
// support a claim or a point is missing) and its value per seed. `extra` (",\"key\":value..."),
// is appended before the closing brace.
std::string SweepSummaryJson(const std::string& command, const std::string& workload,
                             const SweepResult& result, const std::string& extra);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_SWEEP_REPORT_H_
