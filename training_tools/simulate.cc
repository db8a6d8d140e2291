#include "training_tools/simulate.h"

#include <cstdlib>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace veil::training {
namespace {

SweepGrid Grid(std::vector<double> hot_fractions, std::vector<int32_t> hot_bins,
               std::vector<int32_t> hot_rounds, std::vector<int32_t> cold_bins,
               std::vector<int32_t> cold_rounds, std::vector<int32_t> colocations) {
  SweepGrid grid;
  grid.hot_fractions = std::move(hot_fractions);
  grid.hot_bins = std::move(hot_bins);
  grid.hot_rounds = std::move(hot_rounds);
  grid.cold_bins = std::move(cold_bins);
  grid.cold_rounds = std::move(cold_rounds);
  grid.colocations = std::move(colocations);
  return grid;
}

// The grid's distinct layouts: with no hot table the hot knobs do not matter, and a table that
// is never queried (0 rounds) needs no bin count.
std::vector<LayoutChoice> Choices(const SweepGrid& grid) {
  std::vector<LayoutChoice> choices;
  for (double hot_fraction : grid.hot_fractions) {
    for (int32_t c : grid.colocations) {
      for (int32_t cold_bins : grid.cold_bins) {
        for (int32_t cold_rounds : grid.cold_rounds) {
          if (cold_rounds == 0 && cold_bins != grid.cold_bins.front()) continue;
          if (hot_fraction == 0) {
            if (cold_rounds > 0) choices.push_back({0, 0, 0, cold_bins, cold_rounds, c});
            continue;
          }
          for (int32_t hot_bins : grid.hot_bins) {
            for (int32_t hot_rounds : grid.hot_rounds) {
              choices.push_back({hot_fraction, hot_bins, hot_rounds, cold_bins, cold_rounds, c});
            }
          }
        }
      }
    }
  }
  return choices;
}

bool Better(double a, double b, bool higher_is_better) { return higher_is_better ? a > b : a < b; }

// Index of the cheapest point (computation, then bytes) among those `eligible`, or -1.
int Cheapest(const std::vector<SweepPoint>& points,
             const std::function<bool(const SweepPoint&)>& eligible) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(points.size()); ++i) {
    if (!eligible(points[i])) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const auto& a = points[i].simulation.cost;
    const auto& b = points[best].simulation.cost;
    if (a.words_scanned < b.words_scanned ||
        (a.words_scanned == b.words_scanned && points[i].bytes() < points[best].bytes())) {
      best = i;
    }
  }
  return best;
}

std::string PointJson(const SweepPoint& p) {
  const auto& cost = p.simulation.cost;
  return absl::StrFormat(
      "{\"hot_fraction\":%g,\"hot_bins\":%d,\"hot_rounds\":%d,\"cold_bins\":%d,"
      "\"cold_rounds\":%d,\"colocation\":%d,\"quality\":%.6f,\"fetched_share\":%.6f,"
      "\"keys\":%d,\"words_scanned\":%d,\"upload_bytes\":%d,\"download_bytes\":%d,"
      "\"bytes_per_inference\":%d,\"latency_ms\":%.4f}",
      p.choice.hot_fraction, p.choice.hot_bins, p.choice.hot_rounds, p.choice.cold_bins,
      p.choice.cold_rounds, p.choice.colocation, p.quality, p.simulation.fetched_share, cost.keys,
      cost.words_scanned, cost.upload_bytes, cost.download_bytes, p.bytes(),
      p.simulation.latency_ms);
}

}  // namespace

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

SweepGrid SweepGrid::Default(bool quick) {
  if (quick) {
    return Grid({0, 0.05, 0.1, 0.2}, {16, 64}, {1, 2, 4}, {16, 64, 256}, {0, 1, 2}, {0, 1, 2});
  }
  return Grid({0, 0.02, 0.05, 0.1, 0.2, 0.3}, {8, 16, 32, 64, 128}, {1, 2, 3, 4, 6},
              {8, 16, 32, 64, 128, 256, 512}, {0, 1, 2, 3}, {0, 1, 2, 4});
}

