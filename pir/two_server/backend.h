// The engine a server hands DPF keys to: one pass over the table answers a batch of keys.
// CPU (this folder) and GPU (gpu/) implementations share this interface; callers never branch on
// the backend (faiss's GpuIndex pattern).
#ifndef VEIL_PIR_TWO_SERVER_BACKEND_H_
#define VEIL_PIR_TWO_SERVER_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "pir/two_server/row_range.h"

namespace veil::pir {

// The rows of `range` (which must pass CheckRange) as a table of their own.
dpf::TableView RangeView(const dpf::TableView& table, const RowRange& range);

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "gpu", for logs and stats.
  virtual std::string name() const = 0;
  virtual const dpf::TableView& table() const = 0;

  // Answers every key in one pass over the table: out[k * row_words + j] is this party's share of
  // word j for keys[k]. Returns INVALID_ARGUMENT if a key does not fit the table (domain, output
  // type) or out does not hold keys.size() * row_words words.
  virtual absl::Status Answer(absl::Span<const dpf::DpfKey* const> keys,
                              absl::Span<uint32_t> out) = 0;

  // As Answer, over the rows of `range` only: each key's domain must be
  // LogDomainForRows(range.rows) and selects a row within the range. Returns INVALID_ARGUMENT for
  // a range outside the table or empty, or as Answer. The whole table goes to Answer; the default
  // answers other ranges on the host CPU (one thread) from table().
  virtual absl::Status AnswerRange(absl::Span<const dpf::DpfKey* const> keys, const RowRange& range,
                                   absl::Span<uint32_t> out);
};

// The CPU backend: EvalDotMulti over `threads` threads. The table must outlive the backend.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const dpf::TableView& table,
                                                          int threads);

}  // namespace veil::pir

#endif  // VEIL_PIR_TWO_SERVER_BACKEND_H_
