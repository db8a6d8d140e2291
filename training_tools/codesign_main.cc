// veil-codesign: profile | layout | simulate | sweep | train | synth — the co-design of batch-PIR
// layouts from training logs (see docs/codesign-results.md for the measured points and commands,
// and `veil-codesign --help`). With --private, profile, layout, simulate and sweep count the
// training accesses from the clients' Paillier-encrypted reports instead
// (training_tools/private_profile.h).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/layout.h"
#include "training_tools/codesign_flags.h"
#include "training_tools/codesign_help.h"
#include "training_tools/models.h"
#include "training_tools/payoff.h"
#include "training_tools/private_profile.h"
#include "training_tools/profile.h"
#include "training_tools/simulate.h"
#include "training_tools/sweep.h"
#include "training_tools/sweep_report.h"
#include "training_tools/synthetic.h"
#include "training_tools/workload.h"

namespace veil::training {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Progress(const char* stage, size_t done, size_t total) {
  if (total == 0) {
    std::fprintf(stderr, "%s\n", stage);
    return;
  }
  constexpr int kWidth = 40;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total, stage);
  if (done == total) std::fprintf(stderr, "\n");
}

// The workload, with the flags to set named when a CSV log's column is missing.
absl::StatusOr<Workload> Load(const CodesignFlags& flags) {
  std::error_code ec;
  if (!flags.workload.preset.empty() &&
      !std::filesystem::is_directory(flags.workload.data_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--data_dir=", flags.workload.data_dir,
                                            " is not a directory (scripts/fetch-data fills "
                                            "<repository>/data)"));
  }
  std::fprintf(stderr, "loading workload...\n");
  auto workload = LoadWorkload(flags.workload);
  if (!workload.ok()) {
    if (absl::StrContains(workload.status().message(), "no column named")) {
      return absl::InvalidArgumentError(absl::StrCat(
          workload.status().message(),
          "; name the columns with --user_column (default user), --item_column (item), "
          "--time_column (timestamp), --label_column (none)"));
    }
    return workload.status();
  }
  std::fprintf(stderr, "%s: %s\n", workload->name.c_str(), workload->description.c_str());
  return workload;
}

std::string OutputName(const Workload& workload) {
  return workload.name == "movielens" || workload.name == "brown" ? workload.name : "custom";
}

// The training split's profile: counted in the clear, or with --private from the clients'
// encrypted reports (then without co-access).
absl::StatusOr<AccessProfile> ProfileOf(const CodesignFlags& flags, const Workload& workload,
                                        PrivateProfileFigures* figures = nullptr) {
  if (!flags.private_profile) {
    return BuildProfile(workload.train_requests, workload.num_rows, flags.top_k);
  }
  PrivateProfileOptions options;
  options.key = {flags.paillier_bits, flags.insecure_for_comparison};
  options.value_bits = static_cast<uint32_t>(flags.report_value_bits);
  options.threads = flags.threads;
  std::fprintf(stderr, "private profile: %d-bit Paillier, one report per client...\n",
               options.key.modulus_bits);
  return BuildPrivateProfile(workload.train_requests, workload.train_clients, workload.num_rows,
                             options, figures);
}

