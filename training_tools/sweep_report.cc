#include "training_tools/sweep_report.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace veil::training {
namespace {

std::string Number(std::optional<double> value) {
  return value ? absl::StrFormat("%.3f", *value) : std::string("null");
}

std::string EstimateJson(const std::string& name, const Estimate& e) {
  return absl::StrFormat(
      "\"%s\":%.6f,\"%s_ci_low\":%.6f,\"%s_ci_high\":%.6f,\"%s_se_examples\":%.6f,"
      "\"%s_se_seeds\":%.6f",
      name, e.value, name, e.low, name, e.high, name, e.se_examples, name, e.se_seeds);
}

std::string PointJson(const SweepResult& result, int i) {
  return i < 0 ? "null" : absl::StrCat("{", PointFieldsJson(result, i), "}");
}

// `text` inside a double-quoted gnuplot string in enhanced mode, underscores printed as such.
std::string GnuplotText(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"_", "\\\\_"}, {"\"", "'"}});
}

// The y range of the loss panels: the tolerance band and the chosen and baseline points'
// intervals in view; far worse points are left out (their losses are in the CSV).
std::pair<double, double> LossRange(const SweepResult& result) {
  double high = 5 * result.tolerance, low = -result.tolerance;
  for (int i : {result.chosen, result.baseline, result.chosen_all_reachable}) {
    if (i >= 0) high = std::max(high, 1.3 * result.points[i].loss.high);
  }
  for (const SweepPoint& p : result.points) {
    if (p.loss.high <= high) low = std::min(low, p.loss.low);
  }
  return {low - 0.1 * result.tolerance, high};
}

}  // namespace

std::string PointFieldsJson(const SweepResult& result, int i) {
  const SweepPoint& p = result.points[i];
  const auto& cost = p.cost;
  return absl::StrFormat(
      "\"hot_fraction\":%g,\"hot_bins\":%d,\"hot_rounds\":%d,\"cold_bins\":%d,"
      "\"cold_rounds\":%d,\"colocation\":%d,%s,%s,\"preserved\":%s,\"fetched_share\":%.6f,"
      "\"complete_share\":%.6f,\"reachable\":%s,\"unreachable_client_share\":%.6f,\"keys\":%d,"
      "\"words_scanned\":%d,\"upload_bytes\":%d,\"download_bytes\":%d,"
      "\"bytes_per_inference\":%d,\"latency_ms\":%.4f",
      p.choice.hot_fraction, p.choice.hot_bins, p.choice.hot_rounds, p.choice.cold_bins,
      p.choice.cold_rounds, p.choice.colocation, EstimateJson("quality", p.quality),
      EstimateJson("loss", p.loss), p.preserved ? "true" : "false", p.fetched_share,
      p.complete_share, p.reachable ? "true" : "false", p.unreachable_client_share, cost.keys,
      cost.words_scanned, cost.upload_bytes, cost.download_bytes, p.bytes(), p.latency_ms);
}

std::string QualityContextJson(const SweepResult& result) {
  auto list = [](const std::vector<double>& values) {
    std::string out;
    for (double v : values)
      absl::StrAppend(&out, out.empty() ? "" : ",", absl::StrFormat("%.6f", v));
    return absl::StrCat("[", out, "]");
  };
  return absl::StrFormat(
      "\"metric\":\"%s\",\"seeds\":%d,\"confidence\":0.95,\"reachable_policy\":\"%s\","
      "\"unseen_rows_policy\":\"%s\",\"unseen_rows\":%d,\"unseen_wanted_share\":%.6f,"
      "\"unseen_client_share\":%.6f,\"tolerance\":%g,%s,\"reference_quality_per_seed\":%s,%s,%s,"
      "\"embeddings_worth_per_seed\":%s,\"claim_supported\":%s,\"claim_note\":\"%s\"",
      MetricName(result.metric), result.seeds, ReachablePolicyName(result.reachable),
      UnseenRowsPolicyName(result.unseen), result.unseen_rows, result.unseen_wanted_share,
      result.unseen_client_share, result.tolerance,
      EstimateJson("reference_quality", result.reference), list(result.reference_per_seed),
      EstimateJson("no_rows_quality", result.no_rows),
      EstimateJson("embeddings_worth", result.worth), list(result.worth_per_seed),
      result.claim_supported ? "true" : "false", result.claim_note);
}

