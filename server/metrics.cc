#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/connections.h"
#include "server/process_memory.h"

#if VEIL_HAVE_PROMETHEUS
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#endif

namespace veil::server {

absl::StatusOr<MetricsAddress> CheckMetricsAddress(absl::string_view text, bool from_any) {
  auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics=", text, ": ", why,
        "; expected HOST:PORT with a numeric address, e.g. 127.0.0.1:9464 or [::1]:9464"));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  absl::string_view host = text.substr(0, colon);
  int port = -1;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  sockaddr_storage address{};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    std::string v6(host.substr(1, host.size() - 2));
    if (inet_pton(AF_INET6, v6.c_str(), &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr) !=
        1) {
      return bad("not an IPv6 address in brackets");
    }
    address.ss_family = AF_INET6;
  } else {
    std::string v4(host);
    if (inet_pton(AF_INET, v4.c_str(), &reinterpret_cast<sockaddr_in*>(&address)->sin_addr) != 1) {
      return bad("not a numeric IPv4 address (IPv6 goes in brackets)");
    }
    address.ss_family = AF_INET;
  }
  if (!from_any && !IsLoopback(reinterpret_cast<sockaddr*>(&address))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve metrics on ", text,
        ", which is not a loopback address: the endpoint is plaintext HTTP without "
        "authentication and shows the server's load. Use 127.0.0.1 (scrape through a tunnel or "
        "a local agent) or pass --metrics_from_any"));
  }
  return MetricsAddress{std::string(text)};
}

#if VEIL_HAVE_PROMETHEUS
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

ClientMetric Value(MetricType type, double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  (type == MetricType::Counter ? metric.counter.value : metric.gauge.value) = value;
  return metric;
}

// The +Inf bucket is the serializer's (it writes the sample count).
ClientMetric HistogramValue(const Histogram& histogram,
                            std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = histogram.count();
  metric.histogram.sample_sum = histogram.sum();
  const std::vector<uint64_t> cumulative = histogram.CumulativeCounts();
  for (size_t i = 0; i < histogram.bounds().size(); ++i) {
    metric.histogram.bucket.push_back({cumulative[i], histogram.bounds()[i]});
  }
  return metric;
}

// Reads the server's state at each scrape (on the HTTP server's thread).
class ServerCollectable final : public prometheus::Collectable {
 public:
  ServerCollectable(const ServerStats& stats, const Protocol& protocol)
      : stats_(stats), protocol_(protocol) {}

