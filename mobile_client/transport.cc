#include "mobile_client/transport.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <list>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "mobile_client/replicas.h"
#include "mobile_client/transport_state.h"
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

bool Transport::IsLocalFailure(const kj::Exception& e) {
  return !absl::StartsWith(e.getDescription().cStr(), "remote exception: ");
}

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(TransportOptions options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive");
  }
  if (options.addresses.empty()) return absl::InvalidArgumentError("no server address");
  std::vector<std::vector<std::string>> replicas;
  for (size_t s = 0; s < options.addresses.size(); ++s) {
    auto list = ParseReplicaList(options.addresses[s], static_cast<int>(s));
    if (!list.ok()) return list.status();
    replicas.push_back(*std::move(list));
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
  return std::unique_ptr<Transport>(
      new Transport(std::move(options), std::move(replicas), std::move(tls)));
}

Transport::Transport(TransportOptions options, std::vector<std::vector<std::string>> replicas,
                     std::unique_ptr<kj::TlsContext> tls)
    : options_(std::move(options)),
      tls_(std::move(tls)),
      replicas_(replicas.size()),
      latency_(replicas.size()),
      loop_(std::make_unique<Loop>()) {
  for (size_t s = 0; s < replicas.size(); ++s) {
    const bool named = s < options_.tls_names.size() && !options_.tls_names[s].empty();
    for (size_t r = 0; r < replicas[s].size(); ++r) {
      auto endpoint = std::make_unique<Endpoint>();
      endpoint->server = static_cast<int>(s);
      endpoint->replica = static_cast<int>(r);
      endpoint->address = replicas[s][r];
      endpoint->tls_name = named ? options_.tls_names[s] : rpc::HostOf(replicas[s][r]);
      replicas_[s].push_back(static_cast<int>(endpoints_.size()));
      endpoints_.push_back(std::move(endpoint));
    }
  }
  up_.reset(new std::atomic<bool>[endpoints_.size()]);
  for (size_t e = 0; e < endpoints_.size(); ++e) up_[e] = false;
  loop_->thread = std::thread([this] { RunLoop(); });
  absl::MutexLock lock(&loop_->mu);
  loop_->mu.Await(absl::Condition(
      +[](const kj::Executor** e) { return *e != nullptr; }, &loop_->executor));
}