void WriteSweepCsv(const SweepResult& result, std::ostream& out) {
  out << "hot_fraction,hot_bins,hot_rounds,cold_bins,cold_rounds,colocation,keys,words_scanned,"
         "upload_bytes,download_bytes,bytes_per_inference,latency_ms,fetched_share,"
         "complete_share,reachable,unreachable_client_share,"
      << MetricName(result.metric)
      << ",quality_ci_low,quality_ci_high,loss,loss_ci_low,loss_ci_high,baseline,preserved,"
         "pareto,chosen,chosen_baseline\n";
  for (size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    const auto& cost = p.cost;
    out << absl::StrFormat(
        "%g,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.4f,%.6f,%.6f,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,"
        "%d,%d,%d,%d,%d\n",
        p.choice.hot_fraction, p.choice.hot_bins, p.choice.hot_rounds, p.choice.cold_bins,
        p.choice.cold_rounds, p.choice.colocation, cost.keys, cost.words_scanned, cost.upload_bytes,
        cost.download_bytes, p.bytes(), p.latency_ms, p.fetched_share, p.complete_share,
        p.reachable, p.unreachable_client_share, p.quality.value, p.quality.low, p.quality.high,
        p.loss.value, p.loss.low, p.loss.high, p.baseline, p.preserved, p.pareto,
        static_cast<int>(i) == result.chosen, static_cast<int>(i) == result.baseline);
  }
}

absl::Status PlotSweep(const SweepResult& result, const std::string& title,
                       const std::string& csv_path, const std::string& png_path) {
  const std::string script_path = png_path + ".gp";
  const auto [low, high] = LossRange(result);
  const bool opt_in = result.reachable == ReachablePolicy::kOptIn;
  {
    std::ofstream gp(script_path);
    // Columns (WriteSweepCsv): 8 words_scanned, 11 bytes_per_inference, 15 reachable, 20 loss,
    // 21-22 its interval, 23 baseline, 24 preserved, 26 chosen, 27 chosen_baseline.
    gp << "set terminal png size 1500,700\n"
       << "set output '" << png_path << "'\n"
       << "set datafile separator ','\n"
       << "set key outside bottom center horizontal\nset grid\nset logscale x\n"
       << absl::StrFormat("set yrange [%g:%g]\n", low, high)
       << absl::StrFormat(
              "set object 1 rect from graph 0, first 0 to graph 1, first %g fc rgb '#e4f2e4' "
              "fs solid 1.0 noborder behind\n",
              result.tolerance)
       << absl::StrFormat(
              "set multiplot layout 1,2 title \"veil co-design sweep, %s: paired %s loss "
              "against cost, %d seed%s, 95%% intervals; %s\\nshaded: within the tolerance "
              "(%g); embeddings' worth (all rows vs none) %.4g [%.4g, %.4g]%s\"\n",
              GnuplotText(title), GnuplotText(MetricName(result.metric)), result.seeds,
              result.seeds == 1 ? "" : "s",
              opt_in ? GnuplotText("--allow_unreachable_rows: x = a table left unqueried (its "
                                   "rows unreachable)")
                     : "every row reachable (every table queried)",
              result.tolerance, result.worth.value, result.worth.low, result.worth.high,
              result.claim_supported ? "" : ": TOO SMALL TO SUPPORT A CLAIM")
       << "set ylabel \"" << GnuplotText(MetricName(result.metric))
       << (result.metric == Metric::kPerplexity ? " loss (relative to all rows)\"\n"
                                                : " loss (all rows minus layout)\"\n");
    for (const auto& [column, label] :
         {std::pair{8, "server words scanned per inference"}, {11, "bytes per inference"}}) {
      gp << "set xlabel '" << label << "'\nunset label\nunset arrow\n";
      if (column == 8) {
        // Every layout that leaves no table unqueried scans at least every row once.
        gp << absl::StrFormat(
            "set arrow from %d, graph 0 to %d, graph 1 nohead dt 3 lw 2 lc rgb '#aa3333'\n"
            "set label 'one scan of the table' at %d, graph 0.96 right offset -0.5,0 "
            "tc rgb '#aa3333'\n",
            result.one_scan_words, result.one_scan_words, result.one_scan_words);
      }
      for (const auto& [index, name] :
           {std::pair{result.chosen, "chosen"}, {result.baseline, "baseline"}}) {
        if (index < 0) continue;
        const SweepPoint& p = result.points[index];
        // The baseline's label below its point, the chosen point's above: they may coincide.
        gp << absl::StrFormat("set label '%s' at %d,%g offset 1.5,%s font ',13'\n", name,
                              column == 8 ? p.cost.words_scanned : p.bytes(), p.loss.value,
                              std::string(name) == "chosen" ? "1.2" : "-1.2");
      }
      auto series = [&](const std::string& condition, const std::string& style,
                        const std::string& name) {
        return absl::StrFormat(
            "'%s' every ::1 using (%s?$%d:1/0):20:21:22 with yerrorbars %s title '%s'", csv_path,
            condition, column, style, name);
      };
      gp << "plot "
         << series("$15==1&&$23==0&&$24==1", "pt 7 ps 0.6 lc rgb '#3366cc'",
                   "hot table / co-location, preserved")
         << ", \\\n  "
         << series("$15==1&&$23==0&&$24==0", "pt 7 ps 0.5 lc rgb '#aabbdd'", "not preserved")
         << ", \\\n  "
         << series("$23==1", "pt 9 ps 1.1 lc rgb '#444444'", "plain batch PIR (baseline)");
      if (opt_in) {
        gp << ", \\\n  "
           << series("$15==0", "pt 2 ps 0.9 lc rgb '#dd7700'", "a table unqueried (opt-in)");
      }
      gp << ", \\\n  " << series("$27==1", "pt 8 ps 2.4 lw 2 lc rgb '#000000'", "baseline chosen")
         << ", \\\n  " << series("$26==1", "pt 5 ps 1.9 lc rgb '#000000'", "chosen") << ", \\\n  "
         << result.tolerance << " title 'tolerance' dt 2 lw 2 lc rgb '#339933'\n";
    }
    gp << "unset multiplot\n";
  }
  const std::string command = "gnuplot '" + script_path + "' 2>&1";
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", script_path));
  }
  return absl::OkStatus();
}

