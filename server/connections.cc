#include "server/connections.h"

#include <arpa/inet.h>
#include <capnp/rpc-twoparty.h>
#include <kj/vector.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "rpc/wiping_message_stream.h"
#include "server/log.h"

namespace veil::server {
namespace {

// Cap'n Proto's stream framing, read as a connection's bytes pass: a message is a segment table
// (segment count - 1, then each segment's size in words, padded to a whole word) and the
// segments. Tells when a message starts, its declared size once its table is read, and when it
// ends. (What a message is, the RPC system decides: calls are counted where it dispatches them,
// CountingService.)
class FrameTracker {
 public:
  // Most segments a message may declare (Cap'n Proto's own readers refuse more).
  static constexpr uint32_t kMaxSegments = 512;

  // Consumes received bytes. on_declared(bytes) is called once per message with its declared size
  // (table and segments) and returns false to refuse it; on_end() when a message is complete.
  // Returns false for a refused message or a table no reader would accept.
  template <typename OnDeclared, typename OnEnd>
  bool Feed(const uint8_t* data, size_t n, OnDeclared on_declared, OnEnd on_end) {
    while (n > 0) {
      if (stage_ == Stage::kBody) {
        const uint64_t take = std::min<uint64_t>(n, left_);
        data += take;
        n -= take;
        left_ -= take;
        if (left_ == 0) {
          stage_ = Stage::kCount;
          on_end();
        }
        continue;
      }
      table_[table_fill_++] = *data++;
      --n;
      if (stage_ == Stage::kCount && table_fill_ == 4) {
        const uint32_t count = Word(0) + 1;
        if (count == 0 || count > kMaxSegments) return false;
        segments_ = count;
        table_bytes_ = (4 * (count + 1) + 7) / 8 * 8;
        stage_ = Stage::kTable;
      } else if (stage_ == Stage::kTable && table_fill_ == table_bytes_) {
        uint64_t words = 0;
        for (uint32_t s = 0; s < segments_; ++s) words += Word(4 * (s + 1));
        left_ = words * 8;
        table_fill_ = 0;
        if (!on_declared(table_bytes_ + left_)) return false;
        stage_ = Stage::kBody;
        if (left_ == 0) {
          stage_ = Stage::kCount;
          on_end();
        }
      }
    }
    return true;
  }

  // Whether a message has started and not ended.
  bool in_message() const { return stage_ != Stage::kCount || table_fill_ > 0; }

 private:
  enum class Stage { kCount, kTable, kBody };
  uint32_t Word(size_t at) const {
    return uint32_t{table_[at]} | uint32_t{table_[at + 1]} << 8 | uint32_t{table_[at + 2]} << 16 |
           uint32_t{table_[at + 3]} << 24;
  }
  Stage stage_ = Stage::kCount;
  uint8_t table_[4 * (kMaxSegments + 1) + 4] = {};
  size_t table_fill_ = 0;
  size_t table_bytes_ = 0;
  uint32_t segments_ = 0;
  uint64_t left_ = 0;
};

// A connection's service, counting its calls in flight: each from its dispatch until its promise
// settles (answered, failed or cancelled by the client). The count is shared with the
// connection's entry, which may go before the RPC system drops the last call.
class CountingService final : public capnp::Capability::Server {
 public:
  CountingService(kj::Own<capnp::Capability::Server> inner, std::shared_ptr<uint32_t> calls)
      : inner_(kj::mv(inner)), calls_(std::move(calls)) {}

  DispatchCallResult dispatchCall(
      uint64_t interface_id, uint16_t method_id,
      capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context) override {
    ++*calls_;
    auto uncount = kj::defer([calls = calls_] { --*calls; });  // also if dispatch throws
    DispatchCallResult result = inner_->dispatchCall(interface_id, method_id, context);
    result.promise = result.promise.attach(kj::mv(uncount));
    return result;
  }

 private:
  kj::Own<capnp::Capability::Server> inner_;
  std::shared_ptr<uint32_t> calls_;
};

kj::Exception Disconnect(const std::string& why) {
  return kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                       kj::heapString(why.data(), why.size()));
}

}  // namespace

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

