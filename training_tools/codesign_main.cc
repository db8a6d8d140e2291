// veil-codesign: profile | layout | simulate | sweep | train | synth — the co-design of batch-PIR
// layouts from training logs (see docs/codesign-results.md for the measured points and commands).
// With --private, profile, layout, simulate and sweep count the training accesses from the
// clients' Paillier-encrypted reports instead (training_tools/private_profile.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/layout.h"
#include "training_tools/models.h"
#include "training_tools/private_profile.h"
#include "training_tools/profile.h"
#include "training_tools/simulate.h"
#include "training_tools/synthetic.h"
#include "training_tools/workload.h"

ABSL_FLAG(std::string, workload, "", "preset: movielens or brown (data under --data_dir)");
ABSL_FLAG(std::string, interactions, "", "CSV interaction log (user,item,timestamp[,label])");
ABSL_FLAG(std::string, text, "", "plain-text corpus: a file or a directory of files");
ABSL_FLAG(std::string, user_column, "user", "CSV column of the user id");
ABSL_FLAG(std::string, item_column, "item", "CSV column of the item id");
ABSL_FLAG(std::string, time_column, "timestamp", "CSV column of the integer timestamp");
ABSL_FLAG(std::string, label_column, "", "CSV column of the label or rating (optional)");
ABSL_FLAG(double, positive_threshold, 4, "label at or above which an interaction is a click");
ABSL_FLAG(std::string, data_dir, VEIL_DEFAULT_DATA_DIR, "where scripts/fetch-data put the data");
ABSL_FLAG(int, dim, 32, "embedding dimension (32-bit words per row)");
ABSL_FLAG(int, history, 20, "recommendation: items of the user's history per inference");
ABSL_FLAG(int, vocab, 3000, "language: vocabulary rows");
ABSL_FLAG(int, window, 32, "language: tokens per inference");
ABSL_FLAG(uint64_t, seed, 1, "seed of the layout permutation, training and sampling");
ABSL_FLAG(int, top_k, 8, "co-accessed rows kept per row in the profile");
ABSL_FLAG(bool, private, false,
          "profile from Paillier-encrypted client reports (each user or document a client): only "
          "the totals are decrypted; frequencies only, no co-access (training_tools/"
          "private_profile.h)");
ABSL_FLAG(int, paillier_bits, 2048, "--private: Paillier modulus bits (2048 or 3072)");
ABSL_FLAG(bool, insecure_for_comparison, false, "--private: also accept --paillier_bits=1024");
ABSL_FLAG(int, report_value_bits, 16, "--private: bits of one client's per-row count");
ABSL_FLAG(double, hot_fraction, 0.1, "layout: share of rows in the hot table");
ABSL_FLAG(int, hot_bins, 16, "layout: bins of the hot table");
ABSL_FLAG(int, hot_rounds, 2, "layout: keys per hot bin per inference");
ABSL_FLAG(int, cold_bins, 64, "layout: bins of the cold table");
ABSL_FLAG(int, cold_rounds, 1, "layout: keys per cold bin per inference");
ABSL_FLAG(int, colocation, 1, "layout: co-located rows per entry (c)");
ABSL_FLAG(std::string, layout, "", "simulate: layout file to use (else built from the flags)");
ABSL_FLAG(std::string, out, "", "output file (profile CSV, layout file) or folder (sweep, train)");
ABSL_FLAG(double, backend_words_per_s, 0,
          "one server's scan throughput in 32-bit words/s (veil-bench pir-answer: "
          "qps x rows x words); 0 leaves latency out");
