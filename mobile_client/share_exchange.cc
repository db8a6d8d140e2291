#include "mobile_client/share_exchange.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dpf/key.h"

namespace veil::client {

// One RPC per server: the keys (serialized) for each server, and the bag sizes of answerPooled
// (empty for answer). Each reply has `reply_words` words. The serialized keys are secrets
// (together they reveal the rows) and are wiped when the call is done; their copies in Cap'n
// Proto's message buffers are wiped by the transport (rpc/wiping_message_stream.h).
struct ShareExchange::PreparedCall {
  PreparedCall() = default;
  PreparedCall(PreparedCall&&) = default;
  PreparedCall& operator=(PreparedCall&&) = default;
  ~PreparedCall() {
    for (auto& side : keys) {
      for (auto& key : side) sodium_memzero(key.data(), key.size());
    }
  }

  std::vector<std::vector<uint8_t>> keys[2];
  std::vector<uint32_t> bag_sizes;
  std::vector<RowRange> ranges;  // one per key, or empty: the whole table
  size_t reply_words = 0;
};

namespace {

// A call refused because its table version is not served (FAILED_PRECONDITION) is sent again on
// the newest common version, up to this many times, after this pause when the version did not
// change (the replicas of a party roll one after the other).
constexpr int kVersionRetries = 3;
constexpr absl::Duration kVersionRetryPause = absl::Milliseconds(100);

using PreparedCall = ShareExchange::PreparedCall;

// Bytes of one key in a call's Cap'n Proto message: the key padded to words, its list pointer,
// and its range (two words) when the call has ranges.
size_t MessageBytesPerKey(size_t key_bytes, bool ranges) {
  return (key_bytes + 7) / 8 * 8 + 8 + (ranges ? 16 : 0);
}

// Splits `queries` (one pair per wanted row or bag member) into calls that fit the servers'
// limits: at most max_keys keys per call, never splitting a bag.
absl::StatusOr<std::vector<PreparedCall>> SplitIntoCalls(std::vector<pir::QueryKeys>& queries,
                                                         absl::Span<const uint32_t> bag_sizes,
                                                         absl::Span<const RowRange> ranges,
                                                         uint32_t row_words, size_t max_keys) {
  std::vector<PreparedCall> calls;
  size_t added = 0;
  auto add_key = [&](pir::QueryKeys& q) {
    for (int s = 0; s < 2; ++s) calls.back().keys[s].push_back(q.key[s].Serialize());
    if (!ranges.empty()) calls.back().ranges.push_back(ranges[added]);
    ++added;
  };
  if (bag_sizes.empty()) {
    for (size_t i = 0; i < queries.size(); ++i) {
      if (i % max_keys == 0) calls.emplace_back();
      add_key(queries[i]);
      calls.back().reply_words += row_words;
    }
    return calls;
  }
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (bag_sizes[b] > max_keys) {
      return absl::InvalidArgumentError(absl::StrCat("bag ", b, " holds ", bag_sizes[b],
                                                     " keys; the servers accept at most ", max_keys,
                                                     " per call"));
    }
    if (calls.empty() || calls.back().keys[0].size() + bag_sizes[b] > max_keys)
      calls.emplace_back();
    for (uint32_t k = 0; k < bag_sizes[b]; ++k) add_key(queries[next++]);
    calls.back().bag_sizes.push_back(bag_sizes[b]);
    calls.back().reply_words += row_words;
  }
  return calls;
}

// Fills the parameters of an answer or answerPooled request with server s's part of `call`, for
// table version `version`.
template <typename Request>
void FillRequest(Request& request, const PreparedCall& call, int s, const TableInfo& version) {
  rpc::TableId::Builder table = request.initTable();
  table.setEpoch(version.epoch);
  table.setDigest(capnp::Data::Reader(version.digest.data(), version.digest.size()));
  auto keys = request.initKeys(call.keys[s].size());
  for (size_t k = 0; k < call.keys[s].size(); ++k) {
    keys.set(k, capnp::Data::Reader(call.keys[s][k].data(), call.keys[s][k].size()));
  }
  if (!call.ranges.empty()) {
    auto list = request.initRanges(call.ranges.size());
    for (size_t i = 0; i < call.ranges.size(); ++i) {
      list[i].setFirstRow(call.ranges[i].first_row);
      list[i].setRows(call.ranges[i].rows);
    }
  }
}

}  // namespace

