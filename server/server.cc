#include "server/server.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/compat/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/table.h"
#include "rpc/tls.h"
#include "server/log.h"
#include "server/protocol.h"
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

// "ADDRESS:PORT" of a stream's peer, or "an unknown peer" (it may have gone already).
std::string DescribePeer(kj::Network& network, kj::AsyncIoStream& stream) {
  try {
    sockaddr_storage address;
    uint length = sizeof(address);
    stream.getpeername(reinterpret_cast<sockaddr*>(&address), &length);
    return network.getSockaddr(&address, length)->toString().cStr();
  } catch (const kj::Exception&) {
    return "an unknown peer";
  }
}

class Listener {
 public:
  // `new_service` makes the service of one new connection. With `tls` (else null: plaintext)
  // every accepted stream is wrapped in TLS before it is served.
  Listener(kj::ConnectionReceiver& receiver, kj::TlsContext* tls, kj::Timer& timer,
           kj::Network& network, std::function<capnp::Capability::Client()> new_service,
           const ServerLimits& limits, ServerStats& stats)
      : receiver_(receiver),
        tls_(tls),
        timer_(timer),
        network_(network),
        new_service_(std::move(new_service)),
        limits_(limits),
        stats_(stats),
        tasks_(errors_) {}

  kj::Promise<void> AcceptLoop() {
    return receiver_.accept().then([this](kj::Own<kj::AsyncIoStream>&& stream) {
      if (stats_.connections() + handshakes_ >= limits_.max_connections) {
        Log(absl::StrCat("refused a connection: ", limits_.max_connections,
                         " connections already open"));
      } else {
        int one = 1;
        stream->setsockopt(IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (tls_ == nullptr) {
          Serve(kj::mv(stream));
        } else {
          tasks_.add(Handshake(kj::mv(stream)));
        }
      }
      return AcceptLoop();
    });
  }

 private:
  void Serve(kj::Own<kj::AsyncIoStream> stream) {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits_.HardMessageWords();
    auto connection = kj::heap<Connection>(kj::mv(stream), new_service_(), options, stats_);
    auto disconnected = connection->network.onDisconnect();
    tasks_.add(disconnected.attach(kj::mv(connection)));
  }

  // The TLS handshake of one accepted stream, within tls_handshake_timeout. A failure (a plaintext
  // client, an untrusting one, a silent one) closes only that stream, and is logged.
  kj::Promise<void> Handshake(kj::Own<kj::AsyncIoStream> stream) {
    std::string peer = DescribePeer(network_, *stream);
    ++handshakes_;
    const absl::Duration limit = limits_.tls_handshake_timeout;
    auto timeout = timer_.afterDelay(absl::ToInt64Nanoseconds(limit) * kj::NANOSECONDS)
                       .then([limit]() -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
                         std::string text = absl::StrCat("no complete handshake within ",
                                                         absl::FormatDuration(limit));
                         return kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                                              kj::heapString(text.data(), text.size()));
                       });
    return tls_->wrapServer(kj::mv(stream))
        .exclusiveJoin(kj::mv(timeout))
        .then(
            [this](kj::Own<kj::AsyncIoStream>&& secure) {
              --handshakes_;
              Serve(kj::mv(secure));
            },
            [this, peer = std::move(peer)](kj::Exception&& e) {
              --handshakes_;
              Log(absl::StrCat("TLS handshake with ", peer,
                               " failed (connection closed): ", e.getDescription().cStr()));
            });
  }

  kj::ConnectionReceiver& receiver_;
  kj::TlsContext* tls_;
  kj::Timer& timer_;
  kj::Network& network_;
  std::function<capnp::Capability::Client()> new_service_;
  const ServerLimits& limits_;
  ServerStats& stats_;
  uint32_t handshakes_ = 0;  // streams in their TLS handshake; they count against max_connections
  LoggingErrorHandler errors_;
  kj::TaskSet tasks_;  // handshakes and open connections; destroying it closes them
};

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
  if (options.limits.tls_handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the TLS handshake timeout must be positive");
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

}  // namespace

absl::Status RunServer(const ServerOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  SetLogParty(options.party);
  // Before any thread starts (backend, scheduler), so that every thread blocks these signals and
  // the event loop receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  signal(SIGPIPE, SIG_IGN);

  // TLS files first: they are cheap to check, the table may not be.
  std::unique_ptr<kj::TlsContext> tls;
  if (!options.tls_cert_path.empty()) {
    auto context = rpc::MakeServerTlsContext(options.tls_cert_path, options.tls_key_path);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }

  auto table = embedding::Table::Open(options.table_path);
  if (!table.ok()) {
    return absl::Status(table.status().code(),
                        absl::StrCat("table ", options.table_path, ": ", table.status().message()));
  }
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
    Log(absl::StrCat("WARNING: serving PLAINTEXT on ", bound,
                     ", which is not a loopback address (--insecure-plaintext): ", rpc::kPlaintextRisk,
                     ". Use --tls-cert and --tls-key unless this network is protected otherwise"));
  }

  ServerStats stats;
  auto protocol = CreateProtocol(options.protocol, ProtocolEnv{options, **table, stats});
  if (!protocol.ok()) return protocol.status();
  {
    auto new_service = [&]() -> capnp::Capability::Client {
      return (*protocol)->NewConnection();
    };
    auto listener = std::make_unique<Listener>(*receiver, tls.get(), io.provider->getTimer(),
                                               network, new_service, options.limits, stats);
    kj::Promise<void> accepting = listener->AcceptLoop().eagerlyEvaluate(
        [](kj::Exception&& e) { Log(absl::StrCat("accept failed: ", e.getDescription().cStr())); });

    const embedding::Table& t = **table;
    Log(absl::StrFormat(
        "serving %s (%d rows x %d words, %s, dim %d, epoch %d, digest %s) on %s port %d %s, %s",
        options.table_path, t.rows(), t.row_words(), embedding::RowFormatName(t.format()), t.dim(),
        t.epoch(), t.DigestHex().substr(0, 16), options.listen, receiver->getPort(),
        tls != nullptr ? absl::StrCat("over TLS (certificate ", options.tls_cert_path, ")")
        : loopback     ? std::string("in plaintext (loopback only)")
                       : std::string("in PLAINTEXT"),
        (*protocol)->Describe()));
    // After the log line, so that whoever waits for the port finds the server's log written.
    std::printf("%u\n", receiver->getPort());
    std::fflush(stdout);

    siginfo_t signal_info = io.unixEventPort.onSignal(SIGTERM)
                                .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                                .wait(io.waitScope);
    Log(absl::StrCat("received ", signal_info.si_signo == SIGTERM ? "SIGTERM" : "SIGINT",
                     ": stopping (queued calls get UNAVAILABLE, the running pass finishes)"));
    (*protocol)->Stop(io.waitScope, io.provider->getTimer());
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
