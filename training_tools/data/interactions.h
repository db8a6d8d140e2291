// Interaction logs (user, item, timestamp, optional label), read from any CSV file or converted
// from MovieLens, their deterministic split by time, and the recommendation samples built from
// them: the user's recent history (the rows an EmbeddingBag looks up) plus the candidate item.
#ifndef VEIL_TRAINING_TOOLS_DATA_INTERACTIONS_H_
#define VEIL_TRAINING_TOOLS_DATA_INTERACTIONS_H_

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training_tools/data/movielens.h"

namespace veil::training {

struct Interaction {
  int32_t user = 0;  // dense index into InteractionLog::user_names
  int32_t item = 0;  // dense index into InteractionLog::item_names: the embedding table row
  int64_t timestamp = 0;
  float label = 0;  // the label or rating column; 0 when the log has none
};

struct InteractionLog {
  std::vector<std::string> user_names;  // original ids, in order of first appearance
  std::vector<std::string> item_names;
  std::vector<Interaction> events;
  bool has_label = false;
};

// Column names of a CSV interaction log. An empty `label` means the log has no label column.
struct CsvColumns {
  std::string user = "user";
  std::string item = "item";
  std::string timestamp = "timestamp";
  std::string label;
};

// Parses a CSV log with a header line naming the columns (any order, extra columns ignored; fields
// separated by commas, no quoting). Returns INVALID_ARGUMENT with the source name and line number
// for a missing column, a wrong field count, or a non-numeric timestamp or label.
absl::StatusOr<InteractionLog> ParseInteractionsCsv(std::istream& in, const CsvColumns& columns,
                                                    const std::string& source_name);
// Reads `path` with ParseInteractionsCsv. Returns NOT_FOUND if it cannot be opened.
absl::StatusOr<InteractionLog> ReadInteractionsCsv(const std::string& path,
                                                   const CsvColumns& columns);

// MovieLens as an interaction log: label = stars; items numbered in increasing movie id order
// (the same rows as DenseIndex::FromMovies), users in increasing user id order.
InteractionLog InteractionsFromMovieLens(const MovieLensRatings& movielens);

// Splits each user's events by time: the last `validation_fraction` of them (at least one when
// the user has two or more) go to validation, the rest to training. Ties in time are ordered
// by item, so the split is deterministic.
struct InteractionSplit {
  std::vector<Interaction> train;
  std::vector<Interaction> validation;
};
InteractionSplit SplitByTime(const InteractionLog& log, double validation_fraction);

// One recommendation example: the user's most recent earlier items (at most `history_length`,
// newest last) and the candidate item, with the binary label (label ≥ `positive_threshold`).
struct RecommendationSample {
  std::vector<int32_t> history;
  std::vector<float> history_labels;  // the user's own labels (ratings) of `history`: on-device
  int32_t item = 0;
  float label = 0;
};

// Builds one sample per event of `targets`. A user's history comes from `history_source`
// (all events known on the device at that time: the training events and, for validation,
// the earlier validation events too) strictly before the target's time (ties: earlier item).
std::vector<RecommendationSample> BuildRecommendationSamples(
    const std::vector<Interaction>& history_source, const std::vector<Interaction>& targets,
    int history_length, float positive_threshold);

// The distinct embedding rows an inference of `sample` looks up (history and candidate).
std::vector<int32_t> WantedRows(const RecommendationSample& sample);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_DATA_INTERACTIONS_H_
