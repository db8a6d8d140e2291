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
    return dpf::EvalDotMulti(keys, table_, out, threads_);
  }

  absl::Status AnswerRange(absl::Span<const dpf::DpfKey* const> keys, const RowRange& range,
                           absl::Span<uint32_t> out) override {
    if (absl::Status s = CheckRange(range, table_.rows); !s.ok()) return s;
    return dpf::EvalDotMulti(keys, RangeView(table_, range), out, threads_);
  }

 private:
  dpf::TableView table_;
  int threads_;
};

}  // namespace

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
  return dpf::EvalDotMulti(keys, RangeView(table(), range), out, 1);
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
