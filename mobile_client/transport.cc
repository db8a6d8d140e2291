#include "mobile_client/transport.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "rpc/status.h"
#include "rpc/tls.h"

namespace veil::client {

// Counts the bytes that cross one connection's socket, RPC framing included (CallStats).
class Transport::CountingStream final : public kj::AsyncIoStream {
 public:
  explicit CountingStream(kj::Own<kj::AsyncIoStream> inner) : inner_(kj::mv(inner)) {}

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return inner_->tryRead(buffer, min_bytes, max_bytes).then([this](size_t n) {
      bytes_read_ += n;
      return n;
    });
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    bytes_written_ += size;
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    for (auto piece : pieces) bytes_written_ += piece.size();
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* address, uint* length) override {
    inner_->getsockname(address, length);
  }
  void getpeername(struct sockaddr* address, uint* length) override {
    inner_->getpeername(address, length);
  }

  uint64_t bytes_read() const { return bytes_read_.load(); }
  uint64_t bytes_written() const { return bytes_written_.load(); }

 private:
  kj::Own<kj::AsyncIoStream> inner_;
  // Written on the I/O thread, read by callers for statistics.
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

struct Transport::Connection {
  // Releases the capability, the RPC system and the streams, each before what it uses.
  void Close() {
    cap = nullptr;
    rpc = nullptr;
    stream = nullptr;
    socket = nullptr;
  }