std::string AddressGroup(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
    return text;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      in_addr v4;
      std::memcpy(&v4, v6.s6_addr + 12, sizeof(v4));
      inet_ntop(AF_INET, &v4, text, sizeof(text));
      return text;
    }
    in6_addr prefix = {};
    std::memcpy(prefix.s6_addr, v6.s6_addr, 8);
    inet_ntop(AF_INET6, &prefix, text, sizeof(text));
    return absl::StrCat(text, "/64");
  }
  return "local";
}

namespace {

// A stream's peer ("an unknown peer" if it has gone already).
Peer PeerOf(kj::Network& network, kj::AsyncIoStream& stream) {
  try {
    sockaddr_storage address;
    uint length = sizeof(address);
    stream.getpeername(reinterpret_cast<sockaddr*>(&address), &length);
    const sockaddr* peer = reinterpret_cast<const sockaddr*>(&address);
    return Peer{network.getSockaddr(&address, length)->toString().cStr(), AddressGroup(peer),
                IsLoopback(peer)};
  } catch (const kj::Exception&) {
    return Peer{"an unknown peer", "unknown", false};
  }
}

// What a connection refused at the limit is served: every call fails with RESOURCE_EXHAUSTED,
// so the client reports the limit instead of a broken connection.
class RefusingService final : public rpc::VeilServer::Server {
 public:
  explicit RefusingService(uint32_t limit) : limit_(limit) {}

 protected:
  kj::Promise<void> hello(HelloContext) override { return Refusal(); }
  kj::Promise<void> stats(StatsContext) override { return Refusal(); }

 private:
  kj::Promise<void> Refusal() const {
    return rpc::StatusToException(
        absl::ResourceExhaustedError(absl::StrCat("the server is at its connection limit (", limit_,
                                                  " connections, none to spare); retry later")));
  }
  uint32_t limit_;
};

constexpr absl::Duration kRefusalGrace = absl::Seconds(2);
constexpr uint32_t kMaxRefusing = 64;
constexpr uint64_t kRefusalMessageWords = 8192;
// Takeovers at the limit (connections.h): each address may take kTakeoverBurst places at once and
// one more a second; the server as a whole max(kTakeoverBurst, max_connections / 16) at once and
// max(1, max_connections / 64) a second. A client that looks up once a second into a full server
// keeps getting in; an attacker that connects and leaves closes at most that many connections
// (before the rationing, one per bare connect: 1,563 in 6 s, failing 900 of 7,100 lookups).
constexpr double kTakeoverBurst = 4;
constexpr double kTakeoversPerSecond = 1;

}  // namespace

// What counts against max_connections, for as long as it lives: an open connection or a stream in
// its TLS handshake, of its peer's address.
struct Listener::Slot {
  Slot(Listener& listener_in, const Peer& peer_in, const char* what_in)
      : listener(listener_in), peer(peer_in.address), group(peer_in.group), what(what_in) {
    listener.stats_.AddConnections(1);
    listener.Hold(group);
  }
  ~Slot() {
    listener.stats_.AddConnections(-1);
    listener.Release(group);
  }

  Listener& listener;
  std::string peer;                          // "ADDRESS:PORT", for logs
  std::string group;                         // AddressGroup
  const char* what;                          // "connection" or "TLS handshake", for logs
  kj::Own<kj::PromiseFulfiller<void>> kill;  // ends it (Listener::Close); null once fulfilled
};

// One open connection: its guarded stream, the RPC system over it, and what the sweeps need.
// Owned by the task that serves it; it leaves the listener's list when destroyed.
struct Listener::Entry : Slot {
  Entry(Listener& listener_in, const Peer& peer_in)
      : Slot(listener_in, peer_in, "connection"), last_activity(absl::Now()) {
    listener.entries_.push_front(this);
    position = listener.entries_.begin();
  }
  ~Entry() {
    rpc = nullptr;
    network = nullptr;
    stream = nullptr;
    listener.buffered_bytes_ -= reserved;
    listener.entries_.erase(position);
  }