absl::StatusOr<ShareExchange::Answers> ShareExchange::Exchange(std::vector<pir::QueryKeys>& queries,
                                                               absl::Span<const uint32_t> bag_sizes,
                                                               absl::Span<const RowRange> ranges,
                                                               dpf::OutputType output,
                                                               uint32_t lookups, const char* what) {
  absl::MutexLock lock(&call_mu_);
  if (absl::Status s = latch_.Check(); !s.ok()) return s;
  // One deadline for the whole lookup, version moves and retries included.
  const absl::Time deadline = absl::Now() + options_.timeout;
  // A server said it serves a newer version: move to the newest both serve before this call. If
  // the configurations cannot be read now, the call goes ahead on the current version and reports
  // its own errors.
  if (newer_version_) {
    bool moved = false;
    MoveToNewestVersion(moved, deadline).IgnoreError();
  }
  // Keys over a range are no larger than whole-table keys.
  dpf::DpfParameters params;
  params.log_domain = dpf::LogDomainForRows(table_.rows);
  params.prg = options_.prg;
  params.output = output;
  const size_t per_key = MessageBytesPerKey(dpf::DpfKey::SerializedSize(params), !ranges.empty());
  const size_t max_keys = std::max<size_t>(
      1, std::min<size_t>(table_.max_keys_per_call, (max_message_bytes_ - 512) / per_key));
  auto calls = SplitIntoCalls(queries, bag_sizes, ranges, share_words(), max_keys);
  if (!calls.ok()) return calls.status();

  std::vector<uint32_t> shares[2];
  const WipeAtExit<uint32_t> wipe0(shares[0]), wipe1(shares[1]);
  CallStats stats;
  absl::Status status = RunCalls(*calls, shares, stats, deadline, what);
  // The session's version may have been dropped by a roll: once more on the newest common one.
  // During a roll the replicas of a party may briefly disagree, so a call that did not move is
  // tried again after a pause, a few times.
  for (int attempt = 0; attempt < kVersionRetries && absl::IsFailedPrecondition(status) &&
                        absl::Now() + kVersionRetryPause < deadline;
       ++attempt) {
    bool moved = false;
    if (!MoveToNewestVersion(moved, deadline).ok()) break;
    if (!moved) absl::SleepFor(kVersionRetryPause);
    stats = CallStats();
    status = RunCalls(*calls, shares, stats, deadline, what);
  }
  if (!status.ok()) return status;
  // Every call of the last RunCalls named the session's version, and CheckReply saw it in every
  // reply.
  Answers out;
  out.epoch = table_.epoch;
  out.words.resize(shares[0].size());
  if (absl::Status s = pir::Reconstruct(output, shares[0], shares[1], absl::MakeSpan(out.words));
      !s.ok()) {
    return s;
  }
  stats.lookups = lookups;
  last_call_ = stats;
  total_lookups_ += stats.lookups;
  total_keys_ += stats.keys;
  total_calls_ += stats.calls;
  total_failovers_ += stats.failovers;
  total_hedges_ += stats.hedges;
  return out;
}

absl::Status ShareExchange::RunCalls(std::vector<PreparedCall>& calls,
                                     std::vector<uint32_t> (&shares)[2], CallStats& stats,
                                     absl::Time deadline, const char* what) {
  size_t total_words = 0;
  for (const PreparedCall& c : calls) total_words += c.reply_words;
  shares[0].assign(total_words, 0);
  shares[1].assign(total_words, 0);
  const uint64_t up_before = transport_->bytes_up(), down_before = transport_->bytes_down();
  const uint64_t failovers_before = transport_->failovers(), hedges_before = transport_->hedges();
  const absl::Time start = absl::Now();

  // Calls go out in waves that each fit the servers' per-connection queue, all within one deadline.
  size_t first = 0, first_offset = 0;
  while (first < calls.size()) {
    size_t last = first, wave_keys = 0, wave_words = 0;
    while (last < calls.size() && (last == first || max_queued_keys_ == 0 ||
                                   wave_keys + calls[last].keys[0].size() <= max_queued_keys_)) {
      wave_keys += calls[last].keys[0].size();
      wave_words += calls[last].reply_words;
      ++last;
    }
    absl::Status status = SendWave(absl::MakeSpan(calls.data() + first, last - first), first_offset,
                                   shares, deadline, what);
    if (!status.ok()) return status;
    first = last;
    first_offset += wave_words;
  }
  stats.latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  stats.bytes_up = transport_->bytes_up() - up_before;
  stats.bytes_down = transport_->bytes_down() - down_before;
  stats.calls = static_cast<uint32_t>(calls.size());
  for (const PreparedCall& c : calls) stats.keys += static_cast<uint32_t>(c.keys[0].size());
  stats.failovers = static_cast<uint32_t>(transport_->failovers() - failovers_before);
  stats.hedges = static_cast<uint32_t>(transport_->hedges() - hedges_before);
  return absl::OkStatus();
}

