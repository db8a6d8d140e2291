// StatsSnapshot (rpc/stats.h) to and from the wire's Stats struct.
#ifndef VEIL_RPC_STATS_WIRE_H_
#define VEIL_RPC_STATS_WIRE_H_

#include "rpc/stats.h"
#include "rpc/veil.capnp.h"

namespace veil::rpc {

void WriteStats(const StatsSnapshot& stats, Stats::Builder out);
StatsSnapshot ReadStats(Stats::Reader in);

}  // namespace veil::rpc

#endif  // VEIL_RPC_STATS_WIRE_H_