ABSL_FLAG(int64_t, max_bytes, 300000, "upload + download budget per inference");
ABSL_FLAG(bool, quick, false, "sweep: small grid and model (< 10 minutes on 2 cores)");
ABSL_FLAG(std::vector<std::string>, grid_hot_fractions, {}, "sweep: override the grid's values");
ABSL_FLAG(std::vector<std::string>, grid_hot_bins, {}, "sweep: override the grid's values");
ABSL_FLAG(std::vector<std::string>, grid_hot_rounds, {}, "sweep: override the grid's values");
ABSL_FLAG(std::vector<std::string>, grid_cold_bins, {}, "sweep: override the grid's values");
ABSL_FLAG(std::vector<std::string>, grid_cold_rounds, {}, "sweep: override the grid's values");
ABSL_FLAG(std::vector<std::string>, grid_colocations, {}, "sweep: override the grid's values");
ABSL_FLAG(bool, model, true, "simulate/sweep: train the model and measure its quality");
ABSL_FLAG(int, epochs, 0, "training epochs (0: the workload's default)");
ABSL_FLAG(int, threads, 2, "torch threads; --private: clients and aggregation threads");
ABSL_FLAG(int64_t, synthetic_rows, 1000000, "synth: rows of the synthetic table");
ABSL_FLAG(int64_t, synthetic_requests, 20000, "synth: training requests (validation: a quarter)");

namespace veil::training {
namespace {

absl::StatusOr<Workload> LoadFromFlags() {
  WorkloadOptions options;
  options.preset = absl::GetFlag(FLAGS_workload);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.interactions = absl::GetFlag(FLAGS_interactions);
  options.columns = {absl::GetFlag(FLAGS_user_column), absl::GetFlag(FLAGS_item_column),
                     absl::GetFlag(FLAGS_time_column), absl::GetFlag(FLAGS_label_column)};
  options.positive_threshold = static_cast<float>(absl::GetFlag(FLAGS_positive_threshold));
  options.text = absl::GetFlag(FLAGS_text);
  options.history_length = absl::GetFlag(FLAGS_history);
  options.vocabulary_size = absl::GetFlag(FLAGS_vocab);
  options.window_length = absl::GetFlag(FLAGS_window);
  options.embedding_dim = absl::GetFlag(FLAGS_dim);
  std::fprintf(stderr, "loading workload...\n");
  return LoadWorkload(options);
}

// The public placement key of --seed.
std::array<uint8_t, 16> LayoutSeed() {
  return embedding::LayoutSeedFromU64(absl::GetFlag(FLAGS_seed));
}

LayoutChoice ChoiceFromFlags() {
  return {absl::GetFlag(FLAGS_hot_fraction), absl::GetFlag(FLAGS_hot_bins),
          absl::GetFlag(FLAGS_hot_rounds),   absl::GetFlag(FLAGS_cold_bins),
          absl::GetFlag(FLAGS_cold_rounds),  absl::GetFlag(FLAGS_colocation)};
}

TrainOptions TrainOptionsFor(const Workload& workload, bool quick) {
  TrainOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.threads = absl::GetFlag(FLAGS_threads);
  if (workload.kind == WorkloadKind::kLanguage) {
    // An LSTM epoch over Brown (~0.9M training tokens) takes minutes on 2 cores: a narrow LSTM,
    // a high learning rate, and the sweep's layouts scored on a fixed, genre-spread sample of
    // validation windows.
    options.epochs = quick ? 1 : 3;
    options.batch_size = 64;
    options.hidden = 64;
    options.learning_rate = 5e-3;
    options.max_train_examples = quick ? 12000 : 0;
    options.max_validation_examples = quick ? 150 : 600;
  } else {
    options.epochs = 5;
  }
  if (absl::GetFlag(FLAGS_epochs) > 0) options.epochs = absl::GetFlag(FLAGS_epochs);
  return options;
}

// The default grid (quick or full) with the lists given by --grid_* flags in place of its own.
absl::StatusOr<SweepGrid> GridFromFlags() {
  SweepGrid grid = SweepGrid::Default(absl::GetFlag(FLAGS_quick));
  auto parse = [](const std::vector<std::string>& values, auto& target,
                  const char* name) -> absl::Status {
    if (values.empty()) return absl::OkStatus();
    target.clear();
    for (const std::string& v : values) {
      double number;
      if (!absl::SimpleAtod(v, &number) || number < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": bad value \"", v, "\""));
      }
      target.push_back(static_cast<typename std::decay_t<decltype(target)>::value_type>(number));
    }
    return absl::OkStatus();
  };
  for (absl::Status s :
       {parse(absl::GetFlag(FLAGS_grid_hot_fractions), grid.hot_fractions, "grid_hot_fractions"),
        parse(absl::GetFlag(FLAGS_grid_hot_bins), grid.hot_bins, "grid_hot_bins"),
        parse(absl::GetFlag(FLAGS_grid_hot_rounds), grid.hot_rounds, "grid_hot_rounds"),
        parse(absl::GetFlag(FLAGS_grid_cold_bins), grid.cold_bins, "grid_cold_bins"),
        parse(absl::GetFlag(FLAGS_grid_cold_rounds), grid.cold_rounds, "grid_cold_rounds"),
        parse(absl::GetFlag(FLAGS_grid_colocations), grid.colocations, "grid_colocations")}) {
    if (!s.ok()) return s;
  }
  return grid;
}

