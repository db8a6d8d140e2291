#include "training_tools/codesign_flags.h"

#include <filesystem>
#include <type_traits>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "embedding/layout.h"
#include "training_tools/data/text.h"

// Input: a preset or a file.
ABSL_FLAG(std::string, workload, "", "preset: movielens or brown (data under --data_dir)");
ABSL_FLAG(std::string, data_dir, VEIL_DEFAULT_DATA_DIR,
          "folder of the presets' data (scripts/fetch-data)");
ABSL_FLAG(std::string, interactions, "",
          "rating or click log: one CSV file with a header naming its columns (see --*_column)");
ABSL_FLAG(std::string, user_column, "user", "--interactions: column of the user id");
ABSL_FLAG(std::string, item_column, "item", "--interactions: column of the item id (table row)");
ABSL_FLAG(std::string, time_column, "timestamp",
          "--interactions: column of the integer timestamp (the split is by time)");
ABSL_FLAG(std::string, label_column, "",
          "--interactions: column of the label or rating; the model needs one (e.g. "
          "--label_column=rating); profile and layout do not");
ABSL_FLAG(double, positive_threshold, 4,
          "--interactions: a label at or above it is a click (positive)");
ABSL_FLAG(std::string, text, "",
          "plain-text corpus (UTF-8): one file, or a folder of files; cut into documents by "
          "--text_split");
ABSL_FLAG(std::string, text_split, "auto",
          "--text: documents are files | chapters (at chapter headings) | paragraphs (at blank "
          "lines) | windows (runs of lines); auto: files for a folder of 5 or more, else the "
          "first of chapters, paragraphs, windows giving 5 documents");
ABSL_FLAG(int, text_document_words, 2000,
          "--text: chapters, paragraphs and windows are merged into documents of at least this "
          "many tokens");
ABSL_FLAG(int, dim, 32, "embedding dimension (32-bit words per row)");
ABSL_FLAG(int, history, 20, "recommendation: items of the user's history per inference");
ABSL_FLAG(int, vocab, 3000, "language: vocabulary rows");
ABSL_FLAG(int, window, 32, "language: tokens per inference");

// Models and statistics.
ABSL_FLAG(bool, model, true,
          "simulate, sweep: train models and measure their quality (false: the fetched share)");
ABSL_FLAG(int, seeds, 3,
          "models trained, with seeds --seed, --seed+1, ...; quality intervals include the "
          "variation over them (reported results: 3 or more)");
ABSL_FLAG(uint64_t, seed, 1, "first training seed; also the layouts' placement key and sampling");
ABSL_FLAG(int, epochs, 0, "training epochs (0: the workload's default)");
ABSL_FLAG(int, validation_examples, 0,
          "validation examples the models score (0: the workload's default; language --quick: "
          "600)");
ABSL_FLAG(int, threads, 2, "threads for training, planning and scoring (results do not change)");
ABSL_FLAG(int, bootstrap, 500,
          "bootstrap replicates (clients resampled, paired between layouts) per interval");
ABSL_FLAG(double, tolerance, 0,
          "non-inferiority margin of the quality loss (0: AUC 0.005, perplexity 2% relative, "
          "fetched share 1 - 0.99)");
ABSL_FLAG(std::string, unseen_rows, "default",
          "rows never looked up in training: default (the client uses the default row, "
          "unfetched, in every layout and the reference) or fetch (wanted like any row)");
ABSL_FLAG(bool, allow_unreachable_rows, false,
          "sweep: also consider layouts that leave a table unqueried (its rows unreachable); "
          "marked in the CSV, plot and JSON (reachable_policy opt-in)");

// Layout.
ABSL_FLAG(double, hot_fraction, 0.1, "layout: share of rows in the hot table");
ABSL_FLAG(int, hot_bins, 16, "layout: bins of the hot table");
ABSL_FLAG(int, hot_rounds, 2, "layout: keys per hot bin per inference");
ABSL_FLAG(int, cold_bins, 64, "layout: bins of the cold table");
ABSL_FLAG(int, cold_rounds, 1, "layout: keys per cold bin per inference");
ABSL_FLAG(int, colocation, 1, "layout: co-located rows per entry (c)");
ABSL_FLAG(int, top_k, 8, "co-accessed rows kept per row in the profile");
ABSL_FLAG(std::string, layout, "", "simulate: layout file to use (else built from the flags)");

// Sweep.
ABSL_FLAG(bool, quick, false,
          "sweep: small grid and model (under 10 minutes on 2 cores with --seeds=3)");
