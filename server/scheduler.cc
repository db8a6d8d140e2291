#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::server {

BatchScheduler::BatchScheduler(PassFn pass, const ServerLimits& limits, ServerStats& stats,
                               const char* unit)
    : pass_(std::move(pass)),
      limits_(limits),
      unit_(unit),
      stats_(stats),
      loop_executor_(kj::getCurrentThreadExecutor()),
      worker_([this] { WorkerLoop(); }) {}

BatchScheduler::~BatchScheduler() {
  if (worker_.joinable()) {
    std::fprintf(stderr, "veil-server: BatchScheduler destroyed without Stop()\n");
    std::abort();
  }
}

kj::Promise<absl::StatusOr<std::unique_ptr<BatchItem>>> BatchScheduler::SubmitItem(
    std::unique_ptr<BatchItem> item, const void* owner) {
  using Result = absl::StatusOr<std::unique_ptr<BatchItem>>;
  // Jobs pushed out for this item: answered after the lock, on this (the loop) thread.
  std::vector<Job> pushed;
  const auto answer_pushed = kj::defer([&pushed] {
    for (Job& job : pushed) {
      job.fulfiller->fulfill(Result(absl::ResourceExhaustedError(
          "server busy: this call was pushed out of the full queue by a connection holding less "
          "of it than this one; retry later")));
    }
  });
  std::vector<Job> gone;  // destroyed after the lock, on this (the loop) thread
  absl::MutexLock lock(&mu_);
  if (stopping_) return Result(absl::UnavailableError("the server is shutting down"));
  const size_t cost = item->cost();
  // Calls cancelled since they were queued (their clients gone) make room before a refusal: a
  // client that queues its share, cancels and queues again holds no more than its share.
  if (queued_cost_ + cost > limits_.max_queued_keys) DropAbandoned(gone);
  if (queued_cost_ + cost > limits_.max_queued_keys) PushOut(owner, cost, pushed);
  if (queued_cost_ + cost > limits_.max_queued_keys) {
    return Result(absl::ResourceExhaustedError(
        absl::StrCat("server busy: ", queued_cost_, " ", unit_, " already queued (limit ",
                     limits_.max_queued_keys, "); retry later")));
  }
  auto paf = kj::newPromiseAndFulfiller<Result>();
  queued_cost_ += cost;
  stats_.SetQueuedKeys(static_cast<uint32_t>(queued_cost_));
  auto abandoned = std::make_shared<std::atomic<bool>>(false);
  queue_.push_back(Job{std::move(item), owner, absl::Now(), kj::mv(paf.fulfiller), abandoned});
  return paf.promise.attach(kj::defer([abandoned] { abandoned->store(true); }));
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

void BatchScheduler::PushOut(const void* owner, size_t cost, std::vector<Job>& into) {
  if (owner == nullptr) return;
  std::map<const void*, uint64_t> held;  // queued cost by owner
  for (const Job& job : queue_) {
    if (job.owner != nullptr) held[job.owner] += job.item->cost();
  }
  const uint64_t mine = held[owner] + cost;
  // The plan first (queue positions, newest of the heaviest owner each time), taken only if it
  // makes room.
  std::vector<size_t> out;
  uint64_t freed = 0;
  while (queued_cost_ - freed + cost > limits_.max_queued_keys) {
    auto heaviest = held.end();
    for (auto it = held.begin(); it != held.end(); ++it) {
      if (it->first != owner && it->second > mine &&
          (heaviest == held.end() || it->second > heaviest->second)) {
        heaviest = it;
      }
    }
    if (heaviest == held.end()) return;
    size_t newest = queue_.size();
    for (size_t i = queue_.size(); i-- > 0;) {
      if (queue_[i].owner == heaviest->first && std::find(out.begin(), out.end(), i) == out.end()) {
        newest = i;
        break;
      }
    }
    if (newest == queue_.size()) return;  // (held counts only jobs not yet planned)
    const uint64_t job_cost = queue_[newest].item->cost();
    heaviest->second -= job_cost;
    freed += job_cost;
    out.push_back(newest);
  }
  std::sort(out.rbegin(), out.rend());  // erased from the back, positions stay valid
  for (size_t i : out) {
    into.push_back(std::move(queue_[i]));
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  queued_cost_ -= freed;
  stats_.SetQueuedKeys(static_cast<uint32_t>(queued_cost_));
}

void BatchScheduler::DropAbandoned(std::vector<Job>& into) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->abandoned->load()) {
      queued_cost_ -= it->item->cost();
      into.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.SetQueuedKeys(static_cast<uint32_t>(queued_cost_));
}

bool BatchScheduler::TakeBatch(std::vector<Job>& batch, std::vector<Job>& dropped) {
  absl::MutexLock lock(&mu_);
  auto has_work = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
  mu_.Await(absl::Condition(&has_work));
  if (!stopping_) {
    const absl::Duration wait = std::min(limits_.max_wait, last_pass_ / 8);
    const absl::Time deadline = queue_.front().arrival + wait;
    auto batch_ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || queued_cost_ >= limits_.max_batch_keys;
    };
    mu_.AwaitWithDeadline(absl::Condition(&batch_ready), deadline);
  }
  DropAbandoned(dropped);
  size_t batch_cost = 0;
  // When stopping, everything still queued is taken (and failed by the caller).
  while (!queue_.empty() && (stopping_ || batch.empty() ||
                             batch_cost + queue_.front().item->cost() <= limits_.max_batch_keys)) {
    batch_cost += queue_.front().item->cost();
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_cost_ = 0;
  for (const Job& job : queue_) queued_cost_ += job.item->cost();
  stats_.SetQueuedKeys(static_cast<uint32_t>(queued_cost_));
  return !stopping_;
}

void BatchScheduler::WorkerLoop() {
  for (;;) {
    std::vector<Job> batch, dropped;
    const bool running = TakeBatch(batch, dropped);
    if (!dropped.empty()) {
      std::vector<absl::Status> gone(dropped.size(), absl::CancelledError("abandoned"));
      Deliver(dropped, gone);  // their fulfillers die on the loop thread
    }
    std::vector<absl::Status> statuses;
    if (!running) {
      statuses.assign(batch.size(), absl::UnavailableError("the server is shutting down"));
      Deliver(batch, statuses);
      absl::MutexLock lock(&mu_);
      worker_done_ = true;
      return;
    }
    if (batch.empty()) continue;  // only abandoned jobs
    std::vector<BatchItem*> items;
    size_t cost = 0;
    for (const Job& job : batch) {
      items.push_back(job.item.get());
      cost += job.item->cost();
    }
    const absl::Time start = absl::Now();
    statuses = pass_(items);
    const absl::Duration pass = absl::Now() - start;
    stats_.RecordPass(cost);
    {
      absl::MutexLock lock(&mu_);
      last_pass_ = pass;
    }
    if (statuses.size() != batch.size()) {
      statuses.assign(batch.size(), absl::InternalError("the pass returned no status per call"));
    }
    Deliver(batch, statuses);
  }
}

void BatchScheduler::Deliver(std::vector<Job>& jobs, std::vector<absl::Status>& statuses) {
  // Stop() keeps the loop alive until the worker is done, so this always finds it running.
  loop_executor_.executeSync([&]() {
    // Moved here so that the fulfillers (bound to the loop thread) die on it.
    std::vector<Job> done = std::move(jobs);
    for (size_t i = 0; i < done.size(); ++i) {
      if (statuses[i].ok()) {
        done[i].fulfiller->fulfill(std::move(done[i].item));
      } else {
        done[i].fulfiller->fulfill(std::move(statuses[i]));
      }
    }
  });
}

}  // namespace veil::server
