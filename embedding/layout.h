// The public batch-PIR layout of an embedding table: which rows form the hot table, how each
// table is split into bins, which rows are co-located with each row, and how many keys (rounds)
// a client sends to every bin per inference. Servers and clients load the same layout file.
//
// Placement: each table's rows are ordered by SipHash-2-4(layout seed, table, row) and dealt
// round-robin into bins (position p → bin p mod B, slot p div B), so bins differ by at most one
// row and nobody can steer rows into chosen bins without the seed changing. The seed is public:
// the layout hides nothing by itself; privacy comes from the constant key count per bin.
//
// Co-location (factor c): every slot holds an entry of 1 + c rows — its own row followed by the
// c rows most often requested together with it (from training logs; -1 where there are fewer).
// A client fetching a row's slot gets those companions for free, which turns bin collisions
// between co-accessed rows into hits at the price of (1 + c)× wider entries.
//
// Every row of the table is the primary row of exactly one slot in exactly one table (the hot
// table holds the rows listed as hot, the cold table all others).
#ifndef VEIL_EMBEDDING_LAYOUT_H_
#define VEIL_EMBEDDING_LAYOUT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::embedding {

inline constexpr int kHotTable = 0;
inline constexpr int kColdTable = 1;
inline constexpr int kNumLayoutTables = 2;

// Bounds checked by Create and Parse: a layout file is untrusted input.
inline constexpr int32_t kMaxColocation = 16;
inline constexpr int32_t kMaxRowWords = 1 << 16;
inline constexpr int32_t kMaxRounds = 64;
inline constexpr int32_t kMaxLayoutRows = 1 << 30;
// What Parse and ReadFile let a layout file make them allocate by default: a file of a few bytes
// (co-location 0) may declare up to kMaxLayoutRows rows, ~40 bytes of memory each.
inline constexpr uint64_t kDefaultMaxLayoutMemoryBytes = uint64_t{1} << 30;

struct TableShape {
  int32_t bins = 0;    // 0 only for an empty table
  int32_t rounds = 0;  // keys per bin per inference (0: the table is never queried)
};

struct LayoutParams {
  int32_t num_rows = 0;    // rows of the embedding table
  int32_t row_words = 0;   // 32-bit words per row
  int32_t colocation = 0;  // c: companions stored with each row
  TableShape hot;
  TableShape cold;
  std::array<uint8_t, 16> seed{};  // public key of the placement permutation
};

// The public placement key from a 64-bit seed (--seed of the tools): two splitmix64 outputs.
std::array<uint8_t, 16> LayoutSeedFromU64(uint64_t seed);

struct SlotRef {
  int32_t table = 0;
  int32_t bin = 0;
  int32_t slot = 0;
};

class Layout {
 public:
  // Places the rows. `hot_rows` lists the distinct rows of the hot table; `companions[r]` holds at
  // most c distinct rows other than r, in decreasing co-access order (empty or shorter is fine;
  // an empty vector means no companions at all). Returns INVALID_ARGUMENT for out-of-range rows,
  // duplicates, sizes beyond the k* bounds, a non-empty table without bins, more bins than rows,
  // or rounds for an empty table.
  static absl::StatusOr<Layout> Create(const LayoutParams& params, std::vector<int32_t> hot_rows,
                                       const std::vector<std::vector<int32_t>>& companions);

  // The versioned file: magic "VEILLAYT", version, parameters, hot rows, companions, and a
  // BLAKE2b-256 digest of all that. Parse returns INVALID_ARGUMENT for a wrong magic, version,
  // size or digest, or any value Create would reject, and RESOURCE_EXHAUSTED before allocating
  // when building the layout would need more than `max_memory_bytes` (PeakMemoryBytes).
  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<Layout> Parse(absl::Span<const uint8_t> bytes,
                                      uint64_t max_memory_bytes = kDefaultMaxLayoutMemoryBytes);
  // File wrappers. ReadFile returns NOT_FOUND if the file cannot be opened.
  absl::Status WriteFile(const std::string& path) const;
  static absl::StatusOr<Layout> ReadFile(const std::string& path,
                                         uint64_t max_memory_bytes = kDefaultMaxLayoutMemoryBytes);
  // An upper bound on the bytes Create allocates at its peak for these parameters.
  static uint64_t PeakMemoryBytes(const LayoutParams& params);

  const LayoutParams& params() const { return params_; }
  int32_t num_rows() const { return params_.num_rows; }
  // Rows per entry (1 + c) and 32-bit words per entry: a bin is a PIR table of entries.
  int32_t entry_rows() const { return 1 + params_.colocation; }
  int64_t entry_words() const { return int64_t{entry_rows()} * params_.row_words; }

  const TableShape& shape(int table) const {
    return table == kHotTable ? params_.hot : params_.cold;
  }
  // Primary rows placed in `table`, and slots per bin (the last ones may be empty: -1 rows).
  int32_t table_rows(int table) const { return tables_[table].num_rows; }
  int32_t slots_per_bin(int table) const { return tables_[table].slots_per_bin; }
  const std::vector<int32_t>& hot_rows() const { return hot_rows_; }

  // Where `row` is the primary row (row must be in [0, num_rows)).
  SlotRef Locate(int32_t row) const { return locations_[row]; }
  // The entry of a slot: entry_rows() row ids, the primary first, -1 for nothing.
  absl::Span<const int32_t> Entry(const SlotRef& slot) const;

  // The DPF domain of a bin: ceil(log2(slots_per_bin)), at least 1.
  int LogBinDomain(int table) const;

 private:
  struct TableBins {
    int32_t num_rows = 0;
    int32_t slots_per_bin = 0;
    std::vector<int32_t> entries;  // [bin][slot][entry_rows()]
  };

  LayoutParams params_;
  std::vector<int32_t> hot_rows_;    // sorted
  std::vector<int32_t> companions_;  // [row][c], -1 padded
  std::array<TableBins, kNumLayoutTables> tables_;
  std::vector<SlotRef> locations_;
};

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_LAYOUT_H_
