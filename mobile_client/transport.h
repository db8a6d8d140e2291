// The client's connections to veil servers, whatever protocol they speak: an event loop on a
// thread of its own, TCP (and TLS) to each server, byte counts on the sockets, the `hello` check
// (a server of another protocol or version is refused before any protocol call), timeouts, and
// reconnecting lost connections. A protocol's client (dpf2: mobile_client/share_exchange.h) runs
// its calls on this transport through Run().
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/veil.capnp.h"

namespace kj {
class AsyncIoStream;
class TlsContext;
}  // namespace kj

namespace veil::client {

struct TransportOptions {
  std::vector<std::string> addresses;  // "HOST:PORT" of each server
  // The name each server's certificate must hold (empty entries or none: the address's HOST).
  std::vector<std::string> tls_names;
  std::string tls_trusted_certs;  // PEM file of trusted certificates; empty: plaintext
  bool allow_plaintext = false;   // plaintext to servers off loopback
  absl::Duration timeout = absl::Seconds(5);
  std::string protocol;  // what every server must answer in `hello` ("dpf2", ...)
};

class Transport {
 public:
  // Loop thread, after a server's `hello` checked out: reads its protocol configuration (e.g. its
  // `config` call) through `server`, the bootstrap capability, which implements the protocol's
  // interface.
  using OnConnected = std::function<kj::Promise<absl::Status>(int s, rpc::VeilServer::Client server)>;

  // Starts the event loop; connects nothing yet. Returns INVALID_ARGUMENT for no or an empty
  // address, tls_names without tls_trusted_certs or a non-positive timeout, and
  // MakeClientTlsContext's errors.
  static absl::StatusOr<std::unique_ptr<Transport>> Create(TransportOptions options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int servers() const { return static_cast<int>(addresses_.size()); }
  // "server S (HOST:PORT)", for messages.
  std::string Name(int s) const;
  const TransportOptions& options() const { return options_; }

  // Caller thread: (re)connects the servers marked in `which`, checks their `hello`, and runs
  // `on_connected` for each, all within the timeout. Returns UNAVAILABLE naming a server that
  // cannot be reached, whose TLS handshake fails or which closes a plaintext connection before
  // answering; DEADLINE_EXCEEDED if one does not answer in time; FAILED_PRECONDITION for an
  // untrusted certificate or one without the server's name, plaintext off loopback, or a server
  // of another protocol or protocol version; or on_connected's error.
  absl::Status Connect(const std::vector<bool>& which, const OnConnected& on_connected);
  // The servers whose connection broke since they were connected (reconnect them with Connect).
  std::vector<bool> Lost() const;

  // Caller thread: runs `body` on the loop thread and waits for its status. A kj exception
  // becomes a status (rpc/status.h) with `what` as context.
  absl::Status Run(const std::function<kj::Promise<absl::Status>()>& body, const char* what);

  // Loop thread: the bootstrap capability of server s (castAs the protocol's interface).
  rpc::VeilServer::Client Capability(int s);
  // Loop thread: the status of a failed call to server s, worded for the reader; a lost
  // connection is marked for reconnection.
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
  enum class Stage;

  Transport(TransportOptions options, std::unique_ptr<kj::TlsContext> tls);
  void RunLoop();
  // Loop thread: TCP (and TLS) to server s, then `hello`.
  kj::Promise<void> Open(int s, std::shared_ptr<std::vector<Stage>> stages);
  absl::Status CheckHello(int s, rpc::Hello::Reader hello) const;
  absl::Status CheckPlaintextAllowed(int s, kj::AsyncIoStream& stream) const;
  absl::Status ConnectError(int s, Stage stage, const kj::Exception& e);
  absl::Status HandshakeError(int s, const kj::Exception& e) const;
  kj::Promise<absl::Status> TimeoutNaming(std::shared_ptr<std::vector<bool>> done,
                                          std::shared_ptr<std::vector<Stage>> stages,
                                          absl::Time deadline);

  const TransportOptions options_;
  std::unique_ptr<kj::TlsContext> tls_;  // null: plaintext
  std::vector<std::string> addresses_;
  std::vector<std::string> tls_names_;
  std::unique_ptr<Connection[]> connections_;
  std::unique_ptr<std::atomic<bool>[]> lost_;
  struct Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_TRANSPORT_H_