  CountingStream* socket = nullptr;   // the TCP stream and its byte counts, owned by `stream`
  kj::Own<kj::AsyncIoStream> stream;  // what the RPC system uses: `socket`, or TLS over it
  kj::Own<capnp::TwoPartyClient> rpc;
  rpc::VeilServer::Client cap{nullptr};
};

// How far a connection got, for the messages of its failures.
enum class Transport::Stage { kResolving, kConnecting, kHandshake, kHello };

// The event loop's thread and what only it touches, plus the byte counts of replaced connections.
struct Transport::Loop {
  std::thread thread;
  absl::Mutex mu;
  const kj::Executor* executor = nullptr;  // set under mu once, before Create returns
  kj::AsyncIoContext* io = nullptr;        // loop thread only
  kj::Own<kj::PromiseFulfiller<void>> stop;
  // Guards replacing a connection's stream against the byte counts read on other threads.
  mutable absl::Mutex streams_mu;
  uint64_t retired_up ABSL_GUARDED_BY(streams_mu) = 0;
  uint64_t retired_down ABSL_GUARDED_BY(streams_mu) = 0;
};

namespace {

// Whether an exception arose on this side (a broken connection, bytes that are no RPC message)
// rather than being a server's error reply, which arrives as a remote exception.
bool IsLocalFailure(const kj::Exception& e) {
  return !absl::StartsWith(e.getDescription().cStr(), "remote exception: ");
}

absl::Status FirstError(kj::Array<absl::Status> results) {
  for (absl::Status& r : results) {
    if (!r.ok()) return r;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(TransportOptions options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive");
  }
  if (options.addresses.empty()) return absl::InvalidArgumentError("no server address");
  for (size_t s = 0; s < options.addresses.size(); ++s) {
    if (options.addresses[s].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no address for server ", s));
    }
  }
  std::unique_ptr<kj::TlsContext> tls;
  bool names = false;
  for (const std::string& name : options.tls_names) names = names || !name.empty();
  if (!options.tls_trusted_certs.empty()) {
    auto context = rpc::MakeClientTlsContext(options.tls_trusted_certs);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  } else if (names) {
    return absl::InvalidArgumentError(
        "tls_server_name0 / tls_server_name1 need tls_trusted_certs (TLS is off without it)");
  }
  return std::unique_ptr<Transport>(new Transport(std::move(options), std::move(tls)));
}

Transport::Transport(TransportOptions options, std::unique_ptr<kj::TlsContext> tls)
    : options_(std::move(options)),
      tls_(std::move(tls)),
      addresses_(options_.addresses),
      connections_(new Connection[options_.addresses.size()]),
      lost_(new std::atomic<bool>[options_.addresses.size()]),
      loop_(std::make_unique<Loop>()) {
  for (size_t s = 0; s < addresses_.size(); ++s) {
    const bool named = s < options_.tls_names.size() && !options_.tls_names[s].empty();
    tls_names_.push_back(named ? options_.tls_names[s] : rpc::HostOf(addresses_[s]));
    lost_[s] = false;
  }
  loop_->thread = std::thread([this] { RunLoop(); });
  absl::MutexLock lock(&loop_->mu);
  loop_->mu.Await(absl::Condition(
      +[](const kj::Executor** e) { return *e != nullptr; }, &loop_->executor));
}

Transport::~Transport() {
  loop_->executor->executeSync([this] {
    absl::MutexLock lock(&loop_->streams_mu);
    for (int s = 0; s < servers(); ++s) connections_[s].Close();
    loop_->stop->fulfill();
  });
  loop_->thread.join();
}

void Transport::RunLoop() {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto stop = kj::newPromiseAndFulfiller<void>();
  loop_->io = &io;
  loop_->stop = kj::mv(stop.fulfiller);
  {
    absl::MutexLock lock(&loop_->mu);
    loop_->executor = &kj::getCurrentThreadExecutor();
  }
  stop.promise.wait(io.waitScope);
}

rpc::VeilServer::Client Transport::Capability(int s) { return connections_[s].cap; }

std::string Transport::Name(int s) const {
  return absl::StrCat("server ", s, " (", addresses_[s], ")");
}

std::vector<bool> Transport::Lost() const {
  std::vector<bool> lost(servers());
  for (int s = 0; s < servers(); ++s) lost[s] = lost_[s].load();
  return lost;
}

absl::Status Transport::Run(const std::function<kj::Promise<absl::Status>()>& body,
                            const char* what) {
  try {
    return loop_->executor->executeSync([&]() -> kj::Promise<absl::Status> { return body(); });
  } catch (const kj::Exception& e) {
    return rpc::ExceptionToStatus(e, what);
  }
}

absl::Status Transport::Connect(const std::vector<bool>& which, const OnConnected& on_connected) {
  return Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(servers(), true);
        auto stages = std::make_shared<std::vector<Stage>>(servers(), Stage::kResolving);
        auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(servers());
        for (int s = 0; s < servers(); ++s) {
          if (!which[s]) {
            statuses.add(absl::OkStatus());
            continue;
          }
          (*done)[s] = false;
          statuses.add(
              Open(s, stages)
                  .then([this, s]() { return Capability(s).helloRequest().send(); })
                  .then([this, s, &on_connected](capnp::Response<rpc::VeilServer::HelloResults> r) {
                    if (absl::Status hello = CheckHello(s, r.getHello()); !hello.ok()) {
                      return kj::Promise<absl::Status>(hello);
                    }
                    return on_connected(s, Capability(s));
                  })
                  .then(
                      [this, s, done](absl::Status status) {
                        (*done)[s] = true;
                        if (status.ok()) lost_[s] = false;
                        return status;
                      },
                      [this, s, stages](kj::Exception&& e) {
                        return ConnectError(s, (*stages)[s], e);
                      })
                  // Now, not when the join completes: `done` must name the servers that answered.
                  .eagerlyEvaluate(nullptr));
        }
        auto all = kj::joinPromises(statuses.finish()).then([](kj::Array<absl::Status> r) { return FirstError(kj::mv(r)); });
        return all.exclusiveJoin(TimeoutNaming(done, stages, absl::Now() + options_.timeout));
      },
      "connect");
}

kj::Promise<void> Transport::Open(int s, std::shared_ptr<std::vector<Stage>> stages) {
  return loop_->io->provider->getNetwork()
      .parseAddress(addresses_[s])
      .then([s, stages](kj::Own<kj::NetworkAddress> address) {
        (*stages)[s] = Stage::kConnecting;
        return address->connect().attach(kj::mv(address));
      })
      .then([this, s, stages](kj::Own<kj::AsyncIoStream> tcp)
                -> kj::Promise<std::pair<CountingStream*, kj::Own<kj::AsyncIoStream>>> {
        int one = 1;
        tcp->setsockopt(IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        auto socket = kj::heap<CountingStream>(kj::mv(tcp));
        CountingStream* counted = socket.get();
        if (tls_ == nullptr) {
          if (absl::Status allowed = CheckPlaintextAllowed(s, *counted); !allowed.ok()) {
            return rpc::StatusToException(allowed);
          }
          return std::make_pair(counted, kj::Own<kj::AsyncIoStream>(kj::mv(socket)));
        }
        (*stages)[s] = Stage::kHandshake;
        return tls_->wrapClient(kj::mv(socket), tls_names_[s])
            .then([counted](kj::Own<kj::AsyncIoStream> secure) {
              return std::make_pair(counted, kj::mv(secure));
            });
      })
      .then([this, s, stages](std::pair<CountingStream*, kj::Own<kj::AsyncIoStream>> opened) {
        (*stages)[s] = Stage::kHello;
        Connection& c = connections_[s];
        absl::MutexLock lock(&loop_->streams_mu);
        if (c.socket != nullptr) {
          loop_->retired_up += c.socket->bytes_written();
          loop_->retired_down += c.socket->bytes_read();
        }
        c.Close();
        c.socket = opened.first;
        c.stream = kj::mv(opened.second);
        c.rpc = kj::heap<capnp::TwoPartyClient>(*c.stream);
        c.cap = c.rpc->bootstrap().castAs<rpc::VeilServer>();
      });
}

absl::Status Transport::CheckHello(int s, rpc::Hello::Reader hello) const {
  const std::string protocol = hello.getProtocol();
  if (protocol != options_.protocol) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(s), " speaks protocol \"", protocol, "\"; this client speaks \"",
                     options_.protocol, "\" (is it another kind of veil server?)"));
  }
  if (hello.getProtocolVersion() != rpc::PROTOCOL_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(s), " speaks protocol version ", hello.getProtocolVersion(),
                     "; this client speaks version ", rpc::PROTOCOL_VERSION));
  }
  return absl::OkStatus();
}

