#include "training_tools/workload.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "training_tools/data/movielens.h"
#include "training_tools/data/text.h"

namespace veil::training {
namespace {

constexpr double kValidationFraction = 0.2;
constexpr int kValidationEveryNthDocument = 5;

Workload FromInteractions(const std::string& name, const InteractionLog& log,
                          const WorkloadOptions& options) {
  const InteractionSplit split = SplitByTime(log, kValidationFraction);
  Workload workload;
  workload.name = name;
  workload.kind = WorkloadKind::kRecommendation;
  workload.num_rows = static_cast<int32_t>(log.item_names.size());
  workload.row_words = options.embedding_dim;
  workload.train_events = split.train;
  workload.has_labels = log.has_label;
  // Training histories see only training events; validation histories see everything before
  // the target, as the device would.
  workload.train_samples = BuildRecommendationSamples(
      split.train, split.train, options.history_length, options.positive_threshold);
  workload.validation_samples = BuildRecommendationSamples(
      log.events, split.validation, options.history_length, options.positive_threshold);
  for (const auto& s : workload.train_samples) workload.train_requests.push_back(WantedRows(s));
  for (const Interaction& e : split.train) workload.train_clients.push_back(e.user);
  for (const auto& s : workload.validation_samples) {
    workload.validation_requests.push_back(WantedRows(s));
  }
  for (const Interaction& e : split.validation) workload.validation_clients.push_back(e.user);
  workload.description = absl::StrFormat(
      "%d interactions of %d users over %d items; validation: the last %.0f%% of each user's "
      "interactions by time (%d)",
      log.events.size(), log.user_names.size(), log.item_names.size(), 100 * kValidationFraction,
      split.validation.size());
  return workload;
}

absl::StatusOr<Workload> FromDocuments(const std::string& name, std::vector<Document> documents,
                                       const std::string& description,
                                       const WorkloadOptions& options) {
  if (documents.size() < kValidationEveryNthDocument) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", documents.size(), " documents (", description,
                     "); the split needs at least ", kValidationEveryNthDocument,
                     " (every 5th is validation): give a smaller --text_document_words or another "
                     "--text_split"));
  }
  DocumentSplit split = SplitByDocument(std::move(documents), kValidationEveryNthDocument);
  const Vocabulary vocabulary = Vocabulary::Build(split.train, options.vocabulary_size);
  Workload workload;
  workload.name = name;
  workload.kind = WorkloadKind::kLanguage;
  workload.description =
      absl::StrCat(description, "; validation: every ", kValidationEveryNthDocument,
                   "th document (", split.validation.size(), ")");
  workload.num_rows = vocabulary.size();
  workload.row_words = options.embedding_dim;
  const auto train_streams = EncodeDocuments(split.train, vocabulary);
  for (size_t d = 0; d < train_streams.size(); ++d) {
    for (auto& window : TokenWindows({train_streams[d]}, options.window_length)) {
      workload.train_windows.push_back(std::move(window));
      workload.train_clients.push_back(static_cast<int32_t>(d));
    }
  }
  const auto validation_streams = EncodeDocuments(split.validation, vocabulary);
  for (size_t d = 0; d < validation_streams.size(); ++d) {
    for (auto& window : TokenWindows({validation_streams[d]}, options.window_length)) {
      workload.validation_windows.push_back(std::move(window));
      workload.validation_clients.push_back(static_cast<int32_t>(d));
    }
  }
  for (const auto& w : workload.train_windows) workload.train_requests.push_back(WantedRows(w));
  for (const auto& w : workload.validation_windows) {
    workload.validation_requests.push_back(WantedRows(w));
  }
  return workload;
}

}  // namespace

absl::StatusOr<Workload> LoadWorkload(const WorkloadOptions& options) {
  const int sources =
      !options.preset.empty() + !options.interactions.empty() + !options.text.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --workload=movielens|brown, --interactions=FILE, --text=FILE");
  }
  if (options.embedding_dim <= 0 || options.history_length <= 0 || options.window_length <= 0 ||
      options.vocabulary_size < 3) {
    return absl::InvalidArgumentError("workload: sizes must be positive (vocabulary at least 3)");
  }
  if (options.preset == "movielens") {
    auto movielens = LoadMovieLens(options.data_dir + "/movielens");
    if (!movielens.ok()) return movielens.status();
    return FromInteractions("movielens", InteractionsFromMovieLens(*movielens), options);
  }
  if (options.preset == "brown") {
    auto brown = ReadBrownCorpus(options.data_dir + "/brown");
    if (!brown.ok()) return brown.status();
    const size_t documents = brown->size();
    return FromDocuments("brown", std::move(*brown),
                         absl::StrCat("the Brown corpus, one document per file (", documents, ")"),
                         options);
  }
  if (!options.preset.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown workload \"", options.preset, "\" (movielens or brown)"));
  }
  if (!options.interactions.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(options.interactions, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.interactions, " is a directory; the interaction log is one CSV file"));
    }
    auto log = ReadInteractionsCsv(options.interactions, options.columns);
    if (!log.ok()) return log.status();
    return FromInteractions(options.interactions, *log, options);
  }
  auto corpus = ReadTextCorpus(options.text, options.text_split);
  if (!corpus.ok()) return corpus.status();
  return FromDocuments(options.text, std::move(corpus->documents), corpus->description, options);
}

}  // namespace veil::training