// The --private figures of the `profile` command, and whether the private profile (and the
// layout the flags build from it) equal those of the plaintext counts without co-access, byte for
// byte.
absl::StatusOr<std::string> PrivateProfileJson(const CodesignFlags& flags, const Workload& workload,
                                               const AccessProfile& private_profile,
                                               const PrivateProfileFigures& f) {
  const AccessProfile clear = BuildProfile(workload.train_requests, workload.num_rows, 0);
  std::ostringstream private_csv, clear_csv;
  WriteProfileCsv(private_profile, private_csv);
  WriteProfileCsv(clear, clear_csv);
  auto private_layout =
      DesignLayout(private_profile, workload.row_words, flags.choice, LayoutSeed(flags));
  auto clear_layout = DesignLayout(clear, workload.row_words, flags.choice, LayoutSeed(flags));
  if (!private_layout.ok()) return private_layout.status();
  if (!clear_layout.ok()) return clear_layout.status();
  return absl::StrFormat(
      ",\"private\":true,\"paillier_bits\":%d,\"clients\":%d,\"values_per_ciphertext\":%d,"
      "\"slot_bits\":%d,\"ciphertexts_per_report\":%d,\"report_bytes\":%d,"
      "\"keygen_ms\":%.1f,\"table_ms\":%.1f,\"report_ms_mean\":%.2f,\"report_ms_max\":%.2f,"
      "\"all_reports_s\":%.2f,\"aggregate_ms\":%.1f,\"decrypt_ms\":%.1f,"
      "\"profile_equal_to_plaintext\":%s,\"layout_equal_to_plaintext\":%s",
      flags.paillier_bits, f.clients, f.values_per_ciphertext, f.slot_bits,
      f.ciphertexts_per_report, f.report_bytes, f.keygen_s * 1e3, f.table_s * 1e3,
      f.report_s_mean * 1e3, f.report_s_max * 1e3, f.reports_s, f.aggregate_s * 1e3,
      f.decrypt_s * 1e3, private_csv.str() == clear_csv.str() ? "true" : "false",
      private_layout->Serialize() == clear_layout->Serialize() ? "true" : "false");
}

absl::Status ProfileCommand(const CodesignFlags& flags) {
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  PrivateProfileFigures figures;
  auto computed = ProfileOf(flags, *workload, &figures);
  if (!computed.ok()) return computed.status();
  const AccessProfile& profile = *computed;
  std::string private_json;
  if (flags.private_profile) {
    auto json = PrivateProfileJson(flags, *workload, profile, figures);
    if (!json.ok()) return json.status();
    private_json = *json;
  }
  if (!flags.out.empty()) {
    auto out = OutputFile(flags, "the profile CSV");
    if (!out.ok()) return out.status();
    std::ofstream csv(*out);
    WriteProfileCsv(profile, csv);
    if (!csv) return absl::InternalError(absl::StrCat("cannot write ", *out));
  }
  // Skew summary: the share of accesses that the most frequent 10% of rows receive.
  const auto by_frequency = RowsByFrequency(profile);
  int64_t total = 0, top = 0;
  for (size_t i = 0; i < by_frequency.size(); ++i) {
    total += profile.frequency[by_frequency[i]];
    if (i < by_frequency.size() / 10) top += profile.frequency[by_frequency[i]];
  }
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"profile\",\"workload\":\"%s\",\"rows\":%d,"
      "\"train_requests\":%lld,\"validation_requests\":%zu,\"top10pct_access_share\":%.4f%s}\n",
      workload->name.c_str(), workload->num_rows, static_cast<long long>(profile.num_requests),
      workload->validation_requests.size(), total ? static_cast<double>(top) / total : 0.0,
      private_json.c_str());
  return absl::OkStatus();
}

absl::Status LayoutCommand(const CodesignFlags& flags) {
  auto out = OutputFile(flags, "the layout file");
  if (!out.ok()) return out.status();
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  auto profile = ProfileOf(flags, *workload);
  if (!profile.ok()) return profile.status();
  auto layout = DesignLayout(*profile, workload->row_words, flags.choice, LayoutSeed(flags));
  if (!layout.ok()) return layout.status();
  if (auto s = layout->WriteFile(*out); !s.ok()) return s;
  const auto cost = batch::CostOf(*layout);
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"layout\",\"workload\":\"%s\",\"file\":\"%s\","
      "\"rows\":%d,\"hot_rows\":%zu,\"keys\":%lld,\"words_scanned\":%lld,\"reachable\":%s}\n",
      workload->name.c_str(), out->c_str(), layout->num_rows(), layout->hot_rows().size(),
      static_cast<long long>(cost.keys), static_cast<long long>(cost.words_scanned),
      LeavesATableUnqueried(ChoiceOf(*layout), layout->num_rows()) ? "false" : "true");
  return absl::OkStatus();
}

