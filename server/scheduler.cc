#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::server {

BatchScheduler::BatchScheduler(pir::Backend& backend, const ServerLimits& limits,
                               ServerStats& stats)
    : backend_(backend),
      limits_(limits),
      stats_(stats),
      loop_executor_(kj::getCurrentThreadExecutor()),
      worker_([this] { WorkerLoop(); }) {}

BatchScheduler::~BatchScheduler() {
  if (worker_.joinable()) {
    std::fprintf(stderr, "veil-server: BatchScheduler destroyed without Stop()\n");
    std::abort();
  }
}

kj::Promise<absl::StatusOr<BatchScheduler::Shares>> BatchScheduler::Submit(
    std::vector<dpf::DpfKey> keys, std::vector<pir::RowRange> ranges) {
  if (!ranges.empty() && ranges.size() != keys.size()) {
    return absl::StatusOr<Shares>(absl::InvalidArgumentError(
        absl::StrCat(ranges.size(), " row ranges for ", keys.size(), " keys")));
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return absl::StatusOr<Shares>(absl::UnavailableError("the server is shutting down"));
  }
  if (queued_keys_ + keys.size() > limits_.max_queued_keys) {
    return absl::StatusOr<Shares>(absl::ResourceExhaustedError(
        absl::StrCat("server busy: ", queued_keys_, " keys already queued (limit ",
                     limits_.max_queued_keys, "); retry later")));
  }
  auto paf = kj::newPromiseAndFulfiller<absl::StatusOr<Shares>>();
  queued_keys_ += keys.size();
  stats_.SetQueuedKeys(static_cast<uint32_t>(queued_keys_));
  queue_.push_back(Job{std::move(keys), std::move(ranges), absl::Now(), kj::mv(paf.fulfiller)});
  return kj::mv(paf.promise);
}

void BatchScheduler::Stop(kj::WaitScope& wait_scope, kj::Timer& timer) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // The worker delivers through this loop, so keep it turning until the worker has finished.
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (worker_done_) break;
    }
    timer.afterDelay(1 * kj::MILLISECONDS).wait(wait_scope);
  }
  if (worker_.joinable()) worker_.join();
}

void BatchScheduler::WorkerLoop() {
  const uint32_t row_words = backend_.table().row_words;
  for (;;) {
    std::vector<Job> batch;
    size_t batch_keys = 0;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (!stopping_) {
        absl::Duration wait = std::min(limits_.max_wait, last_pass_ / 8);
        absl::Time deadline = queue_.front().arrival + wait;
        auto batch_ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || queued_keys_ >= limits_.max_batch_keys;
        };
        mu_.AwaitWithDeadline(absl::Condition(&batch_ready), deadline);
      }
      stopping = stopping_;
      if (stopping) {
        // Shutdown: everything still queued is failed below.
        while (!queue_.empty()) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      } else {
        while (!queue_.empty() && (batch.empty() || batch_keys + queue_.front().keys.size() <=
                                                        limits_.max_batch_keys)) {
          batch_keys += queue_.front().keys.size();
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      queued_keys_ = 0;
      for (const Job& job : queue_) queued_keys_ += job.keys.size();
      stats_.SetQueuedKeys(static_cast<uint32_t>(queued_keys_));
    }

    std::vector<absl::StatusOr<Shares>> results;
    if (stopping) {
      for (size_t i = 0; i < batch.size(); ++i) {
        results.push_back(absl::UnavailableError("the server is shutting down"));
      }
      Deliver(batch, results);
      absl::MutexLock lock(&mu_);
      worker_done_ = true;
      return;
    }

    std::vector<const dpf::DpfKey*> keys;
    std::vector<pir::RowRange> ranges;
    keys.reserve(batch_keys);
    ranges.reserve(batch_keys);
    const pir::RowRange whole{0, backend_.table().rows};
    for (const Job& job : batch) {
      for (size_t k = 0; k < job.keys.size(); ++k) {
        keys.push_back(&job.keys[k]);
        ranges.push_back(job.ranges.empty() ? whole : job.ranges[k]);
      }
    }
    std::vector<uint32_t> out(keys.size() * row_words);
    absl::Time start = absl::Now();
    absl::Status status = AnswerGrouped(keys, ranges, absl::MakeSpan(out));
    absl::Duration pass = absl::Now() - start;
    stats_.RecordPass(keys.size());
    {
      absl::MutexLock lock(&mu_);
      last_pass_ = pass;
    }
    size_t offset = 0;
    for (const Job& job : batch) {
      size_t words = job.keys.size() * row_words;
      if (status.ok()) {
        results.emplace_back(Shares(out.begin() + offset, out.begin() + offset + words));
      } else {
        results.emplace_back(status);
      }
      offset += words;
    }
    Deliver(batch, results);
  }
}

absl::Status BatchScheduler::AnswerGrouped(const std::vector<const dpf::DpfKey*>& keys,
                                           const std::vector<pir::RowRange>& ranges,
                                           absl::Span<uint32_t> out) {
  const pir::RowRange whole{0, backend_.table().rows};
  if (std::all_of(ranges.begin(), ranges.end(),
                  [&](const pir::RowRange& r) { return r == whole; })) {
    return backend_.Answer(keys, out);
  }
  const uint32_t row_words = backend_.table().row_words;
  std::map<pir::RowRange, std::vector<size_t>> groups;
  for (size_t k = 0; k < keys.size(); ++k) groups[ranges[k]].push_back(k);
  std::vector<const dpf::DpfKey*> group_keys;
  std::vector<uint32_t> group_out;
  for (const auto& [range, members] : groups) {
    group_keys.clear();
    for (size_t k : members) group_keys.push_back(keys[k]);
    group_out.assign(members.size() * row_words, 0);
    absl::Status status = range == whole
                              ? backend_.Answer(group_keys, absl::MakeSpan(group_out))
                              : backend_.AnswerRange(group_keys, range, absl::MakeSpan(group_out));
    if (!status.ok()) return status;
    for (size_t i = 0; i < members.size(); ++i) {
      std::copy_n(group_out.data() + i * row_words, row_words,
                  out.data() + members[i] * row_words);
    }
  }
  return absl::OkStatus();
}

void BatchScheduler::Deliver(std::vector<Job>& jobs, std::vector<absl::StatusOr<Shares>>& results) {
  // Stop() keeps the loop alive until the worker is done, so this always finds it running.
  loop_executor_.executeSync([&]() {
    // Moved here so that the fulfillers (bound to the loop thread) die on it.
    std::vector<Job> done = std::move(jobs);
    for (size_t i = 0; i < done.size(); ++i) done[i].fulfiller->fulfill(std::move(results[i]));
  });
}

}  // namespace veil::server
