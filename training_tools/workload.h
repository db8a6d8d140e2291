// A co-design workload: one embedding table, the rows each inference of the training and the
// validation split looks up, and the model examples behind them. MovieLens and Brown are presets
// over the generic readers (--interactions=FILE, --text=FILE).
#ifndef VEIL_TRAINING_TOOLS_WORKLOAD_H_
#define VEIL_TRAINING_TOOLS_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training_tools/data/interactions.h"
#include "training_tools/data/text.h"
#include "training_tools/profile.h"

namespace veil::training {

enum class WorkloadKind { kRecommendation, kLanguage };

struct WorkloadOptions {
  std::string preset;            // "movielens", "brown" or empty (then a file below)
  std::string data_dir;          // <repo>/data: where the presets' files are
  std::string interactions;      // CSV interaction log
  CsvColumns columns;            // its column names
  float positive_threshold = 4;  // label ≥ threshold is a click (MovieLens: 4 stars)
  std::string text;              // plain-text file or directory
  TextSplit text_split;          // how `text` becomes documents
  int history_length = 20;       // recommendation: items in the user's bag
  int vocabulary_size = 3000;    // language: rows of the word table (2 reserved)
  int window_length = 32;        // language: tokens per inference
  int embedding_dim = 32;        // floats per row (= 32-bit words per row)
};

struct Workload {
  std::string name;
  WorkloadKind kind = WorkloadKind::kRecommendation;
  int32_t num_rows = 0;
  int32_t row_words = 0;
  std::vector<RowRequest> train_requests;
  // Who makes each training request (same order): the user, or the document's index among the
  // training documents. Private profiles treat each as one reporting client.
  std::vector<int32_t> train_clients;
  std::vector<RowRequest> validation_requests;
  // Who makes each validation request (same order): the user, or the validation document.
  std::vector<int32_t> validation_clients;
  // Recommendation: whether the log has a label column (the model needs one).
  bool has_labels = false;
  // How the source became requests, for the user (text: the rule that cut it into documents).
  std::string description;
  // Recommendation: the training split's events, and one sample per request, same order.
  std::vector<Interaction> train_events;
  std::vector<RecommendationSample> train_samples;
  std::vector<RecommendationSample> validation_samples;
  // Language: one window (inputs + targets) per request, same order.
  std::vector<std::vector<int32_t>> train_windows;
  std::vector<std::vector<int32_t>> validation_windows;
};

// Loads and splits a workload (MovieLens: the last 20% of each user's ratings by time are
// validation; text: every 5th document). Returns the readers' errors, or INVALID_ARGUMENT when
// no or several sources are given, the preset is unknown, a CSV log is a directory, or a corpus
// gives fewer than 5 documents.
absl::StatusOr<Workload> LoadWorkload(const WorkloadOptions& options);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_WORKLOAD_H_