void Progress(size_t done, size_t total) {
  constexpr int kWidth = 40;
  const int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu layouts", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
}

// The sweep's seed, cost model and byte budget from the flags, with the progress bar.
SweepOptions SweepOptionsFromFlags() {
  SweepOptions options;
  options.seed = LayoutSeed();
  options.backend_words_per_s = absl::GetFlag(FLAGS_backend_words_per_s);
  options.max_bytes_per_inference = absl::GetFlag(FLAGS_max_bytes);
  options.progress = Progress;
  return options;
}

// The training split's profile: counted in the clear, or with --private from the clients'
// encrypted reports (then without co-access).
absl::StatusOr<AccessProfile> ProfileFromFlags(const Workload& workload,
                                               PrivateProfileFigures* figures = nullptr) {
  if (!absl::GetFlag(FLAGS_private)) {
    return BuildProfile(workload.train_requests, workload.num_rows, absl::GetFlag(FLAGS_top_k));
  }
  PrivateProfileOptions options;
  options.key = {absl::GetFlag(FLAGS_paillier_bits), absl::GetFlag(FLAGS_insecure_for_comparison)};
  options.value_bits = static_cast<uint32_t>(absl::GetFlag(FLAGS_report_value_bits));
  options.threads = absl::GetFlag(FLAGS_threads);
  std::fprintf(stderr, "private profile: %d-bit Paillier, one report per client...\n",
               options.key.modulus_bits);
  return BuildPrivateProfile(workload.train_requests, workload.train_clients, workload.num_rows,
                             options, figures);
}

// The --private figures of `profile` command, and whether the private profile (and the layout
// the flags build from it) equal those of the plaintext counts without co-access, byte for byte.
absl::StatusOr<std::string> PrivateProfileJson(const Workload& workload,
                                               const AccessProfile& private_profile,
                                               const PrivateProfileFigures& f) {
  const AccessProfile clear = BuildProfile(workload.train_requests, workload.num_rows, 0);
  std::ostringstream private_csv, clear_csv;
  WriteProfileCsv(private_profile, private_csv);
  WriteProfileCsv(clear, clear_csv);
  auto private_layout =
      DesignLayout(private_profile, workload.row_words, ChoiceFromFlags(), LayoutSeed());
  auto clear_layout = DesignLayout(clear, workload.row_words, ChoiceFromFlags(), LayoutSeed());
  if (!private_layout.ok()) return private_layout.status();
  if (!clear_layout.ok()) return clear_layout.status();
  return absl::StrFormat(
      ",\"private\":true,\"paillier_bits\":%d,\"clients\":%d,\"values_per_ciphertext\":%d,"
      "\"slot_bits\":%d,\"ciphertexts_per_report\":%d,\"report_bytes\":%d,"
      "\"keygen_ms\":%.1f,\"table_ms\":%.1f,\"report_ms_mean\":%.2f,\"report_ms_max\":%.2f,"
      "\"all_reports_s\":%.2f,\"aggregate_ms\":%.1f,\"decrypt_ms\":%.1f,"
      "\"profile_equal_to_plaintext\":%s,\"layout_equal_to_plaintext\":%s",
      absl::GetFlag(FLAGS_paillier_bits), f.clients, f.values_per_ciphertext, f.slot_bits,
      f.ciphertexts_per_report, f.report_bytes, f.keygen_s * 1e3, f.table_s * 1e3,
      f.report_s_mean * 1e3, f.report_s_max * 1e3, f.reports_s, f.aggregate_s * 1e3,
      f.decrypt_s * 1e3, private_csv.str() == clear_csv.str() ? "true" : "false",
      private_layout->Serialize() == clear_layout->Serialize() ? "true" : "false");
}