Transport::~Transport() {
  loop_->executor->executeSync([this] {
    for (auto& endpoint : endpoints_) endpoint->connecting.reset();
    absl::MutexLock lock(&loop_->streams_mu);
    for (auto& endpoint : endpoints_) endpoint->connection.Close();
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

rpc::VeilServer::Client Transport::Capability(int s) {
  return endpoints_[Preferred(s)]->connection.cap;
}

int Transport::Preferred(int s) const {
  const absl::Time now = absl::Now();
  int up = -1;
  for (int e : replicas_[s]) {
    if (endpoints_[e]->state != Endpoint::State::kUp) continue;
    if (endpoints_[e]->retry_at <= now) return e;
    if (up < 0) up = e;
  }
  return up >= 0 ? up : replicas_[s][0];
}

std::string Transport::Name(int s) const {
  std::string addresses;
  for (int e : replicas_[s]) {
    absl::StrAppend(&addresses, addresses.empty() ? "" : ", ", endpoints_[e]->address);
  }
  return absl::StrCat("server ", s, " (", addresses, ")");
}

std::string Transport::ReplicaName(int s, int replica) const {
  return absl::StrCat("server ", s, " (", endpoints_[replicas_[s][replica]]->address, ")");
}

std::vector<bool> Transport::Lost() const {
  std::vector<bool> lost(servers(), true);
  for (int s = 0; s < servers(); ++s) {
    for (int e : replicas_[s]) lost[s] = lost[s] && !up_[e].load();
  }
  return lost;
}

absl::Status Transport::ReconnectLost() {
  const std::vector<bool> lost = Lost();
  if (std::find(lost.begin(), lost.end(), true) == lost.end()) return absl::OkStatus();
  return Connect(lost, reconnect_check_);
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
        auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(endpoints_.size());
        for (int s = 0; s < servers(); ++s) {
          for (int e : replicas_[s]) {
            statuses.add(which[s] ? EnsureConnected(e, &on_connected)
                                  : kj::Promise<absl::Status>(absl::OkStatus()));
          }
        }
        return kj::joinPromises(statuses.finish())
            .then([this, &which](kj::Array<absl::Status> results) {
              for (int s = 0; s < servers(); ++s) {
                if (!which[s]) continue;
                bool up = false;
                std::vector<absl::Status> errors;
                for (int e : replicas_[s]) {
                  const absl::Status& r = results[e];
                  if (r.ok()) {
                    up = true;
                    continue;
                  }
                  // A replica that is down is tolerated; one configured wrong is not.
                  if (!absl::IsUnavailable(r) && !absl::IsDeadlineExceeded(r)) return r;
                  errors.push_back(r);
                }
                if (!up) return AllFailed(s, errors);
              }
              return absl::OkStatus();
            });
      },
      "connect");
}

kj::Promise<absl::Status> Transport::EnsureConnected(int e, const OnConnected* check) {
  Endpoint& ep = *endpoints_[e];
  if (ep.state == Endpoint::State::kUp) return absl::OkStatus();
  if (ep.state == Endpoint::State::kConnecting) return ep.connecting->addBranch();
  ep.state = Endpoint::State::kConnecting;
  ep.stage = Stage::kResolving;
  up_[e] = false;
  auto connected =
      Open(e)
          .then([this, e]() { return endpoints_[e]->connection.cap.helloRequest().send(); })
          .then([this, e, check](capnp::Response<rpc::VeilServer::HelloResults> r) {
            if (absl::Status hello = CheckHello(e, r.getHello()); !hello.ok()) {
              return kj::Promise<absl::Status>(hello);
            }
            if (check == nullptr || !*check) return kj::Promise<absl::Status>(absl::OkStatus());
            Endpoint& ep = *endpoints_[e];
            return (*check)(ep.server, ep.replica, ep.connection.cap);
          })
          .then([](absl::Status status) { return status; },
                [this, e](kj::Exception&& exception) {
                  return ConnectError(e, endpoints_[e]->stage, exception);
                });
  auto timeout = loop_->io->provider->getTimer()
                     .afterDelay(absl::ToInt64Nanoseconds(options_.timeout) * kj::NANOSECONDS)
                     .then([this, e]() {
                       const Endpoint& ep = *endpoints_[e];
                       return absl::DeadlineExceededError(absl::StrCat(
                           "no answer from ", ReplicaName(ep.server, ep.replica),
                           ep.stage == Stage::kHandshake ? " (TLS handshake unfinished)" : "",
                           " within ", absl::FormatDuration(options_.timeout)));
                     });
  ep.connecting = connected.exclusiveJoin(kj::mv(timeout))
                      .then([this, e](absl::Status status) {
                        Endpoint& ep = *endpoints_[e];
                        if (!status.ok()) {
                          MarkDown(e);
                          return status;
                        }
                        ep.state = Endpoint::State::kUp;
                        ep.failures = 0;
                        ep.retry_at = absl::InfinitePast();
                        up_[e] = true;
                        return status;
                      })
                      .fork();
  return ep.connecting->addBranch();
}

void Transport::MarkDown(int e) {
  Endpoint& ep = *endpoints_[e];
  ep.state = Endpoint::State::kDown;
  ++ep.failures;
  ep.retry_at = absl::Now() + BackoffAfter(ep.failures);
  up_[e] = false;
}

kj::Promise<void> Transport::Open(int e) {
  return loop_->io->provider->getNetwork()
      .parseAddress(endpoints_[e]->address)
      .then([this, e](kj::Own<kj::NetworkAddress> address) {
        endpoints_[e]->stage = Stage::kConnecting;
        return address->connect().attach(kj::mv(address));
      })
      .then([this, e](kj::Own<kj::AsyncIoStream> tcp)
                -> kj::Promise<std::pair<CountingStream*, kj::Own<kj::AsyncIoStream>>> {
        int one = 1;
        tcp->setsockopt(IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        auto socket = kj::heap<CountingStream>(kj::mv(tcp));
        CountingStream* counted = socket.get();
        if (tls_ == nullptr) {
          if (absl::Status allowed = CheckPlaintextAllowed(e, *counted); !allowed.ok()) {
            return rpc::StatusToException(allowed);
          }
          return std::make_pair(counted, kj::Own<kj::AsyncIoStream>(kj::mv(socket)));
        }
        endpoints_[e]->stage = Stage::kHandshake;
        return tls_->wrapClient(kj::mv(socket), endpoints_[e]->tls_name)
            .then([counted](kj::Own<kj::AsyncIoStream> secure) {
              return std::make_pair(counted, kj::mv(secure));
            });
      })
      .then([this, e](std::pair<CountingStream*, kj::Own<kj::AsyncIoStream>> opened) {
        endpoints_[e]->stage = Stage::kHello;
        Connection& c = endpoints_[e]->connection;
        absl::MutexLock lock(&loop_->streams_mu);
        if (c.socket != nullptr) {
          loop_->retired_up += c.socket->bytes_written();
          loop_->retired_down += c.socket->bytes_read();
        }
        c.Close();
        c.socket = opened.first;
        c.stream = kj::mv(opened.second);
        c.rpc = kj::heap<rpc::WipingTwoPartyClient>(*c.stream);
        c.cap = c.rpc->Bootstrap().castAs<rpc::VeilServer>();
      });
}

absl::Status Transport::CheckHello(int e, rpc::Hello::Reader hello) const {
  const std::string name = ReplicaName(endpoints_[e]->server, endpoints_[e]->replica);
  const std::string protocol = hello.getProtocol();
  if (protocol != options_.protocol) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " speaks protocol \"", protocol, "\"; this client speaks \"",
                     options_.protocol, "\" (is it another kind of veil server?)"));
  }
  if (hello.getProtocolVersion() != rpc::PROTOCOL_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " speaks protocol version ", hello.getProtocolVersion(),
                     "; this client speaks version ", rpc::PROTOCOL_VERSION));
  }
  return absl::OkStatus();
}

