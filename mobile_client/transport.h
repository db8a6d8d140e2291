// The client's connections to veil servers, whatever protocol they speak: an event loop on a
// thread of its own, TCP (and TLS) to each server, byte counts on the sockets, the `hello` check
// (a server of another protocol or version is refused before any protocol call), timeouts, and
// reconnecting lost connections. A protocol's client (dpf2: mobile_client/share_exchange.h) runs
// its calls on this transport through Run().
//
// Replicas: each server (party) may be a list of replicas ("HOST:PORT,HOST:PORT",
// mobile_client/replicas.h) that serve the same table. Call() sends a call to the preferred
// replica that is up; if it fails (connection lost, UNAVAILABLE, RESOURCE_EXHAUSTED, the server's
// DEADLINE_EXCEEDED, or a replica that cannot be reached) the same call goes to another replica
// (a failover), and if its reply is slower than the party's hedge delay, it is also sent to
// another replica (a hedge); the first good reply wins. A replica that failed or lost a hedge race
// is avoided for a backoff, then tried again (in the background, off the calls' path). A call
// whose connection was up and broke on this side without a reply (the server closed it while
// idle) goes once more to the same replica on a new connection, so that an app's lookup after a
// quiet minute does not fail.
//
// Transport security: whoever reads the connections to both servers of a two-server protocol
// learns the rows, so with tls_trusted_certs every connection is TLS and each server must present
// a certificate for its name that chains to those certificates; without TLS only loopback servers
// are allowed, unless allow_plaintext is set (rpc/tls.h).
#ifndef VEIL_MOBILE_CLIENT_TRANSPORT_H_
#define VEIL_MOBILE_CLIENT_TRANSPORT_H_

#include <kj/async.h>
#include <kj/exception.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "mobile_client/replicas.h"
#include "rpc/stats.h"
#include "rpc/veil.capnp.h"

namespace kj {
class AsyncIoStream;
class TlsContext;
}  // namespace kj

namespace veil::client {

// Cap'n Proto's message limit (64 MiB, its readers' default): a query or answer larger than this
// cannot travel, so a server describing a table that needs one is refused before the client
// allocates for it.
inline constexpr uint64_t kMaxCallBytes = uint64_t{64} << 20;

struct TransportOptions {
  // Per server: "HOST:PORT", or its replicas "HOST:PORT,HOST:PORT,..." (ParseReplicaList).
  std::vector<std::string> addresses;
  // The name each server's certificate must hold (all its replicas'; empty entries or none: each
  // address's HOST).
  std::vector<std::string> tls_names;
  std::string tls_trusted_certs;  // PEM file of trusted certificates; empty: plaintext
  bool allow_plaintext = false;   // plaintext to servers off loopback
  absl::Duration timeout = absl::Seconds(5);
  std::string protocol;  // what every server must answer in `hello` ("dpf2", ...)
};

class Transport {
 public:
  // Loop thread, after the `hello` of replica `replica` of server s checked out: reads its protocol
  // configuration (e.g. its `config` call) through `server`, the bootstrap capability, which
  // implements the protocol's interface; an error refuses the replica.
  using OnConnected =
      std::function<kj::Promise<absl::Status>(int s, int replica, rpc::VeilServer::Client server)>;
  // Loop thread: sends one call through `server` (replica `replica`) and handles its reply; a
  // kj exception is the call's failure.
  using Send =
      std::function<kj::Promise<absl::Status>(rpc::VeilServer::Client server, int replica)>;

