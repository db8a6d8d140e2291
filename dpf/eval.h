// CPU evaluation of DPF keys: one point, the full domain (bounded window), and the fused
// evaluate-and-multiply with a table (EvalDot), for one key or several sharing each table read.
#ifndef VEIL_DPF_EVAL_H_
#define VEIL_DPF_EVAL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/key.h"

namespace veil::dpf {

// Row-major table of `rows` rows, each `row_words` 32-bit words, rows `stride_words` apart
// (stride_words >= row_words; 0 means row_words). Not owned.
struct TableView {
  const uint32_t* words = nullptr;
  uint64_t rows = 0;
  uint32_t row_words = 0;
  uint64_t stride_words = 0;

  uint64_t stride() const { return stride_words ? stride_words : row_words; }
  const uint32_t* row(uint64_t i) const { return words + i * stride(); }
};

// This party's share at point x: a 32-bit word (additive) or 0/1 (XOR).
// Returns INVALID_ARGUMENT if x is outside the domain.
absl::StatusOr<uint32_t> EvalPoint(const DpfKey& key, uint64_t x);

// Receives consecutive leaf blocks of the full-domain evaluation: `words` holds
// leaf_block_words() words for each of the leaves starting at leaf index `first_leaf`.
using LeafConsumer = std::function<void(uint64_t first_leaf, absl::Span<const uint32_t> words)>;

// Evaluates every point of the domain, handing the leaves to `consume` a window at a time. Node
// seeds never take more than O(2^window_log + log N) memory.
absl::Status EvalFullWindowed(const DpfKey& key, const LeafConsumer& consume, int window_log = 10);

// The whole expanded vector: 2^log_domain words (additive) or 2^log_domain / 32 words of bits
// (XOR, point x at bit x % 32 of word x / 32; padded to one word for tiny domains).
absl::StatusOr<std::vector<uint32_t>> EvalFull(const DpfKey& key);

// Fused evaluation and multiply-accumulate: out[j] = sum_x y(x) * table[x][j] mod 2^32 (additive)
// or XOR of the rows x with y(x) = 1 (XOR keys). The expanded vector is never materialised.
// `out` has table.row_words words. Returns INVALID_ARGUMENT if the key's domain does not match
// the table (log_domain must equal LogDomainForRows(table.rows)) or out has the wrong size.
absl::Status EvalDot(const DpfKey& key, const TableView& table, absl::Span<uint32_t> out,
                     int threads = 1);

// Several keys against one table, sharing each table row read: out holds keys.size() answers
// of table.row_words words each. Keys may mix PRGs but must all fit the table.
absl::Status EvalDotMulti(absl::Span<const DpfKey* const> keys, const TableView& table,
                          absl::Span<uint32_t> out, int threads = 1);

}  // namespace veil::dpf

#endif  // VEIL_DPF_EVAL_H_