  std::list<Entry*>::iterator position;
  absl::Time last_activity;
  absl::Time message_start = absl::InfiniteFuture();  // a message is half read since then
  uint64_t reserved = 0;                              // its declared bytes, while it arrives
  uint64_t message_bytes = 0;                         // of it received so far (about)
  FrameTracker frames;                                // arriving messages
  // Calls dispatched and not yet settled (CountingService): a connection waiting for its answers
  // is not closed as idle, nor evicted as idle at the limit.
  std::shared_ptr<uint32_t> calls = std::make_shared<uint32_t>(0);
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<rpc::WipingMessageStream> messages;  // requests' keys wiped once released
  kj::Own<capnp::TwoPartyVatNetwork> network;
  kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;

  // Frees reservations of other connections whose messages arrive too slowly until `bytes` more
  // fit in max_buffered_bytes (connections.h).
  void MakeRoom(uint64_t bytes) { listener.MakeRoom(bytes, *this); }
  // Counts its connection closed for `reason` (when it is closed other than by Listener::Close).
  void CountClosed(const char* reason) { listener.stats_.RecordClosedConnection(reason); }
  static constexpr int kStuckCallTimeouts = 10;
  // Whether the connection is busy: the client reading its replies (a piece of one went out
  // within kSendStall: the last pieces may still sit in the sockets' buffers, megabytes on a
  // host with large ones, however long the client takes to read them), or the server working
  // on its calls (calls in flight, no reply waiting to be written, and traffic within
  // kStuckCallTimeouts idle timeouts: a call unanswered for that long is taken as stuck,
  // however it got so). A client that does not read its replies is neither.
  bool Busy(absl::Time now) {
    if (now - last_sent < kSendStall) return true;
    const bool replying = network.get() != nullptr && network->getCurrentQueueCount() > 0;
    if (replying) return false;
    return *calls > 0 && now - last_activity < kStuckCallTimeouts * listener.limits_.idle_timeout;
  }
  // GuardedStream writes replies in pieces of kSendPiece, so that a client reading one steadily
  // at kSendPiece per kSendStall or faster (64 KiB/s, the rate slow senders are held to) is seen
  // reading it.
  static constexpr size_t kSendPiece = 64 << 10;
  static constexpr absl::Duration kSendStall = absl::Seconds(1);
  absl::Time last_sent = absl::InfinitePast();  // a piece of a reply last went out
};

// One stream in its TLS handshake.
struct Listener::Handshaking : Slot {
  Handshaking(Listener& listener_in, const Peer& peer, kj::Own<kj::PromiseFulfiller<void>> kill_in)
      : Slot(listener_in, peer, "TLS handshake") {
    kill = kj::mv(kill_in);
    listener.handshakes_.push_back(this);
    position = std::prev(listener.handshakes_.end());
  }
  ~Handshaking() { listener.handshakes_.erase(position); }

  std::list<Handshaking*>::iterator position;
};

