// The batching scheduler: gathers the keys of calls from every connection and hands them to the
// pir::Backend in one table pass, on a worker thread so that the RPC event loop never blocks on
// the table scan.
//
// Batching rule: when the worker is free it takes the waiting calls; if they hold fewer than
// max_batch_keys keys it waits for more, but never past max_wait after the oldest call arrived nor
// past 1/8 of the previous pass's duration (waiting longer than a fraction of a pass costs more
// latency than sharing the table read saves). A call is never split across passes. Within a pass
// the keys are grouped by row range: one Backend call per distinct range (the whole table goes to
// Backend::Answer).
#ifndef VEIL_SERVER_SCHEDULER_H_
#define VEIL_SERVER_SCHEDULER_H_

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dpf/key.h"
#include "pir/two_server/backend.h"
#include "server/limits.h"
#include "server/stats.h"

namespace veil::server {

class BatchScheduler {
 public:
  using Shares = std::vector<uint32_t>;  // row_words words per key, in key order

  // Must be created on the thread running the kj event loop that will call Submit(); the backend
  // and stats must outlive the scheduler.
  BatchScheduler(pir::Backend& backend, const ServerLimits& limits, ServerStats& stats);
  // Stop() must have returned: the worker delivers through the event loop, so joining it without
  // turning the loop could deadlock.
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Event-loop thread. Queues validated keys; the promise resolves on the loop thread with this
  // call's shares, or RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE when stopping, or
  // the backend's error.
  // `ranges`: empty (every key over the whole table) or one validated row range per key.
  kj::Promise<absl::StatusOr<Shares>> Submit(std::vector<dpf::DpfKey> keys,
                                             std::vector<pir::RowRange> ranges = {});

  // Event-loop thread. Fails queued calls with UNAVAILABLE, lets the running pass finish and
  // deliver (the loop keeps turning meanwhile), and joins the worker.
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer);

 private:
  struct Job {
    std::vector<dpf::DpfKey> keys;
    std::vector<pir::RowRange> ranges;  // empty: the whole table
    absl::Time arrival;
    kj::Own<kj::PromiseFulfiller<absl::StatusOr<Shares>>> fulfiller;  // loop thread only
  };

  void WorkerLoop();
  // Worker thread: answers `keys` (with `ranges`, one per key) into `out`, one backend call per
  // distinct range.
  absl::Status AnswerGrouped(const std::vector<const dpf::DpfKey*>& keys,
                             const std::vector<pir::RowRange>& ranges, absl::Span<uint32_t> out);
  // Worker thread: resolves each job's promise on the loop thread, where the jobs are destroyed.
  void Deliver(std::vector<Job>& jobs, std::vector<absl::StatusOr<Shares>>& results);

  pir::Backend& backend_;
  const ServerLimits limits_;
  ServerStats& stats_;
  const kj::Executor& loop_executor_;

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_keys_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration last_pass_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::thread worker_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_SCHEDULER_H_
