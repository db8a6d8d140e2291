// The server's connections, whatever protocol it speaks: accepting (TLS handshakes bounded in
// time), the connection limit, idle and read timeouts, and a bound on the bytes buffered for
// messages still arriving, per connection and in total. None of it depends on what a client
// sends being well-formed: a hostile or slow client costs at most its own connection.
//
// - At max_connections (TLS handshakes count), a newcomer:
//   - takes the place of the connection idle the longest (idle at least min_idle_to_evict, not
//     busy (below), and of the newcomer's address or of one holding more: AddressGroup);
//   - else takes a place from the address holding the most, if it holds at least two more than
//     the newcomer's: its oldest TLS handshake, else its connection idle the longest and not
//     busy, else (three more needed) a busy one. These takeovers are
//     rationed by token buckets, one per address and one for the server (connections.cc), so
//     that connecting and leaving closes others' connections no faster than that;
//   - else is served a refusal: its first call fails with RESOURCE_EXHAUSTED ("connection
//     limit") and it is closed shortly after (over TLS, after a handshake: at most 64 refused
//     streams are told at a time, for a few seconds each; the rest are closed without a word).
//   The last Headroom() slots (max(1, max_connections / 16)) go to no address holding two or more
//   and no fewer than any other, unless one of its own idle connections makes room: the address a
//   takeover took a place from cannot take it back (and so spend the server's tokens to keep
//   newcomers out). So one address cannot hold the slots against others, and filling them takes
//   as many addresses as there are slots.
// - A connection with no traffic for idle_timeout is closed, unless it is busy: the server
//   working on its calls (calls in flight and no reply waiting to be written, for at most ten idle
//   timeouts: a call unanswered for longer is taken as stuck), or the client reading its replies
//   (they are written 64 KiB at a time, and one went out within the last second, the last one
//   included, whose tail may still sit in the sockets' buffers: a client that does not read its
//   replies is closed, one reading them at 64 KiB/s or more is not); so is one
//   whose message does not arrive whole within read_timeout of its first byte. Calls in flight
//   are counted where the RPC system dispatches them to the connection's service, until their
//   promises settle; messages it does not dispatch count as no call.
// - Each arriving message's declared size (from the Cap'n Proto framing, read as the bytes pass)
//   is reserved against max_buffered_bytes until the message is complete. Cap'n Proto allocates a
//   message at its declared size before the bytes arrive, so this is what bounds memory under
//   slow senders. A message that would exceed it first takes the reservations of messages
//   arriving too slowly (under 64 KiB/s since they started, counted over at least 250 ms: their
//   connections are closed, slowest first, if closing them all would make room); otherwise its
//   own connection is closed. So holding the budget against others costs a client bandwidth
//   (64 KiB/s for each message it keeps arriving), not just a few headers.
// Closing, refusing and handshake failures are logged with throttling (server/log.h).
#ifndef VEIL_SERVER_CONNECTIONS_H_
#define VEIL_SERVER_CONNECTIONS_H_

#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <kj/timer.h>
#include <sys/socket.h>

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "server/limits.h"
#include "server/stats.h"

namespace veil::server {

// Whether `address` is a loopback one: 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
bool IsLoopback(const sockaddr* address);

// The address a connection counts against for the connection limit's fair share: an IPv4
// address (IPv4-mapped IPv6 ones included) as written, an IPv6 one by its /64 prefix (one host's
// usual share), anything else as "local".
std::string AddressGroup(const sockaddr* address);

// Who opened a connection.
struct Peer {
  std::string address;  // "ADDRESS:PORT", for logs
  std::string group;    // AddressGroup
  bool loopback = false;
};

class Listener {
 public:
  // `new_service` makes the service of one new connection (its bootstrap capability). With `tls`
  // (else null: plaintext) every accepted stream is wrapped in TLS before it is served. All
  // references must outlive the listener; destroying it closes every connection.
  Listener(kj::ConnectionReceiver& receiver, kj::TlsContext* tls, kj::Timer& timer,
           kj::Network& network,
           std::function<kj::Own<capnp::Capability::Server>(const Peer&)> new_service,
           const ServerLimits& limits, ServerStats& stats);
  ~Listener();

  // Accepts connections until the listener is destroyed; also runs the timeout sweeps.
  kj::Promise<void> Run();

  struct Slot;         // what counts against max_connections (connections.cc)
  struct Entry;        // one connection, a Slot
  struct Handshaking;  // one stream in its TLS handshake, a Slot

 private:
  kj::Promise<void> AcceptLoop();
  kj::Promise<void> SweepLoop();
  void Admit(kj::Own<kj::AsyncIoStream> stream);
  // A connection or handshake of `group` opens or goes.
  void Hold(const std::string& group);
  void Release(const std::string& group);
  // Connections and handshakes of `group`.
  uint32_t Held(const std::string& group) const;
  // Takes a takeover token of `group`'s bucket and of the server's, if both have one.
  bool TakeTakeover(const std::string& group);
  // The last slots, kept from the address holding the most (connections.h).
  size_t Headroom() const;
  // Whether `group` holds at least two connections and no address holds more.
  bool HoldsTheMost(const std::string& group) const;
  void Serve(kj::Own<kj::AsyncIoStream> stream, Peer peer);
  void Refuse(kj::Own<kj::AsyncIoStream> stream, const Peer& peer);
  kj::Promise<void> Handshake(kj::Own<kj::AsyncIoStream> stream, Peer peer);
  // At max_connections, for a newcomer (connections.h): closes the connection idle the longest
  // that it may take the place of, or else one of the address holding the most.
  bool EvictIdlest(const Peer& newcomer);
  bool EvictForFairShare(const Peer& newcomer);
  // Closes connections other than `arriving` whose messages arrive too slowly (connections.cc),
  // slowest first, releasing their reservations, until `bytes` more fit in max_buffered_bytes.
  void MakeRoom(uint64_t bytes, const Entry& arriving);
  // `reason` labels the closed-connections metric; `why` is logged.
  void Close(Slot& slot, const char* reason, const std::string& why);

  kj::ConnectionReceiver& receiver_;
  kj::TlsContext* tls_;
  kj::Timer& timer_;
  kj::Network& network_;
  std::function<kj::Own<capnp::Capability::Server>(const Peer&)> new_service_;
  const ServerLimits& limits_;
  ServerStats& stats_;
  uint32_t refusing_ = 0;               // refused streams being told why
  uint64_t buffered_bytes_ = 0;         // reserved for messages being received, all connections
  std::list<Entry*> entries_;           // open connections
  std::list<Handshaking*> handshakes_;  // streams in their TLS handshake (count as connections)
  std::unordered_map<std::string, uint32_t> held_;  // connections and handshakes per address
  struct Bucket {
    double tokens = 0;
    kj::TimePoint at = kj::origin<kj::TimePoint>();
  };
  std::unordered_map<std::string, Bucket> takeovers_;  // per address (bounded, connections.cc)
  Bucket all_takeovers_;
  class ErrorHandler;
  std::unique_ptr<ErrorHandler> errors_;
  kj::TaskSet tasks_;  // handshakes, refusals and open connections
};

}  // namespace veil::server

#endif  // VEIL_SERVER_CONNECTIONS_H_