namespace {

// How often a connection whose replies are backlogged looks again whether they drained, and the
// most replies it may have queued (besides ServerLimits::ConnectionBacklogWords of them): small
// replies take several times their size in memory.
constexpr kj::Duration kBacklogPoll = 10 * kj::MILLISECONDS;
constexpr size_t kMaxQueuedReplies = 1024;

// When a message finds max_buffered_bytes full, the reservations of messages arriving too slowly
// go first (their connections closed, slowest first), if closing them all would make room. Too
// slowly: under kMinArrivalBytesPerSecond (or the message's whole size a second, if smaller), a
// message's rate being its bytes so far over the time since it started, or kRateWindow if less.
// So a client that declares large messages and sends them slowly cannot hold the budget against
// others, even by opening fresh connections: an 8-byte header is 32 bytes/s. 64 KiB/s is
// 512 kbit/s; a client slower than that may lose a large message, but only while the budget is
// full, only if that makes room, and only after every slower one.
constexpr absl::Duration kRateWindow = absl::Milliseconds(250);
constexpr double kMinArrivalBytesPerSecond = 64 * 1024;

// The stream a connection's RPC system reads and writes: records activity, tracks the framing
// of incoming messages against the buffer budget (see connections.h), and reads nothing while the
// replies queued to the client are backlogged.
class GuardedStream final : public kj::AsyncIoStream {
 public:
  GuardedStream(kj::Own<kj::AsyncIoStream> inner, Listener::Entry& entry, uint64_t& budget_used,
                const ServerLimits& limits, kj::Timer& timer)
      : inner_(kj::mv(inner)), entry_(entry), used_(budget_used), limits_(limits), timer_(timer) {}

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    // A client that sends calls without reading their replies would make the server queue them
    // without bound: its calls wait in the socket (TCP holds the client back) until the replies
    // drain, and the idle timeout closes it if they never do.
    capnp::TwoPartyVatNetwork* network = entry_.network.get();
    const size_t queued = network == nullptr ? 0 : network->getCurrentQueueSize();
    if (queued > limits_.ConnectionBacklogWords() * 8 ||
        (network != nullptr && network->getCurrentQueueCount() > kMaxQueuedReplies)) {
      if (!backlogged_) {
        backlogged_ = true;
        LogThrottled("backlog",
                     absl::StrCat("stopped reading the connection of ", entry_.peer,
                                  " until it reads its replies (", network->getCurrentQueueCount(),
                                  " of ", queued, " bytes queued)"));
      }
      return timer_.afterDelay(kBacklogPoll).then([this, buffer, min_bytes, max_bytes] {
        return tryRead(buffer, min_bytes, max_bytes);
      });
    }
    backlogged_ = false;
    return ReadAtLeast(static_cast<uint8_t*>(buffer), min_bytes, max_bytes, 0);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    auto piece = kj::heap<kj::ArrayPtr<const kj::byte>>(static_cast<const kj::byte*>(buffer), size);
    const auto pieces = kj::arrayPtr(piece.get(), 1);  // lives as long as the write
    return Send(pieces, 0, 0).attach(kj::mv(piece));
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return Send(pieces, 0, 0);
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

 private:
  // Writes `pieces` from byte `offset` of piece `index` on, at most Entry::kSendPiece bytes at a
  // time, each piece that goes out counted as activity (Entry::Busy).
  kj::Promise<void> Send(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces, size_t index,
                         size_t offset) {
    entry_.last_activity = entry_.last_sent = absl::Now();
    kj::Vector<kj::ArrayPtr<const kj::byte>> batch;
    size_t bytes = 0;
    while (index < pieces.size() && bytes < Listener::Entry::kSendPiece) {
      const size_t take =
          std::min(pieces[index].size() - offset, Listener::Entry::kSendPiece - bytes);
      if (take > 0) batch.add(pieces[index].slice(offset, offset + take));
      bytes += take;
      offset += take;
      if (offset == pieces[index].size()) {
        ++index;
        offset = 0;
      }
    }
    if (batch.empty()) return kj::READY_NOW;
    auto out = batch.releaseAsArray();
    auto written = inner_->write(out.asPtr()).attach(kj::mv(out));
    if (index == pieces.size()) {
      return written.then([this] { entry_.last_activity = entry_.last_sent = absl::Now(); });
    }
    return written.then([this, pieces, index, offset] { return Send(pieces, index, offset); });
  }

  // Reads until `min_bytes` have come (or the stream ends), accounting for each piece as it
  // arrives, so that a slowly arriving message's progress is seen before it is complete.
  kj::Promise<size_t> ReadAtLeast(uint8_t* buffer, size_t min_bytes, size_t max_bytes,
                                  size_t done) {
    return inner_->tryRead(buffer + done, std::min<size_t>(min_bytes - done, 1), max_bytes - done)
        .then([this, buffer, min_bytes, max_bytes, done](size_t n) -> kj::Promise<size_t> {
          Account(buffer + done, n);
          if (n == 0 || done + n >= min_bytes) return done + n;
          return ReadAtLeast(buffer, min_bytes, max_bytes, done + n);
        });
  }