// The models of --seeds (none with --model=false) and the validation examples they score.
struct Models {
  std::vector<std::unique_ptr<WorkloadModel>> owned;
  std::vector<QualityModel*> models;
  ValidationSet validation;
};

absl::StatusOr<Models> ModelsFor(const CodesignFlags& flags, const Workload& workload) {
  Models m;
  if (!flags.model) {
    m.validation = {workload.validation_requests, workload.validation_clients};
    return m;
  }
  const std::vector<uint64_t> seeds = TrainingSeeds(flags);
  if (seeds.size() < 3) {
    std::fprintf(stderr,
                 "note: with %zu seed%s the intervals leave out much of the variation between "
                 "trained models; reported results use --seeds=3 or more\n",
                 seeds.size(), seeds.size() == 1 ? "" : "s");
  }
  std::fprintf(stderr, "training %zu model%s (seeds %llu to %llu)...\n", seeds.size(),
               seeds.size() == 1 ? "" : "s", static_cast<unsigned long long>(seeds.front()),
               static_cast<unsigned long long>(seeds.back()));
  auto trained = TrainModels(workload, TrainOptionsFor(flags, workload), seeds);
  if (!trained.ok()) return trained.status();
  m.owned = std::move(*trained);
  for (const auto& model : m.owned) m.models.push_back(model.get());
  for (size_t i : m.owned.front()->evaluated_examples()) {
    m.validation.requests.push_back(workload.validation_requests[i]);
    m.validation.clients.push_back(workload.validation_clients[i]);
  }
  return m;
}

absl::Status SimulateCommand(const CodesignFlags& flags) {
  std::error_code ec;
  if (!flags.layout_file.empty() && std::filesystem::is_directory(flags.layout_file, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout=", flags.layout_file, " is a directory; give the layout file"));
  }
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  auto profile = ProfileOf(flags, *workload);
  if (!profile.ok()) return profile.status();
  absl::StatusOr<embedding::Layout> layout = absl::InternalError("unset");
  if (!flags.layout_file.empty()) {
    layout = embedding::Layout::ReadFile(flags.layout_file);
    if (layout.ok() && (layout->num_rows() != workload->num_rows ||
                        layout->params().row_words != workload->row_words)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout has ", layout->num_rows(), " rows of ", layout->params().row_words,
          " words; the workload has ", workload->num_rows, " of ", workload->row_words));
    }
  } else {
    layout = DesignLayout(*profile, workload->row_words, flags.choice, LayoutSeed(flags));
  }
  if (!layout.ok()) return layout.status();
  auto models = ModelsFor(flags, *workload);
  if (!models.ok()) return models.status();
  SweepOptions options = SweepOptionsFor(flags);
  // The given layout is evaluated whatever it leaves out; the policy reported is what it needs.
  options.reachable = LeavesATableUnqueried(ChoiceOf(*layout), layout->num_rows())
                          ? ReachablePolicy::kOptIn
                          : ReachablePolicy::kAll;
  auto result = EvaluateLayouts(
      *profile, workload->row_words, {ChoiceOf(*layout)}, [&](size_t) { return layout; },
      models->validation, options, models->models);
  if (!result.ok()) return result.status();
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"simulate\",\"workload\":\"%s\","
      "\"requests\":%zu,%s,%s}\n",
      workload->name.c_str(), models->validation.requests.size(),
      PointFieldsJson(*result, 0).c_str(), QualityContextJson(*result).c_str());
  return absl::OkStatus();
}