ABSL_FLAG(std::vector<std::string>, grid_hot_fractions, {}, "sweep: the grid's hot fractions");
ABSL_FLAG(std::vector<std::string>, grid_hot_bins, {}, "sweep: the grid's hot bins");
ABSL_FLAG(std::vector<std::string>, grid_hot_rounds, {}, "sweep: the grid's hot rounds");
ABSL_FLAG(std::vector<std::string>, grid_cold_bins, {}, "sweep: the grid's cold bins");
ABSL_FLAG(std::vector<std::string>, grid_cold_rounds, {}, "sweep: the grid's cold rounds");
ABSL_FLAG(std::vector<std::string>, grid_colocations, {}, "sweep: the grid's co-locations (c)");
ABSL_FLAG(int64_t, max_bytes, 300000, "upload + download budget per inference");
ABSL_FLAG(double, backend_words_per_s, 0,
          "one server's scan throughput in 32-bit words/s (veil-bench pir-answer: qps x rows x "
          "words); 0 leaves latency out");
ABSL_FLAG(bool, payoff, true,
          "sweep: when one scan is already the floor, find the table size from which co-design "
          "pays, on synthetic tables fitted to the log");
ABSL_FLAG(int64_t, payoff_max_rows, 1 << 21, "--payoff: largest synthetic table");

// Private profiles.
ABSL_FLAG(bool, private, false,
          "profile from Paillier-encrypted client reports (each user or document a client): only "
          "the totals are decrypted; frequencies only, no co-access (training_tools/"
          "private_profile.h)");
ABSL_FLAG(int, paillier_bits, 2048, "--private: Paillier modulus bits (2048 or 3072)");
ABSL_FLAG(bool, insecure_for_comparison, false, "--private: also accept --paillier_bits=1024");
ABSL_FLAG(int, report_value_bits, 16, "--private: bits of one client's per-row count");

// Synthetic tables and output.
ABSL_FLAG(int64_t, synthetic_rows, 1000000, "synth: rows of the synthetic table");
ABSL_FLAG(int64_t, synthetic_requests, 20000, "synth: training requests (validation: a quarter)");
ABSL_FLAG(std::string, out, "",
          "profile: CSV file; layout: layout file; sweep, train, synth: folder (created)");

namespace veil::training {

absl::StatusOr<CodesignFlags> ReadCodesignFlags() {
  CodesignFlags f;
  WorkloadOptions& w = f.workload;
  w.preset = absl::GetFlag(FLAGS_workload);
  w.data_dir = absl::GetFlag(FLAGS_data_dir);
  w.interactions = absl::GetFlag(FLAGS_interactions);
  w.columns = {absl::GetFlag(FLAGS_user_column), absl::GetFlag(FLAGS_item_column),
               absl::GetFlag(FLAGS_time_column), absl::GetFlag(FLAGS_label_column)};
  w.positive_threshold = static_cast<float>(absl::GetFlag(FLAGS_positive_threshold));
  w.text = absl::GetFlag(FLAGS_text);
  auto rule = ParseTextSplitRule(absl::GetFlag(FLAGS_text_split));
  if (!rule.ok())
    return absl::InvalidArgumentError(absl::StrCat("--text_split: ", rule.status().message()));
  w.text_split = {*rule, absl::GetFlag(FLAGS_text_document_words)};
  w.history_length = absl::GetFlag(FLAGS_history);
  w.vocabulary_size = absl::GetFlag(FLAGS_vocab);
  w.window_length = absl::GetFlag(FLAGS_window);
  w.embedding_dim = absl::GetFlag(FLAGS_dim);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.seeds = absl::GetFlag(FLAGS_seeds);
  f.top_k = absl::GetFlag(FLAGS_top_k);
  f.private_profile = absl::GetFlag(FLAGS_private);
  f.paillier_bits = absl::GetFlag(FLAGS_paillier_bits);
  f.insecure_for_comparison = absl::GetFlag(FLAGS_insecure_for_comparison);
  f.report_value_bits = absl::GetFlag(FLAGS_report_value_bits);
  f.choice = {absl::GetFlag(FLAGS_hot_fraction), absl::GetFlag(FLAGS_hot_bins),
              absl::GetFlag(FLAGS_hot_rounds),   absl::GetFlag(FLAGS_cold_bins),
              absl::GetFlag(FLAGS_cold_rounds),  absl::GetFlag(FLAGS_colocation)};
  f.layout_file = absl::GetFlag(FLAGS_layout);
  f.out = absl::GetFlag(FLAGS_out);
  f.backend_words_per_s = absl::GetFlag(FLAGS_backend_words_per_s);
  f.max_bytes = absl::GetFlag(FLAGS_max_bytes);
  f.quick = absl::GetFlag(FLAGS_quick);
  f.model = absl::GetFlag(FLAGS_model);
  f.epochs = absl::GetFlag(FLAGS_epochs);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.validation_examples = absl::GetFlag(FLAGS_validation_examples);
  f.allow_unreachable_rows = absl::GetFlag(FLAGS_allow_unreachable_rows);
  auto unseen = ParseUnseenRowsPolicy(absl::GetFlag(FLAGS_unseen_rows));
  if (!unseen.ok())
    return absl::InvalidArgumentError(absl::StrCat("--unseen_rows: ", unseen.status().message()));
  f.unseen_rows = *unseen;
  f.tolerance = absl::GetFlag(FLAGS_tolerance);
  f.bootstrap = absl::GetFlag(FLAGS_bootstrap);
  f.payoff = absl::GetFlag(FLAGS_payoff);
  f.payoff_max_rows = absl::GetFlag(FLAGS_payoff_max_rows);
  f.synthetic_rows = absl::GetFlag(FLAGS_synthetic_rows);
  f.synthetic_requests = absl::GetFlag(FLAGS_synthetic_requests);
  for (const auto& [value, name] :
       {std::pair{f.seeds, "--seeds"}, {f.threads, "--threads"}, {f.bootstrap, "--bootstrap"}}) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrCat(name, " must be at least 1"));
  }
  if (f.tolerance < 0 || f.validation_examples < 0 || f.epochs < 0) {
    return absl::InvalidArgumentError(
        "--tolerance, --validation_examples and --epochs must not be negative");
  }
  return f;
}

