#include "server/stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Add(double value) {
  // The first bucket whose bound is >= value: bounds are inclusive upper bounds.
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> cumulative(counts_.size());
  uint64_t total = 0;
  for (size_t i = 0; i < counts_.size(); ++i) cumulative[i] = total += counts_[i];
  return cumulative;
}

// From 0.5 ms (a small dpf2 batch on a CPU) to 10 s (a bfv-bag pass under load).
const std::vector<double>& ServerStats::LatencyBoundsS() {
  static const auto* bounds = new std::vector<double>{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *bounds;
}

// Powers of two up to the largest --max_batch worth running.
const std::vector<double>& ServerStats::BatchKeysBounds() {
  static const auto* bounds =
      new std::vector<double>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  return *bounds;
}

ServerStats::ServerStats() : start_(absl::Now()), batch_keys_(BatchKeysBounds()) {
  latency_ms_.reserve(kLatencyWindow);
}

void ServerStats::RecordCall(absl::string_view call, size_t keys, absl::Duration latency) {
  absl::MutexLock lock(&mu_);
  ++calls_;
  keys_ += keys;
  ++calls_by_code_[{std::string(call), "OK"}];
  latency_s_.try_emplace(std::string(call), LatencyBoundsS())
      .first->second.Add(absl::ToDoubleSeconds(latency));
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
  batch_keys_.Add(static_cast<double>(keys));
}

uint64_t ServerStats::RecordError(absl::string_view call, absl::StatusCode code) {
  absl::MutexLock lock(&mu_);
  ++calls_by_code_[{std::string(call), absl::StatusCodeToString(code)}];
  return ++errors_;
}

void ServerStats::RecordRefusedConnection() {
  absl::MutexLock lock(&mu_);
  ++refused_connections_;
}

void ServerStats::RecordClosedConnection(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  ++closed_connections_[std::string(reason)];
}

uint32_t ServerStats::connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(std::max<int64_t>(connections_, 0));
}

void ServerStats::SetQueuedKeys(uint32_t keys) {
  absl::MutexLock lock(&mu_);
  queued_keys_ = keys;
}

void ServerStats::SetKeyCache(const KeyCacheCounts& counts) {
  absl::MutexLock lock(&mu_);
  key_cache_ = counts;
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

MetricsSnapshot ServerStats::Metrics() const {
  absl::MutexLock lock(&mu_);
  MetricsSnapshot m;
  m.calls_by_code = calls_by_code_;
  m.latency_s = latency_s_;
  m.batch_keys = batch_keys_;
  m.keys = keys_;
  m.queued_keys = queued_keys_;
  m.connections = static_cast<uint32_t>(std::max<int64_t>(connections_, 0));
  m.refused_connections = refused_connections_;
  m.closed_connections = closed_connections_;
  m.uptime_s = absl::ToDoubleSeconds(absl::Now() - start_);
  m.key_cache = key_cache_;
  return m;
}

}  // namespace veil::server
