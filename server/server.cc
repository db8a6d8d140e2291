#include "server/server.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/table.h"
#include "server/backend_select.h"
#include "server/log.h"
#include "server/scheduler.h"
#include "server/service.h"
#include "server/stats.h"

namespace veil::server {
namespace {

// One client connection: its stream, the two-party network with this server's message bounds,
// and the RPC system serving the bootstrap capability on it.
struct Connection {
  Connection(kj::Own<kj::AsyncIoStream> stream_in, capnp::Capability::Client bootstrap,
             capnp::ReaderOptions options, ServerStats& stats_in)
      : stream(kj::mv(stream_in)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, options),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))),
        stats(stats_in) {
    stats.AddConnections(1);
  }
  ~Connection() { stats.AddConnections(-1); }

  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  ServerStats& stats;
};

class LoggingErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    Log(absl::StrCat("connection error: ", exception.getDescription().cStr()));
  }
};

class Listener {
 public:
  // `new_service` makes the PirServer of one new connection.
  Listener(kj::ConnectionReceiver& receiver, std::function<capnp::Capability::Client()> new_service,
           const ServerLimits& limits, ServerStats& stats)
      : receiver_(receiver),
        new_service_(std::move(new_service)),
        limits_(limits),
        stats_(stats),
        tasks_(errors_) {}

  kj::Promise<void> AcceptLoop() {
    return receiver_.accept().then([this](kj::Own<kj::AsyncIoStream>&& stream) {
      if (stats_.connections() >= limits_.max_connections) {
        Log(absl::StrCat("refused a connection: ", limits_.max_connections,
                         " connections already open"));
      } else {
        int one = 1;
        stream->setsockopt(IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        capnp::ReaderOptions options;
        options.traversalLimitInWords = limits_.HardMessageWords();
        auto connection = kj::heap<Connection>(kj::mv(stream), new_service_(), options, stats_);
        auto disconnected = connection->network.onDisconnect();
        tasks_.add(disconnected.attach(kj::mv(connection)));
      }
      return AcceptLoop();
    });
  }

 private:
  kj::ConnectionReceiver& receiver_;
  std::function<capnp::Capability::Client()> new_service_;
  const ServerLimits& limits_;
  ServerStats& stats_;
  LoggingErrorHandler errors_;
  kj::TaskSet tasks_;  // one per open connection; destroying it closes them
};

absl::Status CheckOptions(const ServerOptions& options) {
  if (options.party != 0 && options.party != 1) {
    return absl::InvalidArgumentError("--party must be 0 or 1");
  }
  if (options.table_path.empty()) return absl::InvalidArgumentError("--table is required");
  if (options.threads < 1) return absl::InvalidArgumentError("--threads must be at least 1");
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

}  // namespace

absl::Status RunServer(const ServerOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  SetLogParty(options.party);
  // Before any thread starts (backend, scheduler), so that every thread blocks these signals and
  // the event loop receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  signal(SIGPIPE, SIG_IGN);

  auto table = embedding::Table::Open(options.table_path);
  if (!table.ok()) {
    return absl::Status(table.status().code(),
                        absl::StrCat("table ", options.table_path, ": ", table.status().message()));
  }
  const dpf::TableView view = (*table)->view();
  auto backend = CreateBackend(options.backend, view, options.threads);
  if (!backend.ok()) return backend.status();

  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Own<kj::ConnectionReceiver> receiver;
  try {
    auto address = io.provider->getNetwork().parseAddress(options.listen).wait(io.waitScope);
    receiver = address->listen();
  } catch (const kj::Exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": ", e.getDescription().cStr()));
  }

  ServerStats stats;
  BatchScheduler scheduler(**backend, options.limits, stats);
  {
    auto new_service = [&]() -> capnp::Capability::Client {
      return kj::heap<PirService>(options.party, **table, (*backend)->name(), options.limits,
                                  scheduler, stats);
    };
    auto listener = std::make_unique<Listener>(*receiver, new_service, options.limits, stats);
    kj::Promise<void> accepting = listener->AcceptLoop().eagerlyEvaluate(
        [](kj::Exception&& e) { Log(absl::StrCat("accept failed: ", e.getDescription().cStr())); });

    std::printf("%u\n", receiver->getPort());
    std::fflush(stdout);
    const embedding::Table& t = **table;
    Log(absl::StrFormat(
        "serving %s (%d rows x %d words, %s, dim %d, epoch %d, digest %s) on %s port %d, "
        "backend %s, %d thread(s), batches up to %d keys / %s",
        options.table_path, t.rows(), t.row_words(), embedding::RowFormatName(t.format()), t.dim(),
        t.epoch(), t.DigestHex().substr(0, 16), options.listen, receiver->getPort(),
        (*backend)->name(), options.threads, options.limits.max_batch_keys,
        absl::FormatDuration(options.limits.max_wait)));

    siginfo_t signal_info = io.unixEventPort.onSignal(SIGTERM)
                                .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                                .wait(io.waitScope);
    Log(absl::StrCat("received ", signal_info.si_signo == SIGTERM ? "SIGTERM" : "SIGINT",
                     ": stopping (queued calls get UNAVAILABLE, the running pass finishes)"));
    scheduler.Stop(io.waitScope, io.provider->getTimer());
    // Let the last replies reach their sockets before the connections close.
    io.provider->getTimer().afterDelay(20 * kj::MILLISECONDS).wait(io.waitScope);
  }
  StatsSnapshot s = stats.Snapshot();
  Log(absl::StrFormat(
      "stopped after %.1f s: %d calls, %d keys, %d passes (mean %.1f keys), %d errors, "
      "latency p50 %.2f ms p99 %.2f ms",
      s.uptime_s, s.calls, s.keys, s.passes, s.mean_batch_keys, s.errors, s.latency_p50_ms,
      s.latency_p99_ms));
  return absl::OkStatus();
}

}  // namespace veil::server