absl::StatusOr<SweepResult> Sweep(const AccessProfile& profile, int32_t row_words,
                                  const std::vector<RowRequest>& validation, const SweepGrid& grid,
                                  const SweepOptions& options, QualityModel* model) {
  SweepResult result;
  result.metric = model ? model->metric() : "fetched_share";
  result.higher_is_better = model ? model->higher_is_better() : true;
  result.reference_quality =
      model ? model->Evaluate(std::vector<std::vector<int32_t>>(validation.size())) : 1.0;
  result.no_rows_quality = model ? model->Evaluate(validation) : 0.0;
  const std::vector<LayoutChoice> choices = Choices(grid);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (options.progress) options.progress(i, choices.size());
    auto layout = DesignLayout(profile, row_words, choices[i], options.seed);
    if (!layout.ok()) return layout.status();
    auto simulation = Simulate(*layout, validation, options.backend_words_per_s);
    if (!simulation.ok()) return simulation.status();
    SweepPoint point;
    point.choice = choices[i];
    // Report the bins the layout really has (DesignLayout clamps them to the table's rows).
    point.choice.hot_bins = layout->shape(embedding::kHotTable).bins;
    point.choice.cold_bins = layout->shape(embedding::kColdTable).bins;
    point.baseline = choices[i].hot_fraction == 0 && choices[i].colocation == 0;
    if (model) {
      point.quality = model->Evaluate(simulation->missing);
      point.preserved = model->Preserved(point.quality, result.reference_quality);
    } else {
      point.quality = simulation->fetched_share;
      point.preserved = point.quality >= options.min_fetched_share;
    }
    simulation->missing = {};
    point.simulation = std::move(*simulation);
    result.points.push_back(std::move(point));
  }
  if (options.progress) options.progress(choices.size(), choices.size());

  auto& points = result.points;
  for (auto& p : points) {
    p.pareto = true;
    for (const auto& q : points) {
      const bool no_worse = !Better(p.quality, q.quality, result.higher_is_better) &&
                            q.simulation.cost.words_scanned <= p.simulation.cost.words_scanned &&
                            q.bytes() <= p.bytes();
      const bool better = Better(q.quality, p.quality, result.higher_is_better) ||
                          q.simulation.cost.words_scanned < p.simulation.cost.words_scanned ||
                          q.bytes() < p.bytes();
      if (no_worse && better) {
        p.pareto = false;
        break;
      }
    }
  }
  const int64_t budget = options.max_bytes_per_inference;
  result.chosen =
      Cheapest(points, [&](const SweepPoint& p) { return p.preserved && p.bytes() <= budget; });
  result.baseline = Cheapest(points, [&](const SweepPoint& p) {
    return p.baseline && p.preserved && p.bytes() <= budget;
  });
  return result;
}

void WriteSweepCsv(const SweepResult& result, std::ostream& out) {
  out << "hot_fraction,hot_bins,hot_rounds,cold_bins,cold_rounds,colocation,keys,words_scanned,"
         "upload_bytes,download_bytes,bytes_per_inference,latency_ms,fetched_share,"
         "complete_share,"
      << result.metric << ",baseline,preserved,pareto,chosen,chosen_baseline\n";
  for (size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    const auto& cost = p.simulation.cost;
    out << absl::StrFormat(
        "%g,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.4f,%.6f,%.6f,%.6f,%d,%d,%d,%d,%d\n",
        p.choice.hot_fraction, p.choice.hot_bins, p.choice.hot_rounds, p.choice.cold_bins,
        p.choice.cold_rounds, p.choice.colocation, cost.keys, cost.words_scanned, cost.upload_bytes,
        cost.download_bytes, p.bytes(), p.simulation.latency_ms, p.simulation.fetched_share,
        p.simulation.complete_share, p.quality, p.baseline, p.preserved, p.pareto,
        static_cast<int>(i) == result.chosen, static_cast<int>(i) == result.baseline);
  }
}