absl::Status Profile() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  PrivateProfileFigures figures;
  auto computed = ProfileFromFlags(*workload, &figures);
  if (!computed.ok()) return computed.status();
  const AccessProfile& profile = *computed;
  std::string private_json;
  if (absl::GetFlag(FLAGS_private)) {
    auto json = PrivateProfileJson(*workload, profile, figures);
    if (!json.ok()) return json.status();
    private_json = *json;
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) {
    std::ofstream csv(out);
    WriteProfileCsv(profile, csv);
    if (!csv) return absl::InternalError(absl::StrCat("cannot write ", out));
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

std::string CostJson(const SimulationResult& s) {
  return absl::StrFormat(
      "\"keys\":%d,\"words_scanned\":%d,\"upload_bytes\":%d,\"download_bytes\":%d,"
      "\"bytes_per_inference\":%d,\"latency_ms\":%.4f,\"fetched_share\":%.6f,"
      "\"complete_share\":%.6f",
      s.cost.keys, s.cost.words_scanned, s.cost.upload_bytes, s.cost.download_bytes,
      s.cost.upload_bytes + s.cost.download_bytes, s.latency_ms, s.fetched_share, s.complete_share);
}

absl::Status MakeLayout() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  auto profile = ProfileFromFlags(*workload);
  if (!profile.ok()) return profile.status();
  auto layout = DesignLayout(*profile, workload->row_words, ChoiceFromFlags(), LayoutSeed());
  if (!layout.ok()) return layout.status();
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::InvalidArgumentError("layout: give --out=FILE");
  if (auto s = layout->WriteFile(out); !s.ok()) return s;
  const auto cost = batch::CostOf(*layout);
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"layout\",\"workload\":\"%s\",\"file\":\"%s\","
      "\"rows\":%d,\"hot_rows\":%zu,\"keys\":%lld,\"words_scanned\":%lld}\n",
      workload->name.c_str(), out.c_str(), layout->num_rows(), layout->hot_rows().size(),
      static_cast<long long>(cost.keys), static_cast<long long>(cost.words_scanned));
  return absl::OkStatus();
}

absl::Status SimulateCommand() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  absl::StatusOr<embedding::Layout> layout = absl::InternalError("unset");
  if (!absl::GetFlag(FLAGS_layout).empty()) {
    layout = embedding::Layout::ReadFile(absl::GetFlag(FLAGS_layout));
    if (layout.ok() && (layout->num_rows() != workload->num_rows ||
                        layout->params().row_words != workload->row_words)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout has ", layout->num_rows(), " rows of ", layout->params().row_words,
          " words; the workload has ", workload->num_rows, " of ", workload->row_words));
    }
  } else {
    auto profile = ProfileFromFlags(*workload);
    if (!profile.ok()) return profile.status();
    layout = DesignLayout(*profile, workload->row_words, ChoiceFromFlags(), LayoutSeed());
  }
  if (!layout.ok()) return layout.status();
  std::unique_ptr<WorkloadModel> model;
  const std::vector<RowRequest>* requests = &workload->validation_requests;
  if (absl::GetFlag(FLAGS_model)) {
    auto trained = TrainModel(*workload, TrainOptionsFor(*workload, absl::GetFlag(FLAGS_quick)));
    if (!trained.ok()) return trained.status();
    model = std::move(*trained);
    requests = &model->evaluated_requests();
  }
  auto simulation = Simulate(*layout, *requests, absl::GetFlag(FLAGS_backend_words_per_s));
  if (!simulation.ok()) return simulation.status();
  std::string quality;
  if (model) {
    const double reference = model->Evaluate(std::vector<std::vector<int32_t>>(requests->size()));
    const double measured = model->Evaluate(simulation->missing);
    quality = absl::StrFormat(
        ",\"metric\":\"%s\",\"quality\":%.6f,\"reference_quality\":%.6f,"
        "\"preserved\":%s",
        model->metric(), measured, reference,
        model->Preserved(measured, reference) ? "true" : "false");
  }
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"simulate\",\"workload\":\"%s\","
      "\"requests\":%zu,%s%s}\n",
      workload->name.c_str(), requests->size(), CostJson(*simulation).c_str(), quality.c_str());
  return absl::OkStatus();
}

