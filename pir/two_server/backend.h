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

namespace veil::pir {

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
};

// The CPU backend: EvalDotMulti over `threads` threads. The table must outlive the backend.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const dpf::TableView& table,
                                                          int threads);

// Checks that a key can be answered against a table of `rows` rows: its domain must be
// LogDomainForRows(rows). Returns INVALID_ARGUMENT naming the mismatch otherwise.
absl::Status CheckKeyFitsTable(const dpf::DpfKey& key, uint64_t rows);

}  // namespace veil::pir

#endif  // VEIL_PIR_TWO_SERVER_BACKEND_H_