// Says when co-design cannot cut computation here, and from which table size it would.
absl::StatusOr<std::string> CannotHelp(const CodesignFlags& flags, const Workload& workload,
                                       const SweepResult& result) {
  if (result.reachable != ReachablePolicy::kAll || !result.OneScanIsTheFloor()) return "";
  const SweepPoint& baseline = result.points[result.baseline];
  std::fprintf(stderr,
               "co-design cannot cut computation on this table: with every row reachable each "
               "inference scans every row at least once (%d rows x %d words = %lld words), and "
               "plain batch PIR already keeps the quality with one scan (%d bins x %d round)\n",
               workload.num_rows, workload.row_words, static_cast<long long>(result.one_scan_words),
               baseline.choice.cold_bins, baseline.choice.cold_rounds);
  if (!flags.payoff) return ",\"payoff\":null";
  PayoffOptions options;
  options.bar = result.FetchedShareBar();
  options.row_words = workload.row_words;
  options.grid = SweepGrid::Default(/*quick=*/true);
  options.sweep = SweepOptionsFor(flags);
  options.sweep.progress = Progress;
  options.seed = flags.seed;
  for (int64_t rows = int64_t{workload.num_rows} * 4;
       rows <= std::min<int64_t>(flags.payoff_max_rows, embedding::kMaxLayoutRows); rows *= 4) {
    options.sizes.push_back(rows);
  }
  auto payoff =
      FindPayoff(FitSynthetic(BuildProfile(workload.train_requests, workload.num_rows, flags.top_k),
                              workload.train_requests),
                 options);
  if (!payoff.ok()) return payoff.status();
  std::fprintf(stderr, "%s\n", PayoffInWords(*payoff, options.goal).c_str());
  return PayoffJson(*payoff);
}

// Writes OUT/<base>.csv and .png.
absl::Status WriteSweepFiles(const CodesignFlags& flags, const std::string& base,
                             const std::string& title, const SweepResult& result) {
  auto folder = OutputFolder(flags);
  if (!folder.ok()) return folder.status();
  const std::string path = absl::StrCat(*folder, "/", base);
  {
    std::ofstream csv(path + ".csv");
    WriteSweepCsv(result, csv);
    if (!csv) return absl::InternalError(absl::StrCat("cannot write ", path, ".csv"));
  }
  if (auto s = PlotSweep(result, title, path + ".csv", path + ".png"); !s.ok()) return s;
  std::fprintf(stderr, "wrote %s.csv and %s.png\n", path.c_str(), path.c_str());
  return absl::OkStatus();
}

// The chosen point and the baseline in words, on stderr.
void PrintChoice(const SweepResult& result) {
  std::fprintf(stderr, "%s\n", result.claim_note.c_str());
  for (const auto& [index, name] :
       {std::pair{result.chosen, "chosen"}, {result.baseline, "baseline"}}) {
    if (index < 0) {
      std::fprintf(stderr, "%s: none preserved within the byte budget\n", name);
      continue;
    }
    const SweepPoint& p = result.points[index];
    std::fprintf(stderr,
                 "%s: hot %g (%d bins x %d), cold %d bins x %d, c = %d: %s %.4f [%.4f, %.4f], loss "
                 "%.4f [%.4f, %.4f], fetched %.3f, %lld words, %lld bytes%s\n",
                 name, p.choice.hot_fraction, p.choice.hot_bins, p.choice.hot_rounds,
                 p.choice.cold_bins, p.choice.cold_rounds, p.choice.colocation,
                 MetricName(result.metric), p.quality.value, p.quality.low, p.quality.high,
                 p.loss.value, p.loss.low, p.loss.high, p.fetched_share,
                 static_cast<long long>(p.cost.words_scanned), static_cast<long long>(p.bytes()),
                 p.reachable ? "" : ", a table unqueried");
  }
}

