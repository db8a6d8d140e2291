// The batch-PIR planner: given the public layout and the rows an inference wants, which slot each
// key of each bin fetches. Used by the client (Client::LookupLayout, PrivateEmbeddingBag) and by
// the co-design simulation alike.
//
// Privacy rule: a plan always holds exactly `rounds` keys for every bin of every table, whatever
// is wanted; keys that fetch nothing wanted point at a random slot (dummies). The DPF hides the
// slot of every key, so the servers see the same key counts for every request. A wanted row that
// cannot be served within that budget (its bin's keys are taken) is reported as missing — never
// replaced by a wrong row.
#ifndef VEIL_PIR_BATCH_PLANNER_H_
#define VEIL_PIR_BATCH_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/layout.h"

namespace veil::batch {

struct SlotFetch {
  embedding::SlotRef slot;
  bool dummy = false;  // known to the client only; the key looks the same
};

// Where a wanted row comes from: fetches[fetch] of the plan, at `position` in the fetched entry
// (0 = the slot's own row, 1..c = a co-located copy).
struct RowSource {
  int32_t row = 0;
  int32_t fetch = 0;
  int32_t position = 0;
};

// The real fetches only: what a client decides before padding with dummies. Deterministic.
struct SlotSelection {
  std::vector<SlotFetch> fetches;  // in order of choice; never dummies
  std::vector<RowSource> sources;  // one per served wanted row, in increasing row order
  std::vector<int32_t> missing;    // wanted rows not served, increasing
};

struct FetchPlan {
  // Table-major then bin-major: for each table with rounds > 0, for each bin, exactly `rounds`
  // fetches (real ones first within a bin; the order is invisible to the servers).
  std::vector<SlotFetch> fetches;
  std::vector<RowSource> sources;  // indices into `fetches`
  std::vector<int32_t> missing;
};

// Chooses slots greedily: repeatedly the slot that serves the most not yet served wanted rows
// (its own row plus co-located copies), among the slots of wanted rows whose bin has keys left;
// ties go to the lower (table, bin, slot). Duplicate wanted rows count once.
// Returns INVALID_ARGUMENT if a wanted row is outside [0, layout.num_rows()).
absl::StatusOr<SlotSelection> ChooseSlots(const embedding::Layout& layout,
                                          absl::Span<const int32_t> wanted_rows);

// ChooseSlots, then pads every bin to exactly `rounds` keys with dummy fetches of slots drawn
// from `random` (CryptoRandom in production, pir/batch/random.h; tests pass a seeded engine).
absl::StatusOr<FetchPlan> PlanFetch(const embedding::Layout& layout,
                                    absl::Span<const int32_t> wanted_rows, absl::BitGenRef random);

// Keys and bytes of one inference under `layout`, identical for every request: additive DPF keys
// (16-word leaves) over each bin, their sizes from dpf::DpfKey::SerializedSize.
struct PlanCost {
  int64_t keys = 0;           // keys per server
  int64_t words_scanned = 0;  // server computation per server: Σ keys × bin entries × entry words
  int64_t upload_bytes = 0;   // both servers
  int64_t download_bytes = 0;  // both servers
};
PlanCost CostOf(const embedding::Layout& layout);

}  // namespace veil::batch

#endif  // VEIL_PIR_BATCH_PLANNER_H_
