// The transport's private state (mobile_client/transport.h), shared by transport.cc (connecting,
// errors) and transport_failover.cc (calls across a server's replicas). Not for other files.
#ifndef VEIL_MOBILE_CLIENT_TRANSPORT_STATE_H_
#define VEIL_MOBILE_CLIENT_TRANSPORT_STATE_H_

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "mobile_client/transport.h"
#include "rpc/wiping_message_stream.h"

namespace veil::client {

struct Transport::Connection {
  // Releases the capability, the RPC system and the streams, each before what it uses.
  void Close() {
    cap = nullptr;
    rpc = nullptr;
    stream = nullptr;
    socket = nullptr;
  }

  CountingStream* socket = nullptr;        // the TCP stream and its byte counts, owned by `stream`
  kj::Own<kj::AsyncIoStream> stream;       // what the RPC system uses: `socket`, or TLS over it
  kj::Own<rpc::WipingTwoPartyClient> rpc;  // message buffers wiped on release
  rpc::VeilServer::Client cap{nullptr};
};

// How far a connection got, for the messages of its failures.
enum class Transport::Stage { kResolving, kConnecting, kHandshake, kHello };

// One replica of one server, and its connection.
struct Transport::Endpoint {
  enum class State { kIdle, kConnecting, kUp, kDown };

  int server = 0;
  int replica = 0;
  std::string address;
  std::string tls_name;  // what its certificate must hold
  Connection connection;
  State state = State::kIdle;
  Stage stage = Stage::kResolving;  // of the connection under way
  // While kConnecting: the connection under way, which callers join (its result is the state's).
  std::optional<kj::ForkedPromise<absl::Status>> connecting;
  // Failures (or hedge races lost) in a row, and until when the replica is avoided: down, it is
  // reconnected only after it; up, calls go to it first again only after it.
  int failures = 0;
  absl::Time retry_at = absl::InfinitePast();
};

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

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_TRANSPORT_STATE_H_