absl::Status SweepCommand(const CodesignFlags& flags) {
  const auto start = std::chrono::steady_clock::now();
  if (auto folder = OutputFolder(flags); !folder.ok()) return folder.status();
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  auto profile = ProfileOf(flags, *workload);
  if (!profile.ok()) return profile.status();
  auto models = ModelsFor(flags, *workload);
  if (!models.ok()) return models.status();
  auto grid = GridFromFlags(flags);
  if (!grid.ok()) return grid.status();
  SweepOptions options = SweepOptionsFor(flags);
  options.progress = Progress;
  auto result =
      Sweep(*profile, workload->row_words, models->validation, *grid, options, models->models);
  if (!result.ok()) return result.status();
  PrintChoice(*result);
  if (auto s = WriteSweepFiles(flags, "sweep-" + OutputName(*workload),
                               std::filesystem::path(workload->name).filename().string(), *result);
      !s.ok()) {
    return s;
  }
  auto payoff = CannotHelp(flags, *workload, *result);
  if (!payoff.ok()) return payoff.status();
  std::string seeds;
  for (uint64_t seed : TrainingSeeds(flags))
    absl::StrAppend(&seeds, seeds.empty() ? "" : ",", seed);
  const std::string extra = absl::StrFormat(
      ",\"seed_list\":[%s],\"bootstrap_replicates\":%d,\"validation_examples\":%d,"
      "\"threads\":%d,\"quick\":%s%s,\"wall_s\":%.1f",
      flags.model ? seeds : "", flags.bootstrap, models->validation.requests.size(), flags.threads,
      flags.quick ? "true" : "false", *payoff, SecondsSince(start));
  std::printf("%s\n", SweepSummaryJson("sweep", workload->name, *result, extra).c_str());
  return absl::OkStatus();
}

absl::Status TrainCommand(const CodesignFlags& flags) {
  auto folder = OutputFolder(flags);
  if (!folder.ok()) return folder.status();
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  auto model = TrainModel(*workload, TrainOptionsFor(flags, *workload));
  if (!model.ok()) return model.status();
  const auto& evaluated = (*model)->evaluated_requests();
  const double quality = (*model)->Evaluate(std::vector<std::vector<int32_t>>(evaluated.size()));
  // Every row replaced by the default: what the embeddings contribute to the model.
  const double without_rows = (*model)->Evaluate(evaluated);
  const std::string path = absl::StrCat(*folder, "/", OutputName(*workload), ".f32");
  if (auto s = ExportTable((*model)->EmbeddingTable(), (*model)->rows(), (*model)->dim(),
                           workload->name, path);
      !s.ok()) {
    return s;
  }
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"train\",\"workload\":\"%s\",\"seed\":%llu,"
      "\"metric\":\"%s\",\"validation_quality\":%.6f,\"quality_without_rows\":%.6f,"
      "\"rows\":%d,\"dim\":%d,\"table\":\"%s\"}\n",
      workload->name.c_str(), static_cast<unsigned long long>(flags.seed),
      MetricName((*model)->metric()), quality, without_rows, (*model)->rows(), (*model)->dim(),
      path.c_str());
  return absl::OkStatus();
}

