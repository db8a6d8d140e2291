#include "server/key_batcher.h"

#include <sodium.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

namespace veil::server {
namespace {

// One call's keys and, after its pass, its shares.
struct KeyCall final : BatchItem {
  std::shared_ptr<pir::Backend> backend;
  std::vector<dpf::DpfKey> keys;
  std::vector<pir::RowRange> ranges;  // empty: the whole table
  KeyBatcher::Shares shares;
  size_t cost() const override { return keys.size(); }
  // Shares not handed on (a failed pass) go wiped.
  ~KeyCall() override { sodium_memzero(shares.data(), shares.size() * sizeof(uint32_t)); }
};

// What the keys of one backend call must share.
using GroupKey = std::tuple<pir::Backend*, pir::RowRange, dpf::OutputType, int, dpf::Prg>;

struct Group {
  std::vector<const dpf::DpfKey*> keys;
  std::vector<uint32_t*> out;  // where each key's share goes
  std::vector<size_t> calls;   // which call each key is from
};

}  // namespace

KeyBatcher::KeyBatcher(const ServerLimits& limits, ServerStats& stats)
    : scheduler_([this](absl::Span<BatchItem* const> batch) { return Pass(batch); }, limits,
                 stats) {}

kj::Promise<absl::StatusOr<KeyBatcher::Shares>> KeyBatcher::Submit(
    std::shared_ptr<pir::Backend> backend, std::vector<dpf::DpfKey> keys,
    std::vector<pir::RowRange> ranges, const void* owner) {
  auto call = std::make_unique<KeyCall>();
  call->backend = std::move(backend);
  call->keys = std::move(keys);
  call->ranges = std::move(ranges);
  return scheduler_.Submit(std::move(call), owner)
      .then([](absl::StatusOr<std::unique_ptr<KeyCall>> done) -> absl::StatusOr<Shares> {
        if (!done.ok()) return done.status();
        return std::move((*done)->shares);
      });
}

std::vector<absl::Status> KeyBatcher::Pass(absl::Span<BatchItem* const> batch) {
  std::map<GroupKey, Group> groups;
  for (size_t c = 0; c < batch.size(); ++c) {
    auto& call = static_cast<KeyCall&>(*batch[c]);
    const dpf::TableView& table = call.backend->table();
    const uint32_t row_words = table.row_words;
    call.shares.assign(call.keys.size() * row_words, 0);
    for (size_t k = 0; k < call.keys.size(); ++k) {
      const dpf::DpfParameters& p = call.keys[k].params();
      Group& g = groups[{call.backend.get(),
                         call.ranges.empty() ? pir::RowRange{0, table.rows} : call.ranges[k],
                         p.output, p.leaf_words_log2, p.prg}];
      g.keys.push_back(&call.keys[k]);
      g.out.push_back(call.shares.data() + k * row_words);
      g.calls.push_back(c);
    }
  }
  std::vector<absl::Status> statuses(batch.size());
  std::vector<uint32_t> out;
  for (const auto& [group_key, g] : groups) {
    pir::Backend& backend = *std::get<0>(group_key);
    const pir::RowRange& range = std::get<1>(group_key);
    const uint32_t row_words = backend.table().row_words;
    out.assign(g.keys.size() * row_words, 0);
    const absl::Status status = range == pir::RowRange{0, backend.table().rows}
                                    ? backend.Answer(g.keys, absl::MakeSpan(out))
                                    : backend.AnswerRange(g.keys, range, absl::MakeSpan(out));
    for (size_t i = 0; i < g.keys.size(); ++i) {
      if (status.ok()) {
        std::copy_n(out.data() + i * row_words, row_words, g.out[i]);
      } else if (statuses[g.calls[i]].ok()) {
        statuses[g.calls[i]] = status;
      }
    }
  }
  sodium_memzero(out.data(), out.size() * sizeof(uint32_t));  // answer shares
  return statuses;
}

}  // namespace veil::server
