// Serving statistics shared by the RPC thread and the backend worker: counters, batch sizes and
// call latencies. Recent latencies are reported as percentiles by the `stats` call (rpc/stats.h)
// and in the shutdown log; cumulative counts by call and status code and histograms of latencies
// and batch sizes are what the metrics endpoint exports (server/metrics.h).
#ifndef VEIL_SERVER_STATS_H_
#define VEIL_SERVER_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/stats.h"

namespace veil::server {

using rpc::StatsSnapshot;

// Counts of values by bucket, since the start (a Prometheus histogram).
class Histogram {
 public:
  // `bounds`: the buckets' inclusive upper bounds, ascending; one more bucket holds the rest.
  explicit Histogram(std::vector<double> bounds);
  void Add(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Values at or below bounds()[i], for each i, then all values (the +Inf bucket).
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, bounds_.size() + 1
  uint64_t count_ = 0;
  double sum_ = 0;
};

// What the metrics endpoint exports of a protocol's session keys (server/galois_cache.h).
struct KeyCacheCounts {
  uint64_t charged_bytes = 0;  // uploads, parsed and waiting keys, as charged now
  uint64_t max_bytes = 0;      // the bound (--max_galois_key_bytes)
  uint64_t sessions = 0;       // open connections with installed keys
  uint64_t waiting = 0;        // closed connections' keys waiting for Resume
  // Since the start:
  uint64_t installs = 0;         // uploads parsed and installed
  uint64_t resumes = 0;          // keys taken over with a token
  uint64_t refused_resumes = 0;  // tokens under which no keys were held (NOT_FOUND)
  uint64_t evictions = 0;        // uploads and keys evicted to make room
  uint64_t expirations = 0;      // waiting keys dropped after resume_for

  bool operator==(const KeyCacheCounts&) const = default;
};

// Everything the metrics endpoint exports from ServerStats, copied under its lock.
struct MetricsSnapshot {
  // Calls answered ("OK") or rejected (the error's code name), by call name and code.
  std::map<std::pair<std::string, std::string>, uint64_t> calls_by_code;
  std::map<std::string, Histogram> latency_s;  // answered calls' latencies, by call name
  Histogram batch_keys{{}};                    // queries per backend pass
  uint64_t keys = 0;
  uint32_t queued_keys = 0;
  uint32_t connections = 0;
  uint64_t refused_connections = 0;
  std::map<std::string, uint64_t> closed_connections;  // by reason (ServerStats)
  double uptime_s = 0;
  std::optional<KeyCacheCounts> key_cache;  // protocols that keep session keys
};

class ServerStats {
 public:
  // Percentiles cover this many most recent calls.
  static constexpr size_t kLatencyWindow = 4096;
  // Histogram buckets: call latencies in seconds and queries per pass.
  static const std::vector<double>& LatencyBoundsS();
  static const std::vector<double>& BatchKeysBounds();

  ServerStats();

  // An answered `call` ("answer", "answerPooled"...) of `keys` queries.
  void RecordCall(absl::string_view call, size_t keys, absl::Duration latency);
  void RecordPass(size_t keys);
  // A rejected `call`. Returns the number of errors so far, this one included.
  uint64_t RecordError(absl::string_view call, absl::StatusCode code);
  // A connection refused at the connection limit.
  void RecordRefusedConnection();
  // A connection the server closed (server/connections.h), by reason: idle, read_timeout,
  // message_refused, slow_sender, limit_idle, limit_fair_share or handshake_failed.
  void RecordClosedConnection(absl::string_view reason);
  void SetQueuedKeys(uint32_t keys);
  // The protocol's session keys, as they are now (GaloisKeyCache::OnChange).
  void SetKeyCache(const KeyCacheCounts& counts);
  void AddConnections(int delta);

  uint32_t connections() const;
  // Counters and latency percentiles (sorts the latency window: for the `stats` call and logs).
  StatsSnapshot Snapshot() const;
  // Cumulative counts and histograms (for the metrics endpoint).
  MetricsSnapshot Metrics() const;

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
  uint64_t refused_connections_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> closed_connections_ ABSL_GUARDED_BY(mu_);
  std::vector<double> latency_ms_ ABSL_GUARDED_BY(mu_);  // ring buffer of kLatencyWindow
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_by_code_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> latency_s_ ABSL_GUARDED_BY(mu_);
  Histogram batch_keys_ ABSL_GUARDED_BY(mu_);
  std::optional<KeyCacheCounts> key_cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace veil::server

#endif  // VEIL_SERVER_STATS_H_
