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

  absl::Status AnswerRange(absl::Span<const dpf::DpfKey* const> keys, const RowRange& range,
                           absl::Span<uint32_t> out) override {
    if (absl::Status s = CheckRange(range, table_.rows); !s.ok()) return s;
    for (const dpf::DpfKey* key : keys) {
      if (absl::Status s = CheckKeyFitsTable(*key, range.rows); !s.ok()) return s;
    }
    return dpf::EvalDotMulti(keys, RangeView(table_, range), out, threads_);
  }

 private:
  dpf::TableView table_;
  int threads_;
};

}  // namespace

absl::Status CheckRange(const RowRange& range, uint64_t table_rows) {
  if (range.rows == 0) return absl::InvalidArgumentError("the row range is empty");
  if (range.first_row >= table_rows || range.rows > table_rows - range.first_row) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rows [%d, %d + %d) are outside the table (%d rows)", range.first_row,
                        range.first_row, range.rows, table_rows));
  }
  return absl::OkStatus();
}

dpf::TableView RangeView(const dpf::TableView& table, const RowRange& range) {
  dpf::TableView view = table;
  view.words = table.words + range.first_row * table.stride();
  view.rows = range.rows;
  view.stride_words = table.stride();
  return view;
}

absl::Status Backend::AnswerRange(absl::Span<const dpf::DpfKey* const> keys,
                                  const RowRange& range, absl::Span<uint32_t> out) {
  if (absl::Status s = CheckRange(range, table().rows); !s.ok()) return s;
  if (range.first_row == 0 && range.rows == table().rows) return Answer(keys, out);
  for (const dpf::DpfKey* key : keys) {
    if (absl::Status s = CheckKeyFitsTable(*key, range.rows); !s.ok()) return s;
  }
  return dpf::EvalDotMulti(keys, RangeView(table(), range), out, 1);
}

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
