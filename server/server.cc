#include "server/server.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/compat/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/table.h"
#include "rpc/tls.h"
#include "server/connections.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/protocol.h"
#include "server/stats.h"

namespace veil::server {
namespace {

absl::Status CheckOptions(const ServerOptions& options) {
  if (options.table_path.empty()) return absl::InvalidArgumentError("--table is required");
  if (options.threads < 1) return absl::InvalidArgumentError("--threads must be at least 1");
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (options.insecure_plaintext && !options.tls_cert_path.empty()) {
    return absl::InvalidArgumentError(
        "--insecure-plaintext contradicts --tls-cert and --tls-key: give one or the other");
  }
  if (options.limits.idle_timeout <= absl::ZeroDuration() ||
      options.limits.read_timeout <= absl::ZeroDuration() ||
      options.limits.max_buffered_bytes < options.limits.HardMessageWords() * 8 ||
      options.limits.max_calls_per_connection < 1) {
    return absl::InvalidArgumentError(
        "the idle and read timeouts must be positive, max_buffered_bytes must hold one message "
        "of max_message_bytes, and max_calls_per_connection must be at least 1");
  }
  if (options.limits.tls_handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the TLS handshake timeout must be positive");
  }
  if (!options.metrics.empty()) {
    absl::StatusOr<MetricsAddress> metrics =
        CheckMetricsAddress(options.metrics, options.metrics_from_any);
    if (!metrics.ok()) return metrics.status();
  }
  if (options.epoch_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--epoch_grace_s must not be negative");
  }
  const ServerLimits& l = options.limits;
  if (l.max_keys_per_call < 1 || l.max_batch_keys < 1 || l.max_queued_keys < l.max_keys_per_call ||
      l.max_queued_keys_per_connection < l.max_keys_per_call || l.max_message_bytes < 1024 ||
      l.max_connections < 1) {
    return absl::InvalidArgumentError(
        "limits must be positive, max_queued_keys and max_queued_keys_per_connection >= "
        "max_keys_per_call, and max_message_bytes >= 1024");
  }
  return absl::OkStatus();
}

// Event-loop thread: every SIGHUP asks the protocol to roll to the table file's new version.
kj::Promise<void> RollOnSighup(kj::UnixEventPort& port, Protocol& protocol) {
  return port.onSignal(SIGHUP).then([&port, &protocol](siginfo_t) {
    Log("sighup", "received SIGHUP: rolling to the table file's new version");
    protocol.Roll();
    return RollOnSighup(port, protocol);
  });
}

// Event-loop thread: resolves when `in` reaches end of file (or fails: it cannot tell more).
kj::Promise<void> ReadUntilEof(kj::AsyncInputStream& in, kj::ArrayPtr<kj::byte> buffer) {
  return in.tryRead(buffer.begin(), 1, buffer.size())
      .then(
          [&in, buffer](size_t n) -> kj::Promise<void> {
            if (n == 0) return kj::READY_NOW;
            return ReadUntilEof(in, buffer);
          },
          [](kj::Exception&&) -> kj::Promise<void> { return kj::READY_NOW; });
}

}  // namespace

absl::Status RunServer(const ServerOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  SetLogParty(options.party);
  // Before any thread starts (backend, scheduler), so that every thread blocks these signals and
  // the event loop receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::UnixEventPort::captureSignal(SIGHUP);
  signal(SIGPIPE, SIG_IGN);

  // TLS files first: they are cheap to check, the table may not be.
  std::unique_ptr<kj::TlsContext> tls;
  if (!options.tls_cert_path.empty()) {
    auto context = rpc::MakeServerTlsContext(options.tls_cert_path, options.tls_key_path);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }

  // Into memory of its own, the digest verified while reading: a file changed, replaced or
  // truncated later never changes what is served, and a corrupted copy is refused here.
  const absl::Time load_start = absl::Now();
  auto table = embedding::Table::Load(options.table_path, {.verify = options.verify_table});
  if (!table.ok()) {
    return absl::Status(table.status().code(),
                        absl::StrCat("table ", options.table_path, ": ", table.status().message()));
  }
  const double load_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  Log("table_loaded",
      absl::StrFormat("loaded %s in %.2f s (%.2f s per GB), digest %s", options.table_path, load_s,
                      load_s / std::max(1e-9, (*table)->header().data_bytes / 1e9),
                      options.verify_table ? "verified" : "NOT verified (--verify_table=false)"));
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Network& network = io.provider->getNetwork();
  kj::Own<kj::ConnectionReceiver> receiver;
  std::string bound;  // the address as bound, e.g. "0.0.0.0:4000"
  bool loopback = false;
  try {
    auto address = network.parseAddress(options.listen).wait(io.waitScope);
    receiver = address->listen();
    sockaddr_storage local;
    uint length = sizeof(local);
    receiver->getsockname(reinterpret_cast<sockaddr*>(&local), &length);
    loopback = rpc::IsLoopback(reinterpret_cast<const sockaddr*>(&local), length);
    bound = network.getSockaddr(&local, length)->toString().cStr();
  } catch (const kj::Exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": ", e.getDescription().cStr()));
  }
  if (tls == nullptr && !loopback) {
    if (!options.insecure_plaintext) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to serve plaintext on ", options.listen,
          ", which is not a loopback address: ", rpc::kPlaintextRisk,
          ". Give --tls-cert and --tls-key (veil tls-cert --out-dir=DIR makes a self-signed "
          "pair), listen on 127.0.0.1, or pass --insecure-plaintext if this network is "
          "protected otherwise"));
    }
    Log("plaintext_warning",
        absl::StrCat(
            "WARNING: serving PLAINTEXT on ", bound,
            ", which is not a loopback address (--insecure-plaintext): ", rpc::kPlaintextRisk,
            ". Use --tls-cert and --tls-key unless this network is protected otherwise"));
  }

  // The protocol owns the table from here: after a roll it frees it (server/table_set.h).
  const embedding::Table& t = **table;
  const std::string serving = absl::StrFormat(
      "serving %s (%d rows x %d words, %s, dim %d, epoch %d, digest %s)", options.table_path,
      t.rows(), t.row_words(), embedding::RowFormatName(t.format()), t.dim(), t.epoch(),
      t.DigestHex().substr(0, 16));
  ServerStats stats;
  auto protocol = CreateProtocol(options.protocol, ProtocolEnv{options, *std::move(table), stats});
  if (!protocol.ok()) return protocol.status();
  {
    // Declared after the protocol and destroyed before it: scrapes read its tables.
    std::unique_ptr<MetricsServer> metrics;
    if (!options.metrics.empty()) {
      auto started =
          MetricsServer::Start(options.metrics, options.metrics_from_any, stats, **protocol);
      if (!started.ok()) return started.status();
      metrics = *std::move(started);
      Log("metrics_listening", absl::StrFormat("metrics on %s port %d (GET /metrics)",
                                               options.metrics, metrics->port()));
    }
    auto new_service = [&](const Peer& peer) -> kj::Own<capnp::Capability::Server> {
      return (*protocol)->NewConnection(
          ConnectionPolicy{.stats_allowed = options.stats_from_any || peer.loopback});
    };
    auto listener = std::make_unique<Listener>(*receiver, tls.get(), io.provider->getTimer(),
                                               network, new_service, options.limits, stats);
    kj::Promise<void> accepting = listener->Run().eagerlyEvaluate([](kj::Exception&& e) {
      Log("accept_failed", absl::StrCat("accept failed: ", e.getDescription().cStr()));
    });

    kj::Promise<void> rolling =
        RollOnSighup(io.unixEventPort, **protocol).eagerlyEvaluate([](kj::Exception&& e) {
          Log("sighup_failed", absl::StrCat("SIGHUP handling failed: ", e.getDescription().cStr()));
        });
    Log("serving",
        absl::StrFormat("%s on %s port %d %s, %s", serving, options.listen, receiver->getPort(),
                        tls != nullptr
                            ? absl::StrCat("over TLS (certificate ", options.tls_cert_path, ")")
                        : loopback ? std::string("in plaintext (loopback only)")
                                   : std::string("in PLAINTEXT"),
                        (*protocol)->Describe()));
    // After the log line, so that whoever waits for the port finds the server's log written.
    std::printf("%u\n", receiver->getPort());
    std::fflush(stdout);

    const auto received = [](siginfo_t info) -> std::string {
      return info.si_signo == SIGTERM ? "received SIGTERM" : "received SIGINT";
    };
    kj::Promise<std::string> stop = io.unixEventPort.onSignal(SIGTERM).then(received).exclusiveJoin(
        io.unixEventPort.onSignal(SIGINT).then(received));
    kj::Own<kj::AsyncInputStream> stdin_stream;
    kj::byte stdin_buffer[256];
    if (options.stop_on_stdin_eof) {
      stdin_stream = io.lowLevelProvider->wrapInputFd(STDIN_FILENO);
      stop = stop.exclusiveJoin(ReadUntilEof(*stdin_stream, stdin_buffer).then([] {
        return std::string("standard input closed (its launcher is gone)");
      }));
    }
    const std::string why = stop.wait(io.waitScope);
    Log("stopping", absl::StrCat(why,
                                 ": stopping (queued calls get UNAVAILABLE, the running pass "
                                 "finishes)"));
    (*protocol)->Stop(io.waitScope, io.provider->getTimer());
    // Let the last replies reach their sockets before the connections close.
    io.provider->getTimer().afterDelay(20 * kj::MILLISECONDS).wait(io.waitScope);
  }
  StatsSnapshot s = stats.Snapshot();
  Log("stopped",
      absl::StrFormat(
          "stopped after %.1f s: %d calls, %d keys, %d passes (mean %.1f keys), %d errors, "
          "latency p50 %.2f ms p99 %.2f ms",
          s.uptime_s, s.calls, s.keys, s.passes, s.mean_batch_keys, s.errors, s.latency_p50_ms,
          s.latency_p99_ms));
  return absl::OkStatus();
}

}  // namespace veil::server
