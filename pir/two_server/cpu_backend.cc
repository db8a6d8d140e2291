#include <memory>

#include "absl/strings/str_format.h"
#include "pir/two_server/backend.h"

namespace veil::pir {
namespace {

class CpuBackend : public Backend {
 public:
  CpuBackend(const dpf::TableView& table, int threads) : table_(table), threads_(threads) {}

  std::string name() const override { return "cpu"; }
  const dpf::TableView& table() const override { return table_; }

  absl::Status Answer(absl::Span<const dpf::DpfKey* const> keys,
                      absl::Span<uint32_t> out) override {
    for (const dpf::DpfKey* key : keys) {
      if (absl::Status s = CheckKeyFitsTable(*key, table_.rows); !s.ok()) return s;
    }
    return dpf::EvalDotMulti(keys, table_, out, threads_);
  }

 private:
  dpf::TableView table_;
  int threads_;
};

}  // namespace

absl::Status CheckKeyFitsTable(const dpf::DpfKey& key, uint64_t rows) {
  const int needed = dpf::LogDomainForRows(rows);
  if (key.params().log_domain != needed) {
    return absl::InvalidArgumentError(
        absl::StrFormat("key's log domain %d does not fit a table of %d rows (needs %d)",
                        key.params().log_domain, rows, needed));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const dpf::TableView& table,
                                                          int threads) {
  if (table.words == nullptr || table.rows == 0 || table.row_words == 0) {
    return absl::InvalidArgumentError("CPU backend: empty table");
  }
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CPU backend: threads must be at least 1, got %d", threads));
  }
  return std::make_unique<CpuBackend>(table, threads);
}

}  // namespace veil::pir
