// A server's statistics as its `stats` call reports them: one type for the server that counts and
// the client that reads them (rpc/stats_wire.h converts to and from the wire).
#ifndef VEIL_RPC_STATS_H_
#define VEIL_RPC_STATS_H_

#include <cstdint>

namespace veil::rpc {

struct StatsSnapshot {
  uint64_t calls = 0;   // protocol calls accepted
  uint64_t keys = 0;    // queries answered (DPF keys for dpf2)
  uint64_t passes = 0;  // backend passes (batches)
  double mean_batch_keys = 0;
  uint32_t max_batch_keys = 0;
  double latency_p50_ms = 0;  // call arrival to reply, over the most recent calls
  double latency_p90_ms = 0;
  double latency_p99_ms = 0;
  uint32_t queued_keys = 0;  // waiting for the backend now
  uint64_t errors = 0;       // calls rejected with an error reply
  uint32_t connections = 0;  // open now
  double uptime_s = 0;
};

}  // namespace veil::rpc

#endif  // VEIL_RPC_STATS_H_