  // Tracks the framing of `n` bytes just read against the budget; throws DISCONNECTED (closing
  // the connection) for a message that cannot be reserved.
  void Account(const uint8_t* bytes, size_t n) {
    // Closed (its task not yet ended): what it still reads is never served, so it reserves nothing.
    if (entry_.kill.get() == nullptr) kj::throwFatalException(Disconnect("closed"));
    entry_.last_activity = absl::Now();
    std::string refusal;
    const bool ok = entry_.frames.Feed(
        bytes, n,
        [&](uint64_t declared) {
          if (declared > limits_.HardMessageWords() * 8) {
            refusal = absl::StrCat("a message of ", declared, " bytes (limit ",
                                   limits_.HardMessageWords() * 8, ")");
            return false;
          }
          if (used_ + declared > limits_.max_buffered_bytes) entry_.MakeRoom(declared);
          if (used_ + declared > limits_.max_buffered_bytes) {
            refusal = absl::StrCat("a message of ", declared, " bytes while ", used_,
                                   " bytes of messages are arriving (limit ",
                                   limits_.max_buffered_bytes, ")");
            return false;
          }
          used_ += declared;
          entry_.reserved = declared;
          entry_.message_bytes = 0;
          return true;
        },
        [&] {
          used_ -= entry_.reserved;
          entry_.reserved = 0;
          entry_.message_start = absl::InfiniteFuture();
        });
    if (!ok) {
      if (refusal.empty()) refusal = "a message table no reader accepts";
      entry_.CountClosed("message_refused");
      LogThrottled("closed_message_refused",
                   absl::StrCat("closed the connection of ", entry_.peer, ": ", refusal));
      kj::throwFatalException(Disconnect(refusal));
    }
    // A message that started in these bytes (one that also ended here needs no deadline).
    if (entry_.frames.in_message()) {
      if (entry_.message_start == absl::InfiniteFuture()) {
        entry_.message_start = entry_.last_activity;
      }
      entry_.message_bytes += n;
    }
  }

  kj::Own<kj::AsyncIoStream> inner_;
  Listener::Entry& entry_;
  uint64_t& used_;
  const ServerLimits& limits_;
  kj::Timer& timer_;
  bool backlogged_ = false;
};

}  // namespace

class Listener::ErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    LogThrottled("connection_error",
                 absl::StrCat("connection error: ", exception.getDescription().cStr()));
  }
};

Listener::Listener(kj::ConnectionReceiver& receiver, kj::TlsContext* tls, kj::Timer& timer,
                   kj::Network& network,
                   std::function<kj::Own<capnp::Capability::Server>(const Peer&)> new_service,
                   const ServerLimits& limits, ServerStats& stats)
    : receiver_(receiver),
      tls_(tls),
      timer_(timer),
      network_(network),
      new_service_(std::move(new_service)),
      limits_(limits),
      stats_(stats),
      errors_(std::make_unique<ErrorHandler>()),
      tasks_(*errors_) {}

Listener::~Listener() = default;

kj::Promise<void> Listener::Run() { return AcceptLoop().exclusiveJoin(SweepLoop()); }

kj::Promise<void> Listener::AcceptLoop() {
  return receiver_.accept().then([this](kj::Own<kj::AsyncIoStream>&& stream) {
    Admit(kj::mv(stream));
    return AcceptLoop();
  });
}

kj::Promise<void> Listener::SweepLoop() {
  return timer_.afterDelay(250 * kj::MILLISECONDS).then([this] {
    const absl::Time now = absl::Now();
    for (Entry* entry : entries_) {
      if (entry->kill.get() == nullptr) continue;
      if (now - entry->message_start > limits_.read_timeout) {
        Close(*entry, "read_timeout", "a message did not arrive whole within the read timeout");
      } else if (!entry->frames.in_message() && !entry->Busy(now) &&
                 now - entry->last_activity > limits_.idle_timeout) {
        Close(*entry, "idle", "idle");
      }
    }
    return SweepLoop();
  });
}