  // Starts the event loop; connects nothing yet. Returns INVALID_ARGUMENT for no address, an
  // address list ParseReplicaList refuses, tls_names without tls_trusted_certs or a non-positive
  // timeout, and MakeClientTlsContext's errors.
  static absl::StatusOr<std::unique_ptr<Transport>> Create(TransportOptions options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int servers() const { return static_cast<int>(replicas_.size()); }
  int replicas(int s) const { return static_cast<int>(replicas_[s].size()); }
  // "server S (HOST:PORT)", or "server S (HOST:PORT, HOST:PORT)" for replicas, for messages.
  std::string Name(int s) const;
  // "server S (HOST:PORT)" of one replica.
  std::string ReplicaName(int s, int replica) const;
  const TransportOptions& options() const { return options_; }

  // Caller thread: connects every replica of the servers marked in `which` that is not up,
  // checks its `hello`, and runs `on_connected` for it, each replica within the timeout. Succeeds
  // when every marked server has a replica up and no replica failed otherwise than by being
  // unreachable or silent. Returns UNAVAILABLE naming a server none of whose replicas can be
  // reached (with one replica: naming it), whose TLS handshake fails or which closes a plaintext
  // connection before answering; DEADLINE_EXCEEDED if a lone replica does not answer in time;
  // FAILED_PRECONDITION for an untrusted certificate or one without the server's name, plaintext
  // off loopback, or a server of another protocol or protocol version; or on_connected's error.
  absl::Status Connect(const std::vector<bool>& which, const OnConnected& on_connected);
  // What Call() runs on a replica it (re)connects; call before Connect. It must outlive the
  // transport's calls.
  void SetReconnectCheck(OnConnected check) { reconnect_check_ = std::move(check); }
  const OnConnected& reconnect_check() const { return reconnect_check_; }
  // The servers none of whose replicas is up (reconnect them with Connect).
  std::vector<bool> Lost() const;
  // Caller thread: Connect(Lost(), reconnect_check()) where a server is lost; OK where none is.
  absl::Status ReconnectLost();

  // Loop thread: runs `send` on a replica of server s, with failover and hedging (see above);
  // a replica without a connection is connected before the call goes to it (with
  // SetReconnectCheck's check). Returns the
  // first good reply's status; a reply's own error (send's status, or a server's error reply
  // other than those failed over) at once; with one replica, its failure; otherwise UNAVAILABLE
  // naming the server and each replica's failure once all have failed. The caller bounds it
  // (WithTimeout); dropping the promise cancels every attempt.
  kj::Promise<absl::Status> Call(int s, Send send);
  // Loop thread: every send of `sends` through Call(s, ...) at once; resolves to the first
  // error in send order, or OK once all succeeded, or DEADLINE_EXCEEDED naming server s if they
  // have not all succeeded by `deadline` (default: the timeout from now). The status comes a
  // turn after the last reply, so that its Finish message is counted in the socket bytes.
  kj::Promise<absl::Status> CallEach(int s, std::vector<Send> sends,
                                     absl::Time deadline = absl::InfiniteFuture());
  // Calls sent to another replica after a failure, and hedged calls, since Create.
  uint64_t failovers() const { return failovers_.load(); }
  uint64_t hedges() const { return hedges_.load(); }

  // Caller thread: server s's `stats` (a VeilServer call every protocol answers), through Call,
  // within the timeout.
  absl::StatusOr<rpc::StatsSnapshot> Stats(int s);

  // Caller thread: runs `body` on the loop thread and waits for its status. A kj exception
  // becomes a status (rpc/status.h) with `what` as context.
  absl::Status Run(const std::function<kj::Promise<absl::Status>()>& body, const char* what);

  // Loop thread: the bootstrap capability of server s's preferred replica (castAs the protocol's
  // interface).
  rpc::VeilServer::Client Capability(int s);
  // Loop thread: the status of a failed call to server s's preferred replica, worded for the
  // reader; a lost connection is marked for reconnection.
  absl::Status ServerError(int s, const kj::Exception& e);
  // Loop thread: `promise`, or DEADLINE_EXCEEDED naming the servers not marked in `done` once
  // `deadline` (default: the timeout from now) passes.
  kj::Promise<absl::Status> WithTimeout(kj::Promise<absl::Status> promise,
                                        std::shared_ptr<std::vector<bool>> done,
                                        absl::Time deadline = absl::InfiniteFuture());

  // Bytes on all sockets since Create (RPC framing and TLS records included).
  uint64_t bytes_up() const;
  uint64_t bytes_down() const;

 private:
  class CountingStream;
  struct Connection;
  struct Endpoint;
  struct CallState;
  enum class Stage;

  Transport(TransportOptions options, std::vector<std::vector<std::string>> replicas,
            std::unique_ptr<kj::TlsContext> tls);
  void RunLoop();
  // Loop thread: endpoint e connected, its `hello` and `check` passed, within the timeout; a
  // connection under way is joined.
  kj::Promise<absl::Status> EnsureConnected(int e, const OnConnected* check);
  // Loop thread: TCP (and TLS) to endpoint e, replacing its connection.
  kj::Promise<void> Open(int e);
  void MarkDown(int e);
  // Whether an exception arose on this side (a broken connection, bytes that are no RPC message)
  // rather than being a server's error reply, which arrives as a remote exception.
  static bool IsLocalFailure(const kj::Exception& e);
  // Loop thread: the replica of server s that calls go to first.
  int Preferred(int s) const;
  // Loop thread, Call's parts (transport_failover.cc).
  bool StartAttempt(CallState& call, bool hedge);
  // An attempt's outcome: its status, whether another attempt may follow, and whether its
  // connection broke on this side (`lost`).
  struct Attempt {
    absl::Status status;
    bool retry = false;
    bool lost = false;
  };
  void FinishAttempt(CallState& call, int e, Attempt attempt, absl::Time start, bool was_up);
  void ArmHedge(CallState& call);
  absl::Status AllFailed(int s, const std::vector<absl::Status>& errors) const;
  absl::Status EndpointError(int e, const kj::Exception& exception);
  absl::Status CheckHello(int e, rpc::Hello::Reader hello) const;
  absl::Status CheckPlaintextAllowed(int e, kj::AsyncIoStream& stream) const;
  absl::Status ConnectError(int e, Stage stage, const kj::Exception& exception);
  absl::Status HandshakeError(int e, const kj::Exception& exception) const;
  kj::Promise<absl::Status> TimeoutNaming(std::shared_ptr<std::vector<bool>> done,
                                          absl::Time deadline);

  const TransportOptions options_;
  std::unique_ptr<kj::TlsContext> tls_;     // null: plaintext
  std::vector<std::vector<int>> replicas_;  // per server: its endpoints
  // Loop thread only, but for their sockets' byte counts (under the loop's streams_mu).
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::unique_ptr<std::atomic<bool>[]> up_;  // per endpoint, for Lost()
  std::vector<LatencyWindow> latency_;       // per server, loop thread only
  OnConnected reconnect_check_;
  std::atomic<uint64_t> failovers_{0}, hedges_{0};
  struct Loop;
  std::unique_ptr<Loop> loop_;
};

// The first error of joined calls' results, in call order; OK if none failed.
absl::Status FirstError(kj::Array<absl::Status> results);

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_TRANSPORT_H_
