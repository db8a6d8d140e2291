// Serving statistics shared by the RPC thread and the backend worker: counters, batch sizes and
// recent call latencies (reported as percentiles by the `stats` call, rpc/stats.h, and in the
// shutdown log).
#ifndef VEIL_SERVER_STATS_H_
#define VEIL_SERVER_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/stats.h"

namespace veil::server {

using rpc::StatsSnapshot;

class ServerStats {
 public:
  // Percentiles cover this many most recent calls.
  static constexpr size_t kLatencyWindow = 4096;

  ServerStats();

  void RecordCall(size_t keys, absl::Duration latency);
  void RecordPass(size_t keys);
  // Returns the number of errors so far, this one included.
  uint64_t RecordError();
  void SetQueuedKeys(uint32_t keys);
  void AddConnections(int delta);

  uint32_t connections() const;
  // Counters and latency percentiles (sorts the latency window: for the `stats` call and logs).
  StatsSnapshot Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  absl::Time start_;
  uint64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t keys_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pass_keys_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t max_batch_keys_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t queued_keys_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t connections_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> latency_ms_ ABSL_GUARDED_BY(mu_);  // ring buffer of kLatencyWindow
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_STATS_H_