absl::Status Transport::ServerError(int s, const kj::Exception& e) {
  return EndpointError(Preferred(s), e);
}

absl::Status Transport::EndpointError(int e, const kj::Exception& exception) {
  const std::string name = ReplicaName(endpoints_[e]->server, endpoints_[e]->replica);
  if (exception.getType() == kj::Exception::Type::DISCONNECTED) {
    absl::Status status = rpc::ExceptionToStatus(exception, absl::StrCat(name, " is unreachable"));
    // A server's own UNAVAILABLE reply also travels as DISCONNECTED, but leaves the connection up.
    if (IsLocalFailure(exception) && endpoints_[e]->state == Endpoint::State::kUp) {
      MarkDown(e);
    }
    return status;
  }
  return rpc::ExceptionToStatus(exception, name);
}

kj::Promise<absl::Status> Transport::CallEach(int s, std::vector<Send> sends, absl::Time deadline) {
  auto done = std::make_shared<std::vector<bool>>(servers(), true);
  (*done)[s] = false;
  auto remaining = std::make_shared<size_t>(sends.size());
  auto replies = kj::heapArrayBuilder<kj::Promise<absl::Status>>(sends.size());
  for (Send& send : sends) {
    replies.add(Call(s, std::move(send))
                    .then([done, remaining, s](absl::Status status) {
                      if (status.ok() && --*remaining == 0) (*done)[s] = true;
                      return status;
                    })
                    .eagerlyEvaluate(nullptr));
  }
  auto all = kj::joinPromises(replies.finish()).then([](kj::Array<absl::Status> r) {
    return FirstError(kj::mv(r));
  });
  // evalLast: the replies' Finish messages are written in a later turn; count them here.
  return WithTimeout(kj::mv(all), done, deadline).then([](absl::Status status) {
    return kj::evalLast([status = std::move(status)]() mutable { return std::move(status); });
  });
}

kj::Promise<absl::Status> Transport::WithTimeout(kj::Promise<absl::Status> promise,
                                                 std::shared_ptr<std::vector<bool>> done,
                                                 absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + options_.timeout;
  return promise.exclusiveJoin(TimeoutNaming(std::move(done), deadline));
}

