#include "training_tools/profile.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"

namespace veil::training {

AccessProfile BuildProfile(const std::vector<RowRequest>& requests, int32_t num_rows, int top_k) {
  AccessProfile profile;
  profile.num_rows = num_rows;
  profile.num_requests = static_cast<int64_t>(requests.size());
  profile.frequency.assign(num_rows, 0);
  std::vector<absl::flat_hash_map<int32_t, int32_t>> pairs(num_rows);
  std::vector<int32_t> rows;
  for (const RowRequest& request : requests) {
    rows.clear();
    for (int32_t row : request) {
      if (row >= 0 && row < num_rows) rows.push_back(row);
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    for (size_t i = 0; i < rows.size(); ++i) {
      ++profile.frequency[rows[i]];
      for (size_t j = 0; j < rows.size(); ++j) {
        if (i != j) ++pairs[rows[i]][rows[j]];
      }
    }
  }
  profile.co_accessed.resize(num_rows);
  for (int32_t row = 0; row < num_rows; ++row) {
    std::vector<std::pair<int32_t, int32_t>> ranked;  // (−count, other row)
    for (const auto& [other, count] : pairs[row]) {
      if (count >= 2) ranked.emplace_back(-count, other);
    }
    const size_t keep = std::min<size_t>(top_k, ranked.size());
    std::partial_sort(ranked.begin(), ranked.begin() + keep, ranked.end());
    for (size_t i = 0; i < keep; ++i) profile.co_accessed[row].push_back(ranked[i].second);
  }
  return profile;
}

std::vector<int32_t> RowsByFrequency(const AccessProfile& profile) {
  std::vector<int32_t> rows(profile.num_rows);
  for (int32_t row = 0; row < profile.num_rows; ++row) rows[row] = row;
  std::stable_sort(rows.begin(), rows.end(), [&](int32_t a, int32_t b) {
    return profile.frequency[a] > profile.frequency[b];
  });
  return rows;
}

void WriteProfileCsv(const AccessProfile& profile, std::ostream& out) {
  out << "row,frequency,co_accessed\n";
  for (int32_t row = 0; row < profile.num_rows; ++row) {
    out << row << ',' << profile.frequency[row] << ',';
    for (size_t i = 0; i < profile.co_accessed[row].size(); ++i) {
      out << (i ? " " : "") << profile.co_accessed[row][i];
    }
    out << '\n';
  }
}

absl::StatusOr<embedding::Layout> DesignLayout(const AccessProfile& profile, int32_t row_words,
                                               const LayoutChoice& choice,
                                               const std::array<uint8_t, 16>& seed) {
  const int32_t hot_count = static_cast<int32_t>(
      std::lround(std::clamp(choice.hot_fraction, 0.0, 1.0) * profile.num_rows));
  std::vector<int32_t> by_frequency = RowsByFrequency(profile);
  std::vector<int32_t> hot(by_frequency.begin(), by_frequency.begin() + hot_count);
  const int32_t cold_count = profile.num_rows - hot_count;

  embedding::LayoutParams params;
  params.num_rows = profile.num_rows;
  params.row_words = row_words;
  params.colocation = choice.colocation;
  params.seed = seed;
  if (hot_count > 0) params.hot = {std::min(choice.hot_bins, hot_count), choice.hot_rounds};
  if (cold_count > 0) params.cold = {std::min(choice.cold_bins, cold_count), choice.cold_rounds};

  std::vector<std::vector<int32_t>> companions;
  if (choice.colocation > 0) {
    companions.resize(profile.num_rows);
    for (int32_t row = 0; row < profile.num_rows; ++row) {
      const auto& co = profile.co_accessed[row];
      companions[row].assign(co.begin(),
                             co.begin() + std::min<size_t>(choice.colocation, co.size()));
    }
  }
  return embedding::Layout::Create(params, std::move(hot), companions);
}

}  // namespace veil::training