absl::Status SweepCommand() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  const bool quick = absl::GetFlag(FLAGS_quick);
  auto profile = ProfileFromFlags(*workload);
  if (!profile.ok()) return profile.status();
  std::unique_ptr<WorkloadModel> model;
  const std::vector<RowRequest>* requests = &workload->validation_requests;
  if (absl::GetFlag(FLAGS_model)) {
    auto trained = TrainModel(*workload, TrainOptionsFor(*workload, quick));
    if (!trained.ok()) return trained.status();
    model = std::move(*trained);
    requests = &model->evaluated_requests();
  }
  const SweepOptions options = SweepOptionsFromFlags();
  auto grid = GridFromFlags();
  if (!grid.ok()) return grid.status();
  auto result = Sweep(*profile, workload->row_words, *requests, *grid, options, model.get());
  if (!result.ok()) return result.status();
  const std::string out_dir = absl::GetFlag(FLAGS_out).empty() ? "." : absl::GetFlag(FLAGS_out);
  const std::string base = absl::StrCat(
      out_dir, "/sweep-",
      workload->name == "movielens" || workload->name == "brown" ? workload->name : "custom");
  {
    std::ofstream csv(base + ".csv");
    WriteSweepCsv(*result, csv);
    if (!csv) return absl::InternalError(absl::StrCat("cannot write ", base, ".csv"));
  }
  if (auto s = PlotSweep(*result, base + ".csv", base + ".png"); !s.ok()) return s;
  std::fprintf(stderr, "wrote %s.csv and %s.png\n", base.c_str(), base.c_str());
  std::printf("%s\n", SweepSummaryJson(workload->name, *result).c_str());
  return absl::OkStatus();
}

absl::Status TrainCommand() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  auto model = TrainModel(*workload, TrainOptionsFor(*workload, absl::GetFlag(FLAGS_quick)));
  if (!model.ok()) return model.status();
  const double quality =
      (*model)->Evaluate(std::vector<std::vector<int32_t>>((*model)->evaluated_requests().size()));
  // Every row replaced by the default: what the embeddings contribute to the model.
  const double without_rows = (*model)->Evaluate((*model)->evaluated_requests());
  const std::string out_dir = absl::GetFlag(FLAGS_out).empty() ? "." : absl::GetFlag(FLAGS_out);
  const std::string path = absl::StrCat(
      out_dir, "/",
      workload->name == "movielens" || workload->name == "brown" ? workload->name : "custom",
      ".f32");
  if (auto s = ExportTable((*model)->EmbeddingTable(), (*model)->rows(), (*model)->dim(),
                           workload->name, path);
      !s.ok()) {
    return s;
  }
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"train\",\"workload\":\"%s\","
      "\"metric\":\"%s\",\"validation_quality\":%.6f,\"quality_without_rows\":%.6f,"
      "\"rows\":%d,\"dim\":%d,\"table\":\"%s\"}\n",
      workload->name.c_str(), (*model)->metric().c_str(), quality, without_rows, (*model)->rows(),
      (*model)->dim(), path.c_str());
  return absl::OkStatus();
}