absl::Status ShareExchange::CheckReply(int s, int replica, rpc::TableId::Reader id, size_t words,
                                       size_t expected) const {
  capnp::Data::Reader digest = id.getDigest();
  if (id.getEpoch() != table_.epoch || digest.size() != table_.digest.size() ||
      std::memcmp(digest.begin(), table_.digest.data(), digest.size()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        transport_->ReplicaName(s, replica), " answered from another table version (epoch ",
        id.getEpoch(), ") than the one asked for (epoch ", table_.epoch,
        "); not combining its shares"));
  }
  if (words != expected) {
    return absl::InternalError(absl::StrCat(transport_->ReplicaName(s, replica), " returned ",
                                            words, " share words, expected ", expected));
  }
  return absl::OkStatus();
}

absl::Status ShareExchange::SendWave(absl::Span<PreparedCall> calls, size_t first_offset,
                                     std::vector<uint32_t> (&shares)[2], absl::Time deadline,
                                     const char* what) {
  return transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(2, false);
        auto remaining = std::make_shared<std::array<size_t, 2>>();
        (*remaining)[0] = (*remaining)[1] = calls.size();
        auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(2 * calls.size());
        size_t offset = first_offset;
        for (PreparedCall& call : calls) {
          for (int s = 0; s < 2; ++s) {
            // The same keys may go to several replicas (failover, hedging); the first good reply
            // fills the shares, later ones are dropped.
            auto filled = std::make_shared<bool>(false);
            auto send = [this, s, &call, offset, &shares, filled](
                            rpc::VeilServer::Client cap, int replica) -> kj::Promise<absl::Status> {
              auto on_reply = [this, s, replica, offset, words = call.reply_words, &shares,
                               filled](auto reply) -> absl::Status {
                auto list = reply.getShares();
                if (absl::Status ok = CheckReply(s, replica, reply.getTable(), list.size(), words);
                    !ok.ok()) {
                  return ok;
                }
                if (reply.getNewestEpoch() > newest_epoch_[s]) newer_version_ = true;
                if (*filled) return absl::OkStatus();
                *filled = true;
                uint32_t* out = shares[s].data() + offset;
                for (size_t i = 0; i < words; ++i) out[i] = list[i];
                return absl::OkStatus();
              };
              auto server = cap.castAs<rpc::PirServer>();
              if (call.bag_sizes.empty()) {
                auto request = server.answerRequest();
                FillRequest(request, call, s, table_);
                return request.send().then(std::move(on_reply));
              }
              auto request = server.answerPooledRequest();
              FillRequest(request, call, s, table_);
              auto bags = request.initBagSizes(call.bag_sizes.size());
              for (size_t b = 0; b < call.bag_sizes.size(); ++b) bags.set(b, call.bag_sizes[b]);
              return request.send().then(std::move(on_reply));
            };
            statuses.add(transport_->Call(s, std::move(send))
                             .then([s, done, remaining](absl::Status status) {
                               if (status.ok() && --(*remaining)[s] == 0) (*done)[s] = true;
                               return status;
                             })
                             .eagerlyEvaluate(nullptr));
          }
          offset += call.reply_words;
        }
        auto all = kj::joinPromises(statuses.finish()).then([](kj::Array<absl::Status> results) {
          for (absl::Status& r : results) {
            if (!r.ok()) return r;
          }
          return absl::OkStatus();
        });
        // evalLast: the replies' Finish messages are written in a later turn; count them here.
        return transport_->WithTimeout(kj::mv(all), done, deadline).then([](absl::Status s) {
          return kj::evalLast([s = std::move(s)]() mutable { return std::move(s); });
        });
      },
      what);
}

TableInfo ShareExchange::table() const {
  absl::MutexLock lock(&table_mu_);
  return table_;
}

absl::StatusOr<rpc::StatsSnapshot> ShareExchange::Stats(int party) {
  if (party != 0 && party != 1) return absl::InvalidArgumentError("party must be 0 or 1");
  absl::MutexLock lock(&call_mu_);
  return transport_->Stats(party);
}

CallStats ShareExchange::last_call() const {
  absl::MutexLock lock(&call_mu_);
  return last_call_;
}

CallStats ShareExchange::totals() const {
  CallStats t;
  t.bytes_up = transport_->bytes_up();
  t.bytes_down = transport_->bytes_down();
  t.lookups = total_lookups_.load();
  t.keys = total_keys_.load();
  t.calls = total_calls_.load();
  t.failovers = total_failovers_.load();
  t.hedges = total_hedges_.load();
  return t;
}

}  // namespace veil::client