void Listener::Admit(kj::Own<kj::AsyncIoStream> stream) {
  int one = 1;
  stream->setsockopt(IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Peer peer = PeerOf(network_, *stream);
  const size_t open = entries_.size() + handshakes_.size();
  if (open >= limits_.max_connections ? !EvictIdlest(peer) && !EvictForFairShare(peer)
                                      : open + Headroom() >= limits_.max_connections &&
                                            HoldsTheMost(peer.group) && !EvictIdlest(peer)) {
    Refuse(kj::mv(stream), peer);
  } else if (tls_ == nullptr) {
    Serve(kj::mv(stream), std::move(peer));
  } else {
    tasks_.add(Handshake(kj::mv(stream), std::move(peer)));
  }
}

void Listener::Hold(const std::string& group) { ++held_[group]; }

void Listener::Release(const std::string& group) {
  auto it = held_.find(group);
  if (--it->second == 0) held_.erase(it);
}

uint32_t Listener::Held(const std::string& group) const {
  auto it = held_.find(group);
  return it == held_.end() ? 0 : it->second;
}

size_t Listener::Headroom() const { return std::max<size_t>(1, limits_.max_connections / 16); }

bool Listener::HoldsTheMost(const std::string& group) const {
  const uint32_t mine = Held(group);
  if (mine < 2) return false;
  for (const auto& [other, held] : held_) {
    if (held > mine) return false;
  }
  return true;
}

namespace {

// `bucket` refilled to `now` at `per_second`, up to `burst`.
template <class Bucket>
double Refilled(const Bucket& bucket, kj::TimePoint now, double burst, double per_second) {
  return std::min(burst, bucket.tokens + (now - bucket.at) / kj::NANOSECONDS * 1e-9 * per_second);
}

}  // namespace

bool Listener::TakeTakeover(const std::string& group) {
  const kj::TimePoint now = timer_.now();
  const double all_burst = std::max<double>(kTakeoverBurst, limits_.max_connections / 16);
  const double all_rate = std::max<double>(kTakeoversPerSecond, limits_.max_connections / 64.0);
  const double all = Refilled(all_takeovers_, now, all_burst, all_rate);
  auto it = takeovers_.find(group);
  if (it == takeovers_.end()) {
    // Addresses whose buckets are full again need none; past that bound, new ones take no place.
    const size_t bound = 4 * size_t{limits_.max_connections};
    if (takeovers_.size() >= bound) {
      std::erase_if(takeovers_, [&](const auto& b) {
        return Refilled(b.second, now, kTakeoverBurst, kTakeoversPerSecond) >= kTakeoverBurst;
      });
      if (takeovers_.size() >= bound) return false;
    }
    it = takeovers_.emplace(group, Bucket{kTakeoverBurst, now}).first;
  }
  const double mine = Refilled(it->second, now, kTakeoverBurst, kTakeoversPerSecond);
  if (all < 1 || mine < 1) return false;
  all_takeovers_ = Bucket{all - 1, now};
  it->second = Bucket{mine - 1, now};
  return true;
}

bool Listener::EvictIdlest(const Peer& newcomer) {
  const uint32_t mine = Held(newcomer.group);
  const absl::Time now = absl::Now();
  Entry* idlest = nullptr;
  for (Entry* entry : entries_) {
    if (entry->kill.get() == nullptr || entry->frames.in_message() || entry->Busy(now)) {
      continue;
    }
    if (entry->group != newcomer.group && Held(entry->group) < mine + 1) continue;
    if (idlest == nullptr || entry->last_activity < idlest->last_activity) idlest = entry;
  }
  if (idlest == nullptr || now - idlest->last_activity < limits_.min_idle_to_evict) {
    return false;
  }
  Close(*idlest, "limit_idle",
        absl::StrCat("the connection limit was reached and it was idle the longest (for ",
                     newcomer.address, ")"));
  return true;
}

bool Listener::EvictForFairShare(const Peer& newcomer) {
  const uint32_t mine = Held(newcomer.group);
  const std::string* most = nullptr;
  uint32_t most_held = 0;
  for (const auto& [group, held] : held_) {
    if (held > most_held) {
      most = &group;
      most_held = held;
    }
  }
  if (most == nullptr || most_held < mine + 2) return false;
  // Its oldest handshake, else its connection idle the longest and not busy (those without a
  // message arriving first), else (three more than the newcomer's) a busy one.
  Handshaking* handshake = nullptr;
  for (Handshaking* h : handshakes_) {
    if (h->group == *most && h->kill.get() != nullptr) {
      handshake = h;
      break;
    }
  }
  Entry* victim = nullptr;
  const absl::Time now = absl::Now();
  const auto order = [now](Entry* e) {
    return std::make_tuple(e->Busy(now), e->frames.in_message(), e->last_activity);
  };
  for (Entry* entry : entries_) {
    if (handshake != nullptr) break;
    if (entry->group != *most || entry->kill.get() == nullptr) continue;
    if (entry->Busy(now) && most_held < mine + 3) continue;
    if (victim == nullptr || order(entry) < order(victim)) victim = entry;
  }
  if ((handshake == nullptr && victim == nullptr) || !TakeTakeover(newcomer.group)) return false;
  const std::string why =
      absl::StrCat("the connection limit was reached and its address held ", most_held,
                   " connections (", newcomer.address, "'s ", mine, ")");
  Close(handshake != nullptr ? static_cast<Slot&>(*handshake) : *victim, "limit_fair_share", why);
  return true;
}

void Listener::MakeRoom(uint64_t bytes, const Entry& arriving) {
  const absl::Time now = absl::Now();
  struct Slow {
    Entry* entry;
    double rate;  // bytes per second since its message started
  };
  std::vector<Slow> slow;
  uint64_t freeable = 0;
  for (Entry* entry : entries_) {
    if (entry == &arriving || entry->kill.get() == nullptr || entry->reserved == 0) continue;
    const double rate = entry->message_bytes /
                        absl::ToDoubleSeconds(std::max(now - entry->message_start, kRateWindow));
    if (rate < std::min<double>(kMinArrivalBytesPerSecond, entry->reserved)) {
      slow.push_back({entry, rate});
      freeable += entry->reserved;
    }
  }
  // Nothing is closed unless enough can be.
  if (buffered_bytes_ + bytes > limits_.max_buffered_bytes + freeable) return;
  std::sort(slow.begin(), slow.end(), [](const Slow& a, const Slow& b) { return a.rate < b.rate; });
  for (const Slow& s : slow) {
    if (buffered_bytes_ + bytes <= limits_.max_buffered_bytes) break;
    // Its reservation goes now (the entry itself goes once its task ends).
    buffered_bytes_ -= s.entry->reserved;
    s.entry->reserved = 0;
    Close(*s.entry, "slow_sender",
          absl::StrFormat("room was needed for another message while its message of %d bytes "
                          "arrived at %.0f bytes/s",
                          s.entry->message_bytes, s.rate));
  }
}

void Listener::Close(Slot& slot, const char* reason, const std::string& why) {
  LogThrottled(absl::StrCat("closed_", reason),
               absl::StrCat("closed the ", slot.what, " of ", slot.peer, ": ", why));
  stats_.RecordClosedConnection(reason);
  slot.kill->fulfill();
  slot.kill = nullptr;
}

void Listener::Serve(kj::Own<kj::AsyncIoStream> stream, Peer peer) {
  auto entry = kj::heap<Entry>(*this, peer);
  auto killed = kj::newPromiseAndFulfiller<void>();
  entry->kill = kj::mv(killed.fulfiller);
  entry->stream = kj::heap<GuardedStream>(kj::mv(stream), *entry, buffered_bytes_, limits_, timer_);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = limits_.HardMessageWords();
  entry->messages = kj::heap<rpc::WipingMessageStream>(*entry->stream);
  entry->network = kj::heap<capnp::TwoPartyVatNetwork>(*entry->messages,
                                                       capnp::rpc::twoparty::Side::SERVER, options);
  entry->rpc = kj::heap(capnp::makeRpcServer(
      *entry->network,
      capnp::Capability::Client(kj::heap<CountingService>(new_service_(peer), entry->calls))));
  // Calls not yet answered, pipelined ones included (held by the RPC system while the call they
  // target is pending, unseen by the services' per-connection limits), stop the reading beyond
  // this until answers go out.
  entry->rpc->setFlowLimit(limits_.ConnectionBacklogWords());
  auto done = entry->network->onDisconnect().exclusiveJoin(kj::mv(killed.promise));
  tasks_.add(done.attach(kj::mv(entry)));
}

void Listener::Refuse(kj::Own<kj::AsyncIoStream> stream, const Peer& peer) {
  stats_.RecordRefusedConnection();
  LogThrottled("refused", absl::StrCat("refused a connection from ", peer.address, ": ",
                                       limits_.max_connections, " connections, none to spare"));
  if (refusing_ >= kMaxRefusing) return;  // closed right away: no room even to say why
  // The stream outlives the network, which outlives the RPC system.
  struct Refusal {
    Refusal(kj::Own<kj::AsyncIoStream> stream_in, uint32_t limit, capnp::ReaderOptions options)
        : stream(kj::mv(stream_in)),
          messages(*stream),
          network(messages, capnp::rpc::twoparty::Side::SERVER, options),
          rpc(capnp::makeRpcServer(network,
                                   capnp::Capability::Client(kj::heap<RefusingService>(limit)))) {}
    kj::Own<kj::AsyncIoStream> stream;
    rpc::WipingMessageStream messages;  // a refused client's first call may carry keys
    capnp::TwoPartyVatNetwork network;
    capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  };
  // A refused client's messages are bounded far below a served one's (and capnp's 64 MiB default):
  // the refusal answers a client's first call, `hello`; a larger one only closes the connection.
  // So the refusals hold at most kMaxRefusing x 64 KiB of messages, outside max_buffered_bytes.
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kRefusalMessageWords;
  // Over TLS the refusal is said after a handshake (the grace doubled, at most the handshake
  // timeout more), so that the client reads why instead of a failed handshake; kMaxRefusing
  // bounds these handshakes too.
  ++refusing_;
  auto counted = kj::defer([this] { --refusing_; });
  absl::Duration grace = kRefusalGrace;
  kj::Promise<kj::Own<kj::AsyncIoStream>> ready = nullptr;
  if (tls_ == nullptr) {
    ready = kj::mv(stream);
  } else {
    ready = tls_->wrapServer(kj::mv(stream));
    grace += std::min(kRefusalGrace, limits_.tls_handshake_timeout);
  }
  auto refused = ready.then(
      [limit = limits_.max_connections, options](kj::Own<kj::AsyncIoStream>&& ready_stream) {
        auto refusal = kj::heap<Refusal>(kj::mv(ready_stream), limit, options);
        return refusal->network.onDisconnect().attach(kj::mv(refusal));
      });
  auto timeout = timer_.afterDelay(absl::ToInt64Nanoseconds(grace) * kj::NANOSECONDS);
  tasks_.add(refused.exclusiveJoin(kj::mv(timeout))
                 .catch_([](kj::Exception&&) {})  // a failed handshake: nothing to tell
                 .attach(kj::mv(counted)));
}

// The TLS handshake of one accepted stream, within tls_handshake_timeout. A failure (a plaintext
// client, an untrusting one, a silent one) closes only that stream, and is logged.
kj::Promise<void> Listener::Handshake(kj::Own<kj::AsyncIoStream> stream, Peer peer) {
  auto killed = kj::newPromiseAndFulfiller<void>();
  auto record = kj::heap<Handshaking>(*this, peer, kj::mv(killed.fulfiller));
  Handshaking& handshake = *record;
  const absl::Duration limit = limits_.tls_handshake_timeout;
  auto timeout = timer_.afterDelay(absl::ToInt64Nanoseconds(limit) * kj::NANOSECONDS)
                     .then([limit]() -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
                       return Disconnect(absl::StrCat("no complete handshake within ",
                                                      absl::FormatDuration(limit)));
                     });
  auto evicted = killed.promise.then([]() -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
    return Disconnect("ended for another address's connection (connection limit)");
  });
  return tls_->wrapServer(kj::mv(stream))
      .exclusiveJoin(kj::mv(timeout))
      .exclusiveJoin(kj::mv(evicted))
      .then([this, peer](kj::Own<kj::AsyncIoStream>&& secure) { Serve(kj::mv(secure), peer); },
            [this, &handshake, address = peer.address](kj::Exception&& e) {
              if (handshake.kill.get() == nullptr) return;  // closed by Listener::Close
              stats_.RecordClosedConnection("handshake_failed");
              LogThrottled("handshake", absl::StrCat("TLS handshake with ", address,
                                                     " failed (connection closed): ",
                                                     e.getDescription().cStr()));
            })
      .attach(kj::mv(record));
}

}  // namespace veil::server
