#include "pir/batch/planner.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpf/key.h"

namespace veil::batch {
namespace {

using embedding::Layout;
using embedding::SlotRef;

bool SlotLess(const SlotRef& a, const SlotRef& b) {
  return std::tie(a.table, a.bin, a.slot) < std::tie(b.table, b.bin, b.slot);
}

int64_t BinKey(const SlotRef& s) { return (int64_t{s.table} << 32) | static_cast<uint32_t>(s.bin); }

}  // namespace

absl::StatusOr<SlotSelection> ChooseSlots(const Layout& layout,
                                          absl::Span<const int32_t> wanted_rows) {
  std::vector<int32_t> wanted(wanted_rows.begin(), wanted_rows.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  if (!wanted.empty() && (wanted.front() < 0 || wanted.back() >= layout.num_rows())) {
    return absl::InvalidArgumentError(
        absl::StrCat("planner: wanted row out of range [0, ", layout.num_rows(), ")"));
  }
  // Candidates: the slots of the wanted rows. A slot whose own row is not wanted could only
  // serve co-located copies; skipping those keeps planning linear in the request.
  std::vector<SlotRef> candidates;
  candidates.reserve(wanted.size());
  for (int32_t row : wanted) {
    const SlotRef slot = layout.Locate(row);
    if (layout.shape(slot.table).rounds > 0) candidates.push_back(slot);
  }
  std::sort(candidates.begin(), candidates.end(), SlotLess);

  absl::flat_hash_map<int32_t, bool> served;  // wanted row → served yet
  for (int32_t row : wanted) served[row] = false;
  absl::flat_hash_map<int64_t, int32_t> keys_left;
  for (const SlotRef& slot : candidates) {
    keys_left.try_emplace(BinKey(slot), layout.shape(slot.table).rounds);
  }

  SlotSelection selection;
  std::vector<bool> used(candidates.size(), false);
  while (true) {
    int best = -1, best_gain = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (used[i] || keys_left[BinKey(candidates[i])] == 0) continue;
      int gain = 0;
      for (int32_t row : layout.Entry(candidates[i])) {
        auto it = row >= 0 ? served.find(row) : served.end();
        gain += it != served.end() && !it->second;
      }
      if (gain > best_gain) {
        best = static_cast<int>(i);
        best_gain = gain;
      }
    }
    if (best < 0) break;
    used[best] = true;
    --keys_left[BinKey(candidates[best])];
    const int32_t fetch = static_cast<int32_t>(selection.fetches.size());
    selection.fetches.push_back({candidates[best], false});
    const auto entry = layout.Entry(candidates[best]);
    for (int32_t position = 0; position < static_cast<int32_t>(entry.size()); ++position) {
      auto it = entry[position] >= 0 ? served.find(entry[position]) : served.end();
      if (it == served.end() || it->second) continue;
      it->second = true;
      selection.sources.push_back({entry[position], fetch, position});
    }
  }
  std::sort(selection.sources.begin(), selection.sources.end(),
            [](const RowSource& a, const RowSource& b) { return a.row < b.row; });
  for (int32_t row : wanted) {
    if (!served[row]) selection.missing.push_back(row);
  }
  return selection;
}

absl::StatusOr<FetchPlan> PlanFetch(const Layout& layout, absl::Span<const int32_t> wanted_rows,
                                    absl::BitGenRef random) {
  auto selection = ChooseSlots(layout, wanted_rows);
  if (!selection.ok()) return selection.status();
  // Real fetches grouped by bin, then each bin padded to `rounds` keys.
  absl::flat_hash_map<int64_t, std::vector<int32_t>> real_by_bin;
  for (int32_t i = 0; i < static_cast<int32_t>(selection->fetches.size()); ++i) {
    real_by_bin[BinKey(selection->fetches[i].slot)].push_back(i);
  }
  FetchPlan plan;
  plan.missing = std::move(selection->missing);
  std::vector<int32_t> new_index(selection->fetches.size());
  for (int t = 0; t < embedding::kNumLayoutTables; ++t) {
    const embedding::TableShape& shape = layout.shape(t);
    for (int32_t bin = 0; bin < shape.bins && shape.rounds > 0; ++bin) {
      const std::vector<int32_t>& real = real_by_bin[BinKey({t, bin, 0})];
      for (int32_t i : real) {
        new_index[i] = static_cast<int32_t>(plan.fetches.size());
        plan.fetches.push_back(selection->fetches[i]);
      }
      for (size_t k = real.size(); k < static_cast<size_t>(shape.rounds); ++k) {
        const int32_t slot = absl::Uniform<int32_t>(random, 0, layout.slots_per_bin(t));
        plan.fetches.push_back({{t, bin, slot}, true});
      }
    }
  }
  plan.sources = std::move(selection->sources);
  for (RowSource& source : plan.sources) source.fetch = new_index[source.fetch];
  return plan;
}

PlanCost CostOf(const Layout& layout) {
  PlanCost cost;
  for (int t = 0; t < embedding::kNumLayoutTables; ++t) {
    const embedding::TableShape& shape = layout.shape(t);
    const int64_t keys = int64_t{shape.bins} * shape.rounds;
    cost.keys += keys;
    cost.words_scanned += keys * layout.slots_per_bin(t) * layout.entry_words();
    dpf::DpfParameters key_params;
    key_params.log_domain = layout.LogBinDomain(t);
    cost.upload_bytes += 2 * keys * static_cast<int64_t>(dpf::DpfKey::SerializedSize(key_params));
    cost.download_bytes += 2 * keys * layout.entry_words() * 4;
  }
  return cost;
}

}  // namespace veil::batch