// Fits the workload's popularity and co-access, generates a larger table's requests, and sweeps
// layouts on them (quality = fetched share: there is no model for a synthetic table).
absl::Status SynthCommand() {
  auto workload = LoadFromFlags();
  if (!workload.ok()) return workload.status();
  const int top_k = absl::GetFlag(FLAGS_top_k);
  const AccessProfile real = BuildProfile(workload->train_requests, workload->num_rows, top_k);
  const SyntheticFit fit = FitSynthetic(real, workload->train_requests);
  const int64_t rows = absl::GetFlag(FLAGS_synthetic_rows);
  const int64_t count = absl::GetFlag(FLAGS_synthetic_requests);
  if (rows <= 0 || rows > embedding::kMaxLayoutRows || count <= 0) {
    return absl::InvalidArgumentError("synth: rows and requests must be positive (rows ≤ 2^30)");
  }
  std::fprintf(stderr, "generating %lld + %lld requests over %lld rows...\n",
               static_cast<long long>(count), static_cast<long long>(count / 4),
               static_cast<long long>(rows));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const auto train = GenerateRequests(fit, rows, count, seed);
  const auto validation = GenerateRequests(fit, rows, std::max<int64_t>(count / 4, 1), seed + 1);
  const AccessProfile synthetic = BuildProfile(train, static_cast<int32_t>(rows), top_k);
  const SyntheticFit refit = FitSynthetic(synthetic, train);
  const SweepOptions options = SweepOptionsFromFlags();
  auto grid = GridFromFlags();
  if (!grid.ok()) return grid.status();
  auto result = Sweep(synthetic, workload->row_words, validation, *grid, options, nullptr);
  if (!result.ok()) return result.status();
  const std::string out_dir = absl::GetFlag(FLAGS_out).empty() ? "." : absl::GetFlag(FLAGS_out);
  const std::string base = absl::StrCat(out_dir, "/sweep-synthetic");
  {
    std::ofstream csv(base + ".csv");
    WriteSweepCsv(*result, csv);
    if (!csv) return absl::InternalError(absl::StrCat("cannot write ", base, ".csv"));
  }
  if (auto s = PlotSweep(*result, base + ".csv", base + ".png"); !s.ok()) return s;
  std::printf(
      "{\"tool\":\"veil-codesign\",\"command\":\"synth\",\"fitted_on\":\"%s\",\"zipf_exponent\":%."
      "4f,"
      "\"zipf_r2\":%.4f,\"co_access_share\":%.4f,\"synthetic_rows\":%lld,"
      "\"synthetic_zipf_exponent\":%.4f,\"synthetic_co_access_share\":%.4f,\"sweep\":%s}\n",
      workload->name.c_str(), fit.zipf_exponent, fit.zipf_r2, fit.co_access_share,
      static_cast<long long>(rows), refit.zipf_exponent, refit.co_access_share,
      SweepSummaryJson("synthetic", *result).c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace veil::training

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "veil-codesign profile|layout|simulate|sweep|train|synth [--workload=movielens|brown | "
      "--interactions=FILE | --text=FILE] [flags]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string command = args[1];
  absl::Status status;
  if (command == "profile") {
    status = veil::training::Profile();
  } else if (command == "layout") {
    status = veil::training::MakeLayout();
  } else if (command == "simulate") {
    status = veil::training::SimulateCommand();
  } else if (command == "sweep") {
    status = veil::training::SweepCommand();
  } else if (command == "train") {
    status = veil::training::TrainCommand();
  } else if (command == "synth") {
    status = veil::training::SynthCommand();
  } else {
    std::fprintf(stderr, "unknown command \"%s\"\n%s\n", command.c_str(),
                 absl::ProgramUsageMessage().data());
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "veil-codesign %s: %s\n", command.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}