// Fits the workload's popularity and co-access, generates a larger table's requests, and sweeps
// layouts on them (quality = fetched share: there is no model for a synthetic table).
absl::Status SynthCommand(const CodesignFlags& flags) {
  const auto start = std::chrono::steady_clock::now();
  if (auto folder = OutputFolder(flags); !folder.ok()) return folder.status();
  auto workload = Load(flags);
  if (!workload.ok()) return workload.status();
  const AccessProfile real =
      BuildProfile(workload->train_requests, workload->num_rows, flags.top_k);
  const SyntheticFit fit = FitSynthetic(real, workload->train_requests);
  const int64_t rows = flags.synthetic_rows, count = flags.synthetic_requests;
  if (rows <= 0 || rows > embedding::kMaxLayoutRows || count <= 0) {
    return absl::InvalidArgumentError(
        "--synthetic_rows and --synthetic_requests must be positive (rows at most 2^30)");
  }
  std::fprintf(stderr, "generating %lld + %lld requests over %lld rows...\n",
               static_cast<long long>(count), static_cast<long long>(count / 4),
               static_cast<long long>(rows));
  const auto train = GenerateRequests(fit, rows, count, flags.seed);
  ValidationSet validation;
  validation.requests =
      GenerateRequests(fit, rows, std::max<int64_t>(count / 4, 1), flags.seed + 1);
  for (size_t i = 0; i < validation.requests.size(); ++i) {
    validation.clients.push_back(static_cast<int32_t>(i));
  }
  const AccessProfile synthetic = BuildProfile(train, static_cast<int32_t>(rows), flags.top_k);
  const SyntheticFit refit = FitSynthetic(synthetic, train);
  auto grid = GridFromFlags(flags);
  if (!grid.ok()) return grid.status();
  SweepOptions options = SweepOptionsFor(flags);
  options.progress = Progress;
  auto result = Sweep(synthetic, workload->row_words, validation, *grid, options, {});
  if (!result.ok()) return result.status();
  PrintChoice(*result);
  if (auto s = WriteSweepFiles(flags, "sweep-synthetic", "synthetic", *result); !s.ok()) return s;
  const std::string extra = absl::StrFormat(
      ",\"fitted_on\":\"%s\",\"zipf_exponent\":%.4f,\"zipf_r2\":%.4f,\"co_access_share\":%.4f,"
      "\"synthetic_rows\":%d,\"synthetic_zipf_exponent\":%.4f,"
      "\"synthetic_co_access_share\":%.4f,\"wall_s\":%.1f",
      workload->name, fit.zipf_exponent, fit.zipf_r2, fit.co_access_share, rows,
      refit.zipf_exponent, refit.co_access_share, SecondsSince(start));
  std::printf("%s\n", SweepSummaryJson("synth", "synthetic", *result, extra).c_str());
  return absl::OkStatus();
}

// The command named in argv (the first argument not starting with '-'), or "".
std::string CommandIn(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return argv[i];
  }
  return "";
}

}  // namespace
}  // namespace veil::training

int main(int argc, char** argv) {
  using veil::training::CodesignHelp;
  absl::SetProgramUsageMessage(veil::training::CodesignUsage());
  // The help comes before absl's parsing: absl's --help lists only the flags of source files
  // named after the program, which is none here.
  std::string command = veil::training::CommandIn(argc, argv);
  bool help = command == "help";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    help = help || arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort";
  }
  if (help) {
    std::string topic = command == "help" ? "" : command;
    if (command == "help") {
      for (int i = 1; i < argc; ++i) {
        if (argv[i][0] != '-' && std::string(argv[i]) != "help") topic = argv[i];
      }
    }
    const std::string text = CodesignHelp(topic);
    if (text.empty()) {
      std::fprintf(stderr, "unknown command \"%s\"\n%s\n", topic.c_str(), CodesignHelp("").c_str());
      return 2;
    }
    std::printf("%s", text.c_str());
    return 0;
  }
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", veil::training::CodesignUsage().c_str());
    return 2;
  }
  command = args[1];
  auto flags = veil::training::ReadCodesignFlags();
  absl::Status status = flags.status();
  if (flags.ok()) {
    using namespace veil::training;  // NOLINT: the commands
    if (command == "profile") {
      status = ProfileCommand(*flags);
    } else if (command == "layout") {
      status = LayoutCommand(*flags);
    } else if (command == "simulate") {
      status = SimulateCommand(*flags);
    } else if (command == "sweep") {
      status = SweepCommand(*flags);
    } else if (command == "train") {
      status = TrainCommand(*flags);
    } else if (command == "synth") {
      status = SynthCommand(*flags);
    } else {
      std::fprintf(stderr, "unknown command \"%s\"\n%s\n", command.c_str(),
                   veil::training::CodesignUsage().c_str());
      return 2;
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "veil-codesign %s: %s\n", command.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}
