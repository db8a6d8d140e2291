#include "server/stats.h"

#include <algorithm>
#include <cmath>

namespace veil::server {
namespace {

// Nearest-rank percentile of an unsorted sample (copied: the ring buffer keeps its order).
double Percentile(std::vector<double> sample, double p) {
  if (sample.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * sample.size()));
  rank = std::clamp<size_t>(rank, 1, sample.size()) - 1;
  std::nth_element(sample.begin(), sample.begin() + rank, sample.end());
  return sample[rank];
}

}  // namespace

ServerStats::ServerStats() : start_(absl::Now()) { latency_ms_.reserve(kLatencyWindow); }

void ServerStats::RecordCall(size_t keys, absl::Duration latency) {
  absl::MutexLock lock(&mu_);
  ++calls_;
  keys_ += keys;
  double ms = absl::ToDoubleMilliseconds(latency);
  if (latency_ms_.size() < kLatencyWindow) {
    latency_ms_.push_back(ms);
  } else {
    latency_ms_[latency_next_] = ms;
  }
  latency_next_ = (latency_next_ + 1) % kLatencyWindow;
}

void ServerStats::RecordPass(size_t keys) {
  absl::MutexLock lock(&mu_);
  ++passes_;
  pass_keys_ += keys;
  max_batch_keys_ = std::max<uint32_t>(max_batch_keys_, static_cast<uint32_t>(keys));
}

uint64_t ServerStats::RecordError() {
  absl::MutexLock lock(&mu_);
  return ++errors_;
}

uint32_t ServerStats::connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(std::max<int64_t>(connections_, 0));
}

void ServerStats::SetQueuedKeys(uint32_t keys) {
  absl::MutexLock lock(&mu_);
  queued_keys_ = keys;
}

void ServerStats::AddConnections(int delta) {
  absl::MutexLock lock(&mu_);
  connections_ += delta;
}

StatsSnapshot ServerStats::Snapshot() const {
  absl::MutexLock lock(&mu_);
  StatsSnapshot s;
  s.calls = calls_;
  s.keys = keys_;
  s.passes = passes_;
  s.mean_batch_keys = passes_ ? static_cast<double>(pass_keys_) / passes_ : 0;
  s.max_batch_keys = max_batch_keys_;
  s.latency_p50_ms = Percentile(latency_ms_, 0.50);
  s.latency_p90_ms = Percentile(latency_ms_, 0.90);
  s.latency_p99_ms = Percentile(latency_ms_, 0.99);
  s.queued_keys = queued_keys_;
  s.errors = errors_;
  s.connections = static_cast<uint32_t>(std::max<int64_t>(connections_, 0));
  s.uptime_s = absl::ToDoubleSeconds(absl::Now() - start_);
  return s;
}

}  // namespace veil::server