absl::Status PlotSweep(const SweepResult& result, const std::string& csv_path,
                       const std::string& png_path) {
  const std::string script_path = png_path + ".gp";
  {
    std::ofstream gp(script_path);
    // Columns: 8 words_scanned, 11 bytes_per_inference, 15 quality, 16 baseline, 18 pareto,
    // 19 chosen, 20 chosen_baseline (see WriteSweepCsv).
    gp << "set terminal png size 1400,640\n"
       << "set output '" << png_path << "'\n"
       << "set datafile separator ','\n"
       << "set key outside bottom center horizontal\nset grid\nset logscale x\n"
       << "set multiplot layout 1,2 title 'veil co-design sweep: " << result.metric
       << " against cost per inference'\n"
       << "set ylabel '" << result.metric << "'\n";
    for (const auto& [column, label] :
         {std::pair{8, "server words scanned per inference"}, {11, "bytes per inference"}}) {
      gp << "set xlabel '" << label << "'\n"
         << "plot '" << csv_path << "' every ::1 using ($16==0?$" << column
         << ":1/0):15 title 'hot table / co-location' pt 7 ps 0.5 lc rgb '#88aadd', \\\n"
         << "  '' every ::1 using ($16==1?$" << column
         << ":1/0):15 title 'random bins, no hot table' pt 9 ps 1.2 lc rgb '#555555', \\\n"
         << "  '' every ::1 using ($18==1?$" << column
         << ":1/0):15 title 'Pareto' pt 6 ps 1.2 lc rgb '#cc3333', \\\n"
         << "  '' every ::1 using ($20==1?$" << column
         << ":1/0):15 title 'cheapest preserved baseline' pt 8 ps 2.2 lw 2 lc rgb '#000000', \\\n"
         << "  '' every ::1 using ($19==1?$" << column
         << ":1/0):15 title 'chosen' pt 5 ps 1.8 lc rgb '#000000', \\\n"
         << "  " << result.reference_quality << " title 'all rows fetched' dt 2 lc rgb '#339933'\n";
    }
    gp << "unset multiplot\n";
  }
  const std::string command = "gnuplot '" + script_path + "' 2>&1";
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", script_path));
  }
  return absl::OkStatus();
}

std::string SweepSummaryJson(const std::string& workload, const SweepResult& result) {
  std::string json = absl::StrFormat(
      "{\"tool\":\"veil-codesign\",\"command\":\"sweep\",\"workload\":\"%s\",\"metric\":\"%s\","
      "\"reference_quality\":%.6f,\"no_rows_quality\":%.6f,\"points\":%d",
      workload, result.metric, result.reference_quality, result.no_rows_quality,
      result.points.size());
  auto point = [&](int i) { return i < 0 ? std::string("null") : PointJson(result.points[i]); };
  absl::StrAppend(&json, ",\"chosen\":", point(result.chosen),
                  ",\"baseline\":", point(result.baseline));
  if (result.chosen >= 0 && result.baseline >= 0) {
    const double reduction =
        static_cast<double>(result.points[result.baseline].simulation.cost.words_scanned) /
        static_cast<double>(result.points[result.chosen].simulation.cost.words_scanned);
    absl::StrAppend(&json,
                    absl::StrFormat(",\"compute_reduction_at_preserved_quality\":%.3f", reduction));
  } else {
    absl::StrAppend(&json, ",\"compute_reduction_at_preserved_quality\":null");
  }
  absl::StrAppend(
      &json, ",\"bytes_per_inference\":",
      result.chosen >= 0 ? absl::StrCat(result.points[result.chosen].bytes()) : std::string("null"),
      "}");
  return json;
}

}  // namespace veil::training
