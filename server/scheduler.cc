#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
    std::vector<dpf::DpfKey> keys) {
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
  queue_.push_back(Job{std::move(keys), absl::Now(), kj::mv(paf.fulfiller)});
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
    keys.reserve(batch_keys);
    for (const Job& job : batch) {
      for (const dpf::DpfKey& key : job.keys) keys.push_back(&key);
    }
    std::vector<uint32_t> out(keys.size() * row_words);
    absl::Time start = absl::Now();
    absl::Status status = backend_.Answer(keys, absl::MakeSpan(out));
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

void BatchScheduler::Deliver(std::vector<Job>& jobs, std::vector<absl::StatusOr<Shares>>& results) {
  // Stop() keeps the loop alive until the worker is done, so this always finds it running.
  loop_executor_.executeSync([&]() {
    // Moved here so that the fulfillers (bound to the loop thread) die on it.
    std::vector<Job> done = std::move(jobs);
    for (size_t i = 0; i < done.size(); ++i) done[i].fulfiller->fulfill(std::move(results[i]));
  });
}

}  // namespace veil::server
