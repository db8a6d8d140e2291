// The server's Prometheus endpoint (veil-server --metrics=HOST:PORT): GET /metrics answers the
// text exposition format, read at each scrape from what the server already keeps (ServerStats,
// the protocol's served table versions, /proc/self) so that no count is kept twice.
//
// Series (all prefixed veil_):
//   veil_requests_total{rpc,code}                counter: calls answered (code OK) or rejected
//   veil_request_duration_seconds{rpc}           histogram: arrival to reply of answered calls
//   veil_batch_keys                              histogram: queries per backend pass
//   veil_keys_total                              counter: queries answered
//   veil_queued_keys                             gauge: queries waiting for the backend
//   veil_open_connections                        gauge: connections open (TLS handshakes included)
//   veil_refused_connections_total               counter: refused at --max_connections
//   veil_table_info{epoch,digest}                gauge, 1 per table version served
//   veil_process_resident_memory_bytes           gauge
//   veil_uptime_seconds                          gauge
// and where the protocol keeps session keys (bfv-bag, the packed LWE protocols; galois_cache.h):
//   veil_session_key_bytes, veil_session_key_limit_bytes   gauges: charged now, the bound
//   veil_session_keys{state="open"|"waiting"}    gauge: installed keys of open connections, and
//                                                of closed ones waiting for a resume
//   veil_session_key_uploads_total               counter: uploads installed
//   veil_session_key_resumes_total{result="resumed"|"refused"}   counter
//   veil_session_key_evictions_total, veil_session_key_expirations_total   counters
// Like the `stats` call, these reveal load, never rows or keys. The endpoint is plaintext HTTP, so
// it binds loopback addresses only unless the operator allows others (--metrics_from_any).
#ifndef VEIL_SERVER_METRICS_H_
#define VEIL_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/protocol.h"
#include "server/stats.h"

namespace veil::server {

// A parsed --metrics value.
struct MetricsAddress {
  std::string bind;  // as the HTTP server takes it: "127.0.0.1:9464", "[::1]:9464"
};

// Parses "HOST:PORT" where HOST is a numeric IPv4 address or a bracketed IPv6 one ("[::1]") and
// PORT is 0 (a free port) to 65535. Returns INVALID_ARGUMENT naming the value otherwise, or when
// the address is not a loopback one and `from_any` is false.
absl::StatusOr<MetricsAddress> CheckMetricsAddress(absl::string_view text, bool from_any);

class MetricsServer {
 public:
  // Serves GET /metrics on `address` until destroyed; `stats` and `protocol` must outlive it.
  // Returns CheckMetricsAddress's INVALID_ARGUMENT, UNAVAILABLE when it cannot listen there, and
  // UNIMPLEMENTED in a build without prometheus-cpp.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(absl::string_view address,
                                                              bool from_any,
                                                              const ServerStats& stats,
                                                              const Protocol& protocol);
  virtual ~MetricsServer() = default;

  // The port it listens on (the chosen one for port 0).
  virtual int port() const = 0;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_METRICS_H_