kj::Promise<absl::Status> Transport::TimeoutNaming(std::shared_ptr<std::vector<bool>> done,
                                                   absl::Time deadline) {
  const int64_t left_ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(deadline - absl::Now()));
  return loop_->io->provider->getTimer().afterDelay(left_ns * kj::NANOSECONDS).then([=, this]() {
    std::string who;
    for (int s = 0; s < servers(); ++s) {
      if (!(*done)[s]) absl::StrAppend(&who, who.empty() ? "" : " and ", Name(s));
    }
    return absl::DeadlineExceededError(absl::StrCat("no answer from ",
                                                    who.empty() ? "the servers" : who, " within ",
                                                    absl::FormatDuration(options_.timeout)));
  });
}

absl::Status Transport::CheckPlaintextAllowed(int e, kj::AsyncIoStream& stream) const {
  if (options_.allow_plaintext) return absl::OkStatus();
  sockaddr_storage peer;
  uint length = sizeof(peer);
  stream.getpeername(reinterpret_cast<sockaddr*>(&peer), &length);
  if (rpc::IsLoopback(reinterpret_cast<const sockaddr*>(&peer), length)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to send queries in plaintext to ", endpoints_[e]->address,
      ", which is not a loopback address: ", rpc::kPlaintextRisk,
      ". Set tls_trusted_certs (the servers' certificate or their CA), or allow_plaintext if "
      "this network is protected otherwise"));
}

absl::Status Transport::HandshakeError(int e, const kj::Exception& exception) const {
  const Endpoint& ep = *endpoints_[e];
  const std::string name = ReplicaName(ep.server, ep.replica);
  absl::string_view text = exception.getDescription().cStr();
  // kj's wording (0.9.2): "TLS peer's certificate is not trusted; reason = <OpenSSL's reason>".
  absl::string_view reason = text;
  if (size_t at = text.find("reason = "); at != absl::string_view::npos) {
    reason = text.substr(at + 9);
  }
  const std::string setting = absl::StrCat("tls_server_name", ep.server);
  if (absl::StrContains(text, "hostname mismatch")) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, ": its TLS certificate is not valid for the name \"", ep.tls_name,
        "\" (hostname mismatch): connect by a name or IP address the certificate holds, or set ",
        setting, " to one"));
  }
  if (absl::StrContains(text, "certificate is not trusted") ||
      absl::StrContains(text, "provided no certificate")) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": its TLS certificate is not trusted (", reason,
                     "): it does not chain to a certificate in ", options_.tls_trusted_certs));
  }
  return absl::UnavailableError(absl::StrCat(
      name, ": the TLS handshake failed (", text,
      "); is the server running without TLS (no --tls-cert), or is it not a veil server?"));
}

absl::Status Transport::ConnectError(int e, Stage stage, const kj::Exception& exception) {
  const std::string name = ReplicaName(endpoints_[e]->server, endpoints_[e]->replica);
  switch (stage) {
    case Stage::kResolving:
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the address cannot be parsed or resolved (", exception.getDescription().cStr(),
          "); give HOST:PORT with a resolvable host name or an IP address"));
    case Stage::kConnecting:
      break;
    case Stage::kHandshake:
      return HandshakeError(e, exception);
    case Stage::kHello:
      if (tls_ == nullptr && IsLocalFailure(exception)) {
        return absl::UnavailableError(absl::StrCat(
            name, " broke the connection before answering (", exception.getDescription().cStr(),
            "); a TLS server (--tls-cert) does that to a client without TLS: set "
            "tls_trusted_certs to its certificate"));
      }
      break;
  }
  return EndpointError(e, exception);
}

uint64_t Transport::bytes_up() const {
  absl::MutexLock lock(&loop_->streams_mu);
  uint64_t total = loop_->retired_up;
  for (const auto& endpoint : endpoints_) {
    if (endpoint->connection.socket != nullptr)
      total += endpoint->connection.socket->bytes_written();
  }
  return total;
}

uint64_t Transport::bytes_down() const {
  absl::MutexLock lock(&loop_->streams_mu);
  uint64_t total = loop_->retired_down;
  for (const auto& endpoint : endpoints_) {
    if (endpoint->connection.socket != nullptr) total += endpoint->connection.socket->bytes_read();
  }
  return total;
}

absl::Status FirstError(kj::Array<absl::Status> results) {
  for (absl::Status& r : results) {
    if (!r.ok()) return r;
  }
  return absl::OkStatus();
}

}  // namespace veil::client
