#include "training_tools/data/interactions.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace veil::training {
namespace {

// Dense numbering of string ids in order of first appearance.
class NameIndex {
 public:
  explicit NameIndex(std::vector<std::string>& names) : names_(names) {}
  int32_t Intern(absl::string_view name) {
    auto [it, inserted] = rows_.try_emplace(name, static_cast<int32_t>(names_.size()));
    if (inserted) names_.emplace_back(name);
    return it->second;
  }

 private:
  std::vector<std::string>& names_;
  absl::flat_hash_map<std::string, int32_t> rows_;
};

absl::Status LineError(const std::string& source, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", what));
}

bool EventBefore(const Interaction& a, const Interaction& b) {
  return std::tie(a.timestamp, a.item) < std::tie(b.timestamp, b.item);
}

// Events grouped by user, each group in time order.
std::vector<std::vector<Interaction>> ByUser(const std::vector<Interaction>& events) {
  int32_t users = 0;
  for (const Interaction& e : events) users = std::max(users, e.user + 1);
  std::vector<std::vector<Interaction>> groups(users);
  for (const Interaction& e : events) groups[e.user].push_back(e);
  for (auto& group : groups) std::sort(group.begin(), group.end(), EventBefore);
  return groups;
}

}  // namespace

absl::StatusOr<InteractionLog> ParseInteractionsCsv(std::istream& in, const CsvColumns& columns,
                                                    const std::string& source_name) {
  std::string line;
  if (!std::getline(in, line)) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": empty file, expected a header"));
  }
  std::vector<std::string> header = absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), ',');
  auto column_of = [&](const std::string& name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (absl::StripAsciiWhitespace(header[i]) == name) return static_cast<int>(i);
    }
    return -1;
  };
  const int user_col = column_of(columns.user), item_col = column_of(columns.item),
            time_col = column_of(columns.timestamp);
  const int label_col = columns.label.empty() ? -1 : column_of(columns.label);
  for (const auto& [name, col, what] : {std::tuple{columns.user, user_col, "user"},
                                        {columns.item, item_col, "item"},
                                        {columns.timestamp, time_col, "timestamp"},
                                        {columns.label, label_col, "label"}}) {
    if (col < 0 && !name.empty()) {
      return LineError(
          source_name, 1,
          absl::StrCat("no column named \"", name, "\" for the ", what,
                       " (the header has: ", absl::StripTrailingAsciiWhitespace(line), ")"));
    }
  }

  InteractionLog log;
  log.has_label = label_col >= 0;
  NameIndex users(log.user_names), items(log.item_names);
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
    if (text.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(text, ',');
    if (fields.size() != header.size()) {
      return LineError(source_name, line_number,
                       absl::StrCat("expected ", header.size(), " fields, found ", fields.size()));
    }
    Interaction event;
    absl::string_view time_field = absl::StripAsciiWhitespace(fields[time_col]);
    auto [end, ec] =
        std::from_chars(time_field.data(), time_field.data() + time_field.size(), event.timestamp);
    if (ec != std::errc() || end != time_field.data() + time_field.size()) {
      return LineError(source_name, line_number,
                       absl::StrCat("timestamp \"", time_field, "\" is not an integer"));
    }
    if (label_col >= 0) {
      absl::string_view label_field = absl::StripAsciiWhitespace(fields[label_col]);
      double label;
      auto [label_end, label_ec] =
          std::from_chars(label_field.data(), label_field.data() + label_field.size(), label);
      if (label_ec != std::errc() || label_end != label_field.data() + label_field.size() ||
          !std::isfinite(label)) {
        return LineError(source_name, line_number,
                         absl::StrCat("label \"", label_field, "\" is not a number"));
      }
      event.label = static_cast<float>(label);
    }
    absl::string_view user = absl::StripAsciiWhitespace(fields[user_col]);
    absl::string_view item = absl::StripAsciiWhitespace(fields[item_col]);
    if (user.empty() || item.empty()) {
      return LineError(source_name, line_number, "empty user or item");
    }
    event.user = users.Intern(user);
    event.item = items.Intern(item);
    log.events.push_back(event);
  }
  if (log.events.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no interactions"));
  }
  return log;
}

absl::StatusOr<InteractionLog> ReadInteractionsCsv(const std::string& path,
                                                   const CsvColumns& columns) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return ParseInteractionsCsv(in, columns, path);
}

InteractionLog InteractionsFromMovieLens(const MovieLensRatings& movielens) {
  std::vector<int32_t> user_ids;
  for (const Rating& r : movielens.ratings) user_ids.push_back(r.user_id);
  const DenseIndex users = DenseIndex::FromIds(user_ids);
  const DenseIndex items = DenseIndex::FromMovies(movielens.ratings);
  InteractionLog log;
  log.has_label = true;
  for (int32_t id : users.ids()) log.user_names.push_back(absl::StrCat(id));
  for (int32_t id : items.ids()) log.item_names.push_back(absl::StrCat(id));
  log.events.reserve(movielens.ratings.size());
  for (const Rating& r : movielens.ratings) {
    log.events.push_back({users.RowOf(r.user_id), items.RowOf(r.movie_id), r.timestamp, r.rating});
  }
  return log;
}

InteractionSplit SplitByTime(const InteractionLog& log, double validation_fraction) {
  InteractionSplit split;
  for (const auto& group : ByUser(log.events)) {
    size_t held_out = static_cast<size_t>(std::ceil(validation_fraction * group.size()));
    if (group.size() < 2) held_out = 0;
    const size_t train = group.size() - held_out;
    split.train.insert(split.train.end(), group.begin(), group.begin() + train);
    split.validation.insert(split.validation.end(), group.begin() + train, group.end());
  }
  return split;
}

std::vector<RecommendationSample> BuildRecommendationSamples(
    const std::vector<Interaction>& history_source, const std::vector<Interaction>& targets,
    int history_length, float positive_threshold) {
  const auto histories = ByUser(history_source);
  std::vector<RecommendationSample> samples;
  samples.reserve(targets.size());
  for (const Interaction& target : targets) {
    RecommendationSample sample;
    sample.item = target.item;
    sample.label = target.label >= positive_threshold ? 1.0f : 0.0f;
    if (static_cast<size_t>(target.user) < histories.size()) {
      const auto& events = histories[target.user];
      auto end = std::lower_bound(events.begin(), events.end(), target, EventBefore);
      auto begin = end - std::min<std::ptrdiff_t>(history_length, end - events.begin());
      for (auto it = begin; it != end; ++it) {
        sample.history.push_back(it->item);
        sample.history_labels.push_back(it->label);
      }
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::vector<int32_t> WantedRows(const RecommendationSample& sample) {
  std::vector<int32_t> rows = sample.history;
  rows.push_back(sample.item);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace veil::training
