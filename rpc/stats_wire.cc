#include "rpc/stats_wire.h"

namespace veil::rpc {

void WriteStats(const StatsSnapshot& s, Stats::Builder out) {
  out.setCalls(s.calls);
  out.setKeys(s.keys);
  out.setPasses(s.passes);
  out.setMeanBatchKeys(s.mean_batch_keys);
  out.setMaxBatchKeys(s.max_batch_keys);
  out.setLatencyP50Ms(s.latency_p50_ms);
  out.setLatencyP90Ms(s.latency_p90_ms);
  out.setLatencyP99Ms(s.latency_p99_ms);
  out.setQueuedKeys(s.queued_keys);
  out.setErrors(s.errors);
  out.setConnections(s.connections);
  out.setUptimeS(s.uptime_s);
}

StatsSnapshot ReadStats(Stats::Reader in) {
  StatsSnapshot s;
  s.calls = in.getCalls();
  s.keys = in.getKeys();
  s.passes = in.getPasses();
  s.mean_batch_keys = in.getMeanBatchKeys();
  s.max_batch_keys = in.getMaxBatchKeys();
  s.latency_p50_ms = in.getLatencyP50Ms();
  s.latency_p90_ms = in.getLatencyP90Ms();
  s.latency_p99_ms = in.getLatencyP99Ms();
  s.queued_keys = in.getQueuedKeys();
  s.errors = in.getErrors();
  s.connections = in.getConnections();
  s.uptime_s = in.getUptimeS();
  return s;
}

}  // namespace veil::rpc
