#include "server/table_set.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "embedding/row_format.h"
#include "server/log.h"

namespace veil::server {
namespace {

// What a client's session and keys depend on; "" when `next` has the same as `current`.
std::string ShapeDifference(const embedding::Table& current, const embedding::Table& next) {
  auto describe = [](const embedding::Table& t) {
    return absl::StrCat(t.rows(), " rows x ", t.row_words(), " words, ",
                        embedding::RowFormatName(t.format()), " dim ", t.dim(), ", frac_bits ",
                        t.frac_bits(), ", row tag ", static_cast<int>(t.row_tag()));
  };
  const std::string a = describe(current), b = describe(next);
  return a == b ? std::string()
                : absl::StrCat("its shape (", b, ") is not the served one's (", a, ")");
}

}  // namespace

TableSet::TableSet(std::unique_ptr<ServedTable> first, Loader load, absl::Duration grace)
    : load_(std::move(load)), grace_(grace) {
  entries_.push_back(Entry{std::move(first)});
  thread_ = std::thread([this] { RollLoop(); });
}

TableSet::~TableSet() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::StatusOr<std::shared_ptr<const ServedTable>> TableSet::Find(
    std::optional<uint64_t> epoch, absl::Span<const uint8_t> digest) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!epoch) return entries_.back().served;
  for (const Entry& e : entries_) {
    if (e.served->epoch() != *epoch) continue;
    const embedding::TableDigestBytes served = e.served->table->digest();
    if (!digest.empty() && (digest.size() != served.size() ||
                            std::memcmp(digest.data(), served.data(), served.size()) != 0)) {
      return absl::FailedPreconditionError(
          absl::StrCat("epoch ", *epoch, " here has digest ", e.served->table->DigestHex(),
                       ", not the one asked for: the two parties serve different tables under "
                       "the same epoch"));
    }
    return e.served;
  }
  if (*epoch < entries_.front().served->epoch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", *epoch, " is no longer served (serving ", ServedEpochs(), ")"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("epoch ", *epoch, " is not served (serving ", ServedEpochs(), ")"));
}

std::vector<std::shared_ptr<const ServedTable>> TableSet::Served() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ServedTable>> served;
  for (const Entry& e : entries_) served.push_back(e.served);
  return served;
}

uint64_t TableSet::newest_epoch() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.back().served->epoch();
}

void TableSet::Roll() {
  absl::MutexLock lock(&mu_);
  roll_requested_ = true;
}

std::string TableSet::ServedEpochs() const {
  std::vector<uint64_t> epochs;
  for (const Entry& e : entries_) epochs.push_back(e.served->epoch());
  return absl::StrJoin(epochs, ", ");
}

void TableSet::RollLoop() {
  for (;;) {
    bool roll = false;
    {
      absl::MutexLock lock(&mu_);
      absl::Time next_retirement = absl::InfiniteFuture();
      for (const Entry& e : entries_) next_retirement = std::min(next_retirement, e.retire_at);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || roll_requested_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&has_work), next_retirement);
      if (stopping_) return;
      roll = roll_requested_;
      roll_requested_ = false;
    }
    RetireExpired();
    if (roll) LoadAndPublish();
  }
}

void TableSet::LoadAndPublish() {
  Log("roll_loading",
      "rolling: loading the table again (the served versions keep serving meanwhile)");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ServedTable>> next = load_();
  if (!next.ok()) {
    Log("roll_refused", absl::StrCat("roll refused: ", next.status().ToString(),
                                     "; still serving epoch ", newest_epoch()));
    return;
  }
  std::shared_ptr<const ServedTable> published = *std::move(next);
  std::shared_ptr<const ServedTable> current = Find(std::nullopt).value();
  std::string refusal = ShapeDifference(*current->table, *published->table);
  if (published->epoch() == current->epoch() &&
      published->table->digest() == current->table->digest()) {
    Log("roll_unchanged", absl::StrCat("roll: the table file still holds epoch ", current->epoch(),
                                       ", which is served; nothing to do"));
    return;
  }
  if (refusal.empty() && published->epoch() <= current->epoch()) {
    refusal = absl::StrCat("its epoch ", published->epoch(), " is not newer than the served ",
                           current->epoch(), " (build it with a larger --epoch)");
  }
  if (!refusal.empty()) {
    Log("roll_refused",
        absl::StrCat("roll refused: the new table (digest ", published->table->DigestHex(),
                     ") cannot replace the served one: ", refusal, "; still serving epoch ",
                     current->epoch()));
    return;
  }
  std::string served;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time retire_at = absl::Now() + grace_;
    for (Entry& e : entries_) e.retire_at = std::min(e.retire_at, retire_at);
    entries_.push_back(Entry{published});
    served = ServedEpochs();
  }
  Log("rolled",
      absl::StrCat("rolled to epoch ", published->epoch(), " (digest ",
                   published->table->DigestHex().substr(0, 16), ", loaded and verified in ",
                   absl::FormatDuration(absl::Now() - start), "); serving epochs ", served,
                   ", older ones for ", absl::FormatDuration(grace_), " more"));
}

void TableSet::RetireExpired() {
  std::vector<std::shared_ptr<const ServedTable>> dropped;
  std::string served;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->retire_at <= now) {
        dropped.push_back(std::move(it->served));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    served = ServedEpochs();
  }
  for (const auto& d : dropped) {
    Log("epoch_retired",
        absl::StrCat("epoch ", d->epoch(), "'s grace period is over: no longer served (serving ",
                     served, "); its memory is freed once its last call is answered"));
  }
}

}  // namespace veil::server