std::array<uint8_t, 16> LayoutSeed(const CodesignFlags& flags) {
  return embedding::LayoutSeedFromU64(flags.seed);
}

std::vector<uint64_t> TrainingSeeds(const CodesignFlags& flags) {
  std::vector<uint64_t> seeds;
  for (int k = 0; k < flags.seeds; ++k) seeds.push_back(flags.seed + k);
  return seeds;
}

TrainOptions TrainOptionsFor(const CodesignFlags& flags, const Workload& workload) {
  TrainOptions options;
  options.seed = flags.seed;
  options.threads = flags.threads;
  if (workload.kind == WorkloadKind::kLanguage) {
    // An LSTM epoch over Brown (~0.9M training tokens) takes minutes on 2 cores: a narrow LSTM,
    // a high learning rate, and the layouts scored on a fixed, genre-spread sample of
    // validation windows. --quick trains one epoch: on fewer windows (12,000) some seeds' models
    // had not yet learnt to use their inputs (the embeddings were worth nothing to them).
    options.epochs = flags.quick ? 1 : 3;
    options.batch_size = 64;
    options.hidden = 64;
    options.learning_rate = 5e-3;
    options.max_validation_examples = flags.quick ? 600 : 1200;
  } else {
    options.epochs = 5;
  }
  if (flags.epochs > 0) options.epochs = flags.epochs;
  if (flags.validation_examples > 0) options.max_validation_examples = flags.validation_examples;
  return options;
}

absl::StatusOr<SweepGrid> GridFromFlags(const CodesignFlags& flags) {
  SweepGrid grid = SweepGrid::Default(flags.quick);
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

SweepOptions SweepOptionsFor(const CodesignFlags& flags) {
  SweepOptions options;
  options.seed = LayoutSeed(flags);
  options.backend_words_per_s = flags.backend_words_per_s;
  options.max_bytes_per_inference = flags.max_bytes;
  options.reachable =
      flags.allow_unreachable_rows ? ReachablePolicy::kOptIn : ReachablePolicy::kAll;
  options.unseen = flags.unseen_rows;
  options.tolerance = flags.tolerance;
  options.bootstrap_replicates = flags.bootstrap;
  options.bootstrap_seed = flags.seed;
  options.threads = flags.threads;
  return options;
}

absl::StatusOr<std::string> OutputFile(const CodesignFlags& flags, const std::string& what) {
  if (flags.out.empty())
    return absl::InvalidArgumentError(absl::StrCat("give --out=FILE (", what, ")"));
  std::error_code ec;
  if (std::filesystem::is_directory(flags.out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out=", flags.out, " is a directory; this command writes one file (", what, ")"));
  }
  return flags.out;
}

absl::StatusOr<std::string> OutputFolder(const CodesignFlags& flags) {
  const std::string folder = flags.out.empty() ? "." : flags.out;
  std::error_code ec;
  if (std::filesystem::exists(folder, ec) && !std::filesystem::is_directory(folder, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out=", folder, " is a file; this command writes into a folder"));
  }
  std::filesystem::create_directories(folder, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot create ", folder, ": ", ec.message()));
  return folder;
}

}  // namespace veil::training