absl::Status Transport::ServerError(int s, const kj::Exception& e) {
  if (e.getType() == kj::Exception::Type::DISCONNECTED) {
    lost_[s] = true;
    return rpc::ExceptionToStatus(e, absl::StrCat(Name(s), " is unreachable"));
  }
  return rpc::ExceptionToStatus(e, Name(s));
}

kj::Promise<absl::Status> Transport::WithTimeout(kj::Promise<absl::Status> promise,
                                                 std::shared_ptr<std::vector<bool>> done,
                                                 absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + options_.timeout;
  return promise.exclusiveJoin(TimeoutNaming(std::move(done), nullptr, deadline));
}

kj::Promise<absl::Status> Transport::TimeoutNaming(std::shared_ptr<std::vector<bool>> done,
                                                   std::shared_ptr<std::vector<Stage>> stages,
                                                   absl::Time deadline) {
  const int64_t left_ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(deadline - absl::Now()));
  return loop_->io->provider->getTimer().afterDelay(left_ns * kj::NANOSECONDS).then([=, this]() {
    std::string who;
    for (int s = 0; s < servers(); ++s) {
      if ((*done)[s]) continue;
      absl::StrAppend(&who, who.empty() ? "" : " and ", Name(s));
      if (stages != nullptr && (*stages)[s] == Stage::kHandshake) {
        absl::StrAppend(&who, " (TLS handshake unfinished)");
      }
    }
    return absl::DeadlineExceededError(absl::StrCat("no answer from ",
                                                    who.empty() ? "the servers" : who, " within ",
                                                    absl::FormatDuration(options_.timeout)));
  });
}

absl::Status Transport::CheckPlaintextAllowed(int s, kj::AsyncIoStream& stream) const {
  if (options_.allow_plaintext) return absl::OkStatus();
  sockaddr_storage peer;
  uint length = sizeof(peer);
  stream.getpeername(reinterpret_cast<sockaddr*>(&peer), &length);
  if (rpc::IsLoopback(reinterpret_cast<const sockaddr*>(&peer), length)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to send queries in plaintext to ", addresses_[s],
      ", which is not a loopback address: ", rpc::kPlaintextRisk,
      ". Set tls_trusted_certs (the servers' certificate or their CA), or allow_plaintext if "
      "this network is protected otherwise"));
}

absl::Status Transport::HandshakeError(int s, const kj::Exception& e) const {
  absl::string_view text = e.getDescription().cStr();
  // kj's wording (0.9.2): "TLS peer's certificate is not trusted; reason = <OpenSSL's reason>".
  absl::string_view reason = text;
  if (size_t at = text.find("reason = "); at != absl::string_view::npos) {
    reason = text.substr(at + 9);
  }
  const std::string setting = absl::StrCat("tls_server_name", s);
  if (absl::StrContains(text, "hostname mismatch")) {
    return absl::FailedPreconditionError(absl::StrCat(
        Name(s), ": its TLS certificate is not valid for the name \"", tls_names_[s],
        "\" (hostname mismatch): connect by a name or IP address the certificate holds, or set ",
        setting, " to one"));
  }
  if (absl::StrContains(text, "certificate is not trusted") ||
      absl::StrContains(text, "provided no certificate")) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(s), ": its TLS certificate is not trusted (", reason,
                     "): it does not chain to a certificate in ", options_.tls_trusted_certs));
  }
  return absl::UnavailableError(absl::StrCat(
      Name(s), ": the TLS handshake failed (", text,
      "); is the server running without TLS (no --tls-cert), or is it not a veil server?"));
}

absl::Status Transport::ConnectError(int s, Stage stage, const kj::Exception& e) {
  switch (stage) {
    case Stage::kResolving:
      return absl::InvalidArgumentError(absl::StrCat(
          Name(s), ": the address cannot be parsed or resolved (", e.getDescription().cStr(),
          "); give HOST:PORT with a resolvable host name or an IP address"));
    case Stage::kConnecting:
      break;
    case Stage::kHandshake:
      return HandshakeError(s, e);
    case Stage::kHello:
      if (tls_ == nullptr && IsLocalFailure(e)) {
        lost_[s] = true;
        return absl::UnavailableError(absl::StrCat(
            Name(s), " broke the connection before answering (", e.getDescription().cStr(),
            "); a TLS server (--tls-cert) does that to a client without TLS: set "
            "tls_trusted_certs to its certificate"));
      }
      break;
  }
  return ServerError(s, e);
}

uint64_t Transport::bytes_up() const {
  absl::MutexLock lock(&loop_->streams_mu);
  uint64_t total = loop_->retired_up;
  for (int s = 0; s < servers(); ++s) {
    if (connections_[s].socket != nullptr) total += connections_[s].socket->bytes_written();
  }
  return total;
}

uint64_t Transport::bytes_down() const {
  absl::MutexLock lock(&loop_->streams_mu);
  uint64_t total = loop_->retired_down;
  for (int s = 0; s < servers(); ++s) {
    if (connections_[s].socket != nullptr) total += connections_[s].socket->bytes_read();
  }
  return total;
}

}  // namespace veil::client