  std::vector<MetricFamily> Collect() const override {
    const MetricsSnapshot m = stats_.Metrics();
    std::vector<MetricFamily> out;

    MetricFamily requests = Family(
        "veil_requests_total", "Calls answered (code OK) or rejected (the error's code), by call",
        MetricType::Counter);
    for (const auto& [key, count] : m.calls_by_code) {
      requests.metric.push_back(Value(MetricType::Counter, static_cast<double>(count),
                                      {{"rpc", key.first}, {"code", key.second}}));
    }
    out.push_back(std::move(requests));

    MetricFamily latency =
        Family("veil_request_duration_seconds", "Arrival to reply of answered calls, by call",
               MetricType::Histogram);
    for (const auto& [call, histogram] : m.latency_s) {
      latency.metric.push_back(HistogramValue(histogram, {{"rpc", call}}));
    }
    out.push_back(std::move(latency));

    out.push_back(Family("veil_batch_keys", "Queries answered in one backend pass (a batch)",
                         MetricType::Histogram));
    out.back().metric.push_back(HistogramValue(m.batch_keys));

    auto single = [&out](const char* name, const char* help, MetricType type, double value) {
      out.push_back(Family(name, help, type));
      out.back().metric.push_back(Value(type, value));
    };
    single("veil_keys_total", "Queries answered (DPF keys for dpf2)", MetricType::Counter,
           static_cast<double>(m.keys));
    single("veil_queued_keys", "Queries waiting for the backend", MetricType::Gauge, m.queued_keys);
    single("veil_open_connections", "Connections open, TLS handshakes included", MetricType::Gauge,
           m.connections);
    single(
        "veil_refused_connections_total",
        "Connections refused at --max_connections (all open ones busy, no address over its share)",
        MetricType::Counter, static_cast<double>(m.refused_connections));
    MetricFamily closed =
        Family("veil_closed_connections_total",
               "Connections the server closed, by reason (docs/serving.md, what one client can "
               "hold)",
               MetricType::Counter);
    for (const auto& [reason, count] : m.closed_connections) {
      closed.metric.push_back(
          Value(MetricType::Counter, static_cast<double>(count), {{"reason", reason}}));
    }
    out.push_back(std::move(closed));
    single("veil_process_resident_memory_bytes", "Resident memory of the server process",
           MetricType::Gauge, static_cast<double>(ResidentKb(getpid())) * 1024);
    single("veil_uptime_seconds", "Time since the server started", MetricType::Gauge, m.uptime_s);

    if (m.key_cache.has_value()) {
      const KeyCacheCounts& k = *m.key_cache;
      auto count = [](uint64_t n) { return static_cast<double>(n); };
      // A family of two series told apart by `label`.
      auto pair = [&](const char* name, const char* help, MetricType type, const char* label,
                      const char* first, uint64_t first_value, const char* second,
                      uint64_t second_value) {
        out.push_back(Family(name, help, type));
        out.back().metric.push_back(Value(type, count(first_value), {{label, first}}));
        out.back().metric.push_back(Value(type, count(second_value), {{label, second}}));
      };
      single("veil_session_key_bytes",
             "Memory charged to session keys: uploads, parsed keys and keys waiting for a resume "
             "(as of the last key call: keys past their wait go at the next)",
             MetricType::Gauge, count(k.charged_bytes));
      single("veil_session_key_limit_bytes", "Bound on session key memory (--max_galois_key_bytes)",
             MetricType::Gauge, count(k.max_bytes));
      pair("veil_session_keys",
           "Installed session keys: of open connections (open) or of closed ones, waiting for a "
           "resume (waiting)",
           MetricType::Gauge, "state", "open", k.sessions, "waiting", k.waiting);
      single("veil_session_key_uploads_total", "Session key uploads parsed and installed",
             MetricType::Counter, count(k.installs));
      pair("veil_session_key_resumes_total",
           "Resume tokens presented: keys taken over (resumed) or none held under the token "
           "(refused: the client uploads them)",
           MetricType::Counter, "result", "resumed", k.resumes, "refused", k.refused_resumes);
      single("veil_session_key_evictions_total",
             "Uploads and keys evicted to make room (their clients upload again)",
             MetricType::Counter, count(k.evictions));
      single("veil_session_key_expirations_total",
             "Waiting keys dropped after --key_resume_s without a resume", MetricType::Counter,
             count(k.expirations));
    }

    MetricFamily tables =
        Family("veil_table_info", "1 for each table version served (several during a roll)",
               MetricType::Gauge);
    for (const auto& table : protocol_.ServedTables()) {
      tables.metric.push_back(
          Value(MetricType::Gauge, 1,
                {{"epoch", absl::StrCat(table->epoch())}, {"digest", table->DigestHex()}}));
    }
    out.push_back(std::move(tables));
    return out;
  }

 private:
  const ServerStats& stats_;
  const Protocol& protocol_;
};

class PrometheusServer final : public MetricsServer {
 public:
  PrometheusServer(std::shared_ptr<ServerCollectable> collectable,
                   std::unique_ptr<prometheus::Exposer> exposer)
      : collectable_(std::move(collectable)), exposer_(std::move(exposer)) {}
  int port() const override { return exposer_->GetListeningPorts().front(); }

 private:
  std::shared_ptr<ServerCollectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // destroyed first: it stops serving scrapes
};

}  // namespace
#endif  // VEIL_HAVE_PROMETHEUS

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(absl::string_view address,
                                                                    bool from_any,
                                                                    const ServerStats& stats,
                                                                    const Protocol& protocol) {
  absl::StatusOr<MetricsAddress> parsed = CheckMetricsAddress(address, from_any);
  if (!parsed.ok()) return parsed.status();
#if VEIL_HAVE_PROMETHEUS
  auto collectable = std::make_shared<ServerCollectable>(stats, protocol);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(parsed->bind, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  exposer->RegisterCollectable(collectable);
  return std::make_unique<PrometheusServer>(std::move(collectable), std::move(exposer));
#else
  (void)stats;
  (void)protocol;
  return absl::UnimplementedError(
      "--metrics: this veil-server was built without prometheus-cpp (Debian: prometheus-cpp-dev)");
#endif
}

}  // namespace veil::server
