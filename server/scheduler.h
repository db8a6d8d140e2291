// The batching scheduler every protocol of a server shares: gathers the work of calls from every
// connection and hands it to the protocol's pass function in one batch, on a worker thread so that
// the RPC event loop never blocks on the table scan.
//
// Batching rule: when the worker is free it takes the waiting items; if they cost less than
// max_batch_keys it waits for more, but never past max_wait after the oldest item arrived nor past
// 1/8 of the previous pass's duration (waiting longer than a fraction of a pass costs more latency
// than sharing the table read saves). An item is never split across passes.
#ifndef VEIL_SERVER_SCHEDULER_H_
#define VEIL_SERVER_SCHEDULER_H_

#include <kj/async.h>
#include <kj/timer.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/limits.h"
#include "server/stats.h"

namespace veil::server {

// The work of one call, as a protocol defines it: its inputs, and room for its results, which the
// pass function fills.
class BatchItem {
 public:
  virtual ~BatchItem() = default;
  // What the batch and queue bounds count (queries: DPF keys for dpf2).
  virtual size_t cost() const = 0;
};

class BatchScheduler {
 public:
  // Worker thread: answers one batch, filling each item's results. Returns one status per item;
  // an error fails that item's call only, so that one client's input never fails another's.
  using PassFn = std::function<std::vector<absl::Status>(absl::Span<BatchItem* const> batch)>;

  // Must be created on the thread running the kj event loop that will call Submit(); `stats` must
  // outlive the scheduler. `unit` names what BatchItem::cost counts, in errors ("keys").
  BatchScheduler(PassFn pass, const ServerLimits& limits, ServerStats& stats,
                 const char* unit = "keys");
  // Stop() must have returned: the worker delivers through the event loop, so joining it without
  // turning the loop could deadlock.
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Event-loop thread. Queues a validated item of `owner` (its connection; null: none); the
  // promise resolves on the loop thread with the item and its results, or RESOURCE_EXHAUSTED when
  // the queue is full, UNAVAILABLE when stopping, or the pass's error for it.
  //
  // A full queue is shared fairly between owners: an item that does not fit pushes out the newest
  // items of the owners that hold more queued cost than its own owner would with it (the heaviest
  // first; they fail with RESOURCE_EXHAUSTED), where that makes room; else it is refused. So a
  // client whose connections fill the queue delays the others' calls, but cannot keep them out.
  template <typename Item>
  kj::Promise<absl::StatusOr<std::unique_ptr<Item>>> Submit(std::unique_ptr<Item> item,
                                                            const void* owner = nullptr) {
    return SubmitItem(std::move(item), owner)
        .then([](absl::StatusOr<std::unique_ptr<BatchItem>> done)
                  -> absl::StatusOr<std::unique_ptr<Item>> {
          if (!done.ok()) return done.status();
          return std::unique_ptr<Item>(static_cast<Item*>(done->release()));
        });
  }

  // Event-loop thread. Fails queued items with UNAVAILABLE, lets the running pass finish and
  // deliver (the loop keeps turning meanwhile), and joins the worker.
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer);

 private:
  struct Job {
    std::unique_ptr<BatchItem> item;
    const void* owner;
    absl::Time arrival;
    kj::Own<kj::PromiseFulfiller<absl::StatusOr<std::unique_ptr<BatchItem>>>> fulfiller;  // loop
    // Set on the loop thread when the call's promise goes (its client gone, or it was answered):
    // a job still queued then is dropped unanswered instead of computed for nobody.
    std::shared_ptr<std::atomic<bool>> abandoned;
  };

  kj::Promise<absl::StatusOr<std::unique_ptr<BatchItem>>> SubmitItem(
      std::unique_ptr<BatchItem> item, const void* owner);
  // Moves into `into` the queued jobs that an item of `owner` costing `cost` pushes out (see
  // Submit), out of the queue's cost; none unless they make room for it.
  void PushOut(const void* owner, size_t cost, std::vector<Job>& into)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  // Moves the queued jobs whose calls were abandoned into `into` (their fulfillers must die on the
  // loop thread), out of the queue's cost.
  void DropAbandoned(std::vector<Job>& into) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker thread: waits for work and takes the next batch (everything, when stopping), and the
  // abandoned jobs into `dropped`. Returns false when stopping.
  bool TakeBatch(std::vector<Job>& batch, std::vector<Job>& dropped);
  // Worker thread: resolves each job's promise on the loop thread, where the jobs are destroyed.
  void Deliver(std::vector<Job>& jobs, std::vector<absl::Status>& statuses);

  const PassFn pass_;
  const ServerLimits limits_;
  const char* const unit_;
  ServerStats& stats_;
  const kj::Executor& loop_executor_;

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_cost_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration last_pass_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::thread worker_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_SCHEDULER_H_