std::string SweepSummaryJson(const std::string& command, const std::string& workload,
                             const SweepResult& result, const std::string& extra) {
  std::string json = absl::StrFormat(
      "{\"tool\":\"veil-codesign\",\"command\":\"%s\",\"workload\":\"%s\",%s,\"points\":%d",
      command, workload, QualityContextJson(result), result.points.size());
  absl::StrAppend(&json, ",\"chosen\":", PointJson(result, result.chosen),
                  ",\"baseline\":", PointJson(result, result.baseline));
  absl::StrAppend(&json,
                  ",\"compute_reduction_at_preserved_quality\":", Number(result.Reduction()));
  std::string per_seed;
  double seed_min = INFINITY, seed_max = -INFINITY;
  for (const auto& reduction : result.ReductionPerSeed()) {
    absl::StrAppend(&per_seed, per_seed.empty() ? "" : ",", Number(reduction));
    if (reduction)
      seed_min = std::min(seed_min, *reduction), seed_max = std::max(seed_max, *reduction);
  }
  absl::StrAppend(&json, ",\"compute_reduction_per_seed\":[", per_seed, "]");
  if (seed_min <= seed_max) {
    absl::StrAppend(&json, absl::StrFormat(",\"compute_reduction_seed_min\":%.3f,"
                                           "\"compute_reduction_seed_max\":%.3f",
                                           seed_min, seed_max));
  }
  if (result.reachable == ReachablePolicy::kOptIn) {
    absl::StrAppend(
        &json, ",\"chosen_all_reachable\":", PointJson(result, result.chosen_all_reachable),
        ",\"compute_reduction_all_reachable\":", Number(result.ReductionAllReachable()));
  }
  const bool chosen = result.chosen >= 0;
  const SweepPoint* c = chosen ? &result.points[result.chosen] : nullptr;
  absl::StrAppend(
      &json, ",\"bytes_per_inference\":", chosen ? absl::StrCat(c->bytes()) : "null",
      ",\"quality\":", chosen ? absl::StrFormat("%.6f", c->quality.value) : "null",
      ",\"quality_ci_low\":", chosen ? absl::StrFormat("%.6f", c->quality.low) : "null",
      ",\"quality_ci_high\":", chosen ? absl::StrFormat("%.6f", c->quality.high) : "null",
      absl::StrFormat(",\"one_scan_words\":%d,\"one_scan_is_the_floor\":%s", result.one_scan_words,
                      result.OneScanIsTheFloor() ? "true" : "false"),
      extra, "}");
  return json;
}

}  // namespace veil::training
