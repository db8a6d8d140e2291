#include "mobile_client/client.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dpf/key.h"
#include "pir/two_server/query.h"
#include "server/rpc_status.h"
#include "server/tls.h"
#include "server/veil.capnp.h"

namespace veil {
namespace {

// Counts the bytes that cross one connection's socket, RPC framing included (CallStats).
class CountingStream final : public kj::AsyncIoStream {
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

// What one server said in its `config` reply.
struct ServerConfig {
  uint16_t protocol_version = 0;
  int party = -1;
  TableInfo table;
  uint64_t max_message_bytes = 0;
  uint64_t max_queued_keys = 0;  // per connection (0 from servers that do not say)
  std::vector<uint8_t> prgs;
  std::vector<uint8_t> outputs;
};

ServerConfig ReadConfig(rpc::Config::Reader config) {
  ServerConfig c;
  c.protocol_version = config.getProtocolVersion();
  c.party = config.getParty();
  TableInfo& t = c.table;
  capnp::Data::Reader digest = config.getTable().getDigest();
  if (digest.size() == t.digest.size()) std::memcpy(t.digest.data(), digest.begin(), digest.size());
  t.digest_hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.begin()), digest.size()));
  t.epoch = config.getTable().getEpoch();
  t.rows = config.getRows();
  t.row_words = config.getRowWords();
  t.dim = config.getDim();
  t.format = static_cast<embedding::RowFormat>(config.getRowFormat());
  t.frac_bits = config.getFracBits();
  t.max_keys_per_call = config.getLimits().getMaxKeysPerCall();
  c.max_message_bytes = config.getLimits().getMaxMessageBytes();
  c.max_queued_keys = config.getLimits().getMaxQueuedKeysPerConnection();
  for (uint8_t p : config.getPrgs()) c.prgs.push_back(p);
  for (uint8_t o : config.getOutputTypes()) c.outputs.push_back(o);
  t.backend[c.party == 1 ? 1 : 0] = config.getBackend();
  t.range_queries = config.getRangeQueries();
  return c;
}

bool Contains(const std::vector<uint8_t>& ids, uint8_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// One RPC per server: the keys (serialized) for each server, and the bag sizes of answerPooled
// (empty for answer). Each reply has `reply_words` words. The serialized keys are secrets
// (together they reveal the rows) and are wiped when the call is done.
// TODO(security): the copies in Cap'n Proto's outgoing message buffers are freed unwiped.
struct PreparedCall {
  PreparedCall() = default;
  PreparedCall(PreparedCall&&) = default;
  PreparedCall& operator=(PreparedCall&&) = default;
  ~PreparedCall() {
    for (auto& side : keys) {
      for (auto& key : side) sodium_memzero(key.data(), key.size());
    }
  }

  std::vector<std::vector<uint8_t>> keys[2];
  std::vector<uint32_t> bag_sizes;
  std::vector<RowRange> ranges;  // one per key, or empty: the whole table
  size_t reply_words = 0;
};

// Fills a call's `ranges` parameter (left absent for whole-table calls).
template <typename Request>
void SetRanges(Request& request, const std::vector<RowRange>& ranges) {
  if (ranges.empty()) return;
  auto list = request.initRanges(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    list[i].setFirstRow(ranges[i].first_row);
    list[i].setRows(ranges[i].rows);
  }
}

size_t RoundUp8(size_t n) { return (n + 7) / 8 * 8; }

// Whether an exception arose on this side (a broken connection, bytes that are no RPC message)
// rather than being a server's error reply, which arrives as a remote exception.
bool IsLocalFailure(const kj::Exception& e) {
  return !absl::StartsWith(e.getDescription().cStr(), "remote exception: ");
}

}  // namespace

class Client::Impl {
 public:
  // `tls`: null for plaintext.
  Impl(ClientOptions options, std::unique_ptr<kj::TlsContext> tls)
      : options_(std::move(options)), tls_(std::move(tls)) {
    addresses_[0] = options_.server0;
    addresses_[1] = options_.server1;
    tls_names_[0] = options_.tls_server_name0.empty() ? server::HostOf(addresses_[0])
                                                      : options_.tls_server_name0;
    tls_names_[1] = options_.tls_server_name1.empty() ? server::HostOf(addresses_[1])
                                                      : options_.tls_server_name1;
    io_thread_ = std::thread([this] { RunLoop(); });
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](const kj::Executor** e) { return *e != nullptr; }, &executor_));
  }

  ~Impl() {
    executor_->executeSync([this] {
      absl::MutexLock lock(&streams_mu_);
      for (Connection& c : connections_) c.Close();
      stop_->fulfill();
    });
    io_thread_.join();
  }

  absl::Status Connect();
  // Before a call: reconnects to servers whose connection was lost, accepting them only if they
  // still serve the session's table. Returns the connection error, or FAILED_PRECONDITION if a
  // server came back with another table.
  absl::Status Reconnect();
  absl::Status RunCalls(std::vector<PreparedCall>& calls, std::vector<uint32_t> (&shares)[2],
                        CallStats& stats);
  // Sends `calls` to both servers at once; their replies fill `shares` from word first_offset.
  absl::Status SendWave(absl::Span<PreparedCall> calls, size_t first_offset,
                        std::vector<uint32_t> (&shares)[2], absl::Time deadline);
  absl::StatusOr<ServerStatsInfo> Stats(int party);
  // Splits the queries into calls that fit a message (bags kept whole), sends them to both
  // servers, adds the shares and records the call's statistics (`lookups` rows or bags).
  // `ranges`: one row range per query, or empty for whole-table keys.
  absl::StatusOr<std::vector<uint32_t>> Exchange(std::vector<pir::QueryKeys>& queries,
                                                 absl::Span<const uint32_t> bag_sizes,
                                                 absl::Span<const RowRange> ranges,
                                                 dpf::OutputType output, uint32_t lookups,
                                                 const char* what);

  const ClientOptions& options() const { return options_; }
  const TableInfo& table() const { return table_; }
  size_t key_bytes(dpf::OutputType output) const {
    dpf::DpfParameters params;
    params.log_domain = dpf::LogDomainForRows(table_.rows);
    params.prg = options_.prg;
    params.output = output;
    return dpf::DpfKey::SerializedSize(params);
  }
  uint64_t max_message_bytes() const { return max_message_bytes_; }

  absl::Mutex call_mu;  // serializes the public calls
  CallStats last_call;
  CallStats totals() const {
    CallStats t;
    absl::MutexLock lock(&streams_mu_);
    t.bytes_up = retired_up_;
    t.bytes_down = retired_down_;
    for (const Connection& c : connections_) {
      if (c.socket != nullptr) {
        t.bytes_up += c.socket->bytes_written();
        t.bytes_down += c.socket->bytes_read();
      }
    }
    t.lookups = total_lookups_.load();
    t.keys = total_keys_.load();
    t.calls = total_calls_.load();
    return t;
  }
  void CountLookups(const CallStats& s) {
    total_lookups_ += s.lookups;
    total_keys_ += s.keys;
    total_calls_ += s.calls;
  }

 private:
  struct Connection {
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
    rpc::PirServer::Client cap{nullptr};
  };

  // How far a connection got, for the messages of its failures.
  enum class ConnectStage { kConnecting, kHandshake, kConfig };

  void RunLoop() {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    auto stop = kj::newPromiseAndFulfiller<void>();
    io_ = &io;
    stop_ = kj::mv(stop.fulfiller);
    {
      absl::MutexLock lock(&mu_);
      executor_ = &kj::getCurrentThreadExecutor();
    }
    stop.promise.wait(io.waitScope);
  }

  std::string Name(int s) const { return absl::StrCat("server ", s, " (", addresses_[s], ")"); }

  // The status of a failed request to server s, worded for the reader. A lost connection is
  // marked, so that the next call reconnects.
  absl::Status ServerError(int s, const kj::Exception& e) {
    if (e.getType() == kj::Exception::Type::DISCONNECTED) {
      lost_[s] = true;
      return server::ExceptionToStatus(e, absl::StrCat(Name(s), " is unreachable"));
    }
    return server::ExceptionToStatus(e, Name(s));
  }

  // Caller thread: (re)connects to the servers marked in `which` and reads their configurations.
  absl::Status ConnectServers(std::array<bool, 2> which, ServerConfig (&configs)[2]);
  // One server's configuration on its own: protocol version, party, PRG and key types.
  absl::Status CheckServer(int s, const ServerConfig& config) const;

  // The status of a failed connection to server s that got as far as `stage`.
  absl::Status ConnectError(int s, ConnectStage stage, const kj::Exception& e);
  // The status of a failed TLS handshake with server s.
  absl::Status HandshakeError(int s, const kj::Exception& e) const;
  // Refuses plaintext to a server off this machine unless allow_plaintext (FAILED_PRECONDITION).
  absl::Status CheckPlaintextAllowed(int s, kj::AsyncIoStream& stream) const;

  // Waits for `promise` until `deadline` (by default the client's timeout from now); `done` marks
  // the servers that answered, `stages` (if given) how far the others got.
  kj::Promise<absl::Status> WithTimeout(
      kj::Promise<absl::Status> promise, std::shared_ptr<std::array<bool, 2>> done,
      absl::Time deadline = absl::InfiniteFuture(),
      std::shared_ptr<std::array<ConnectStage, 2>> stages = nullptr) {
    if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + options_.timeout;
    const int64_t left_ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(deadline - absl::Now()));
    auto timeout =
        io_->provider->getTimer().afterDelay(left_ns * kj::NANOSECONDS).then([=, this]() {
          std::string who;
          for (int s = 0; s < 2; ++s) {
            if ((*done)[s]) continue;
            absl::StrAppend(&who, who.empty() ? "" : " and ", Name(s));
            if (stages != nullptr && (*stages)[s] == ConnectStage::kHandshake) {
              absl::StrAppend(&who, " (TLS handshake unfinished)");
            }
          }
          return absl::DeadlineExceededError(
              absl::StrCat("no answer from ", who.empty() ? "the servers" : who, " within ",
                           absl::FormatDuration(options_.timeout)));
        });
    return promise.exclusiveJoin(kj::mv(timeout));
  }

  ClientOptions options_;
  std::unique_ptr<kj::TlsContext> tls_;  // null: plaintext
  std::string addresses_[2];
  std::string tls_names_[2];  // the names the servers' certificates must hold
  std::thread io_thread_;
  absl::Mutex mu_;
  const kj::Executor* executor_ = nullptr;  // set under mu_ once, before the constructor returns
  // I/O thread only:
  kj::AsyncIoContext* io_ = nullptr;
  kj::Own<kj::PromiseFulfiller<void>> stop_;
  Connection connections_[2];
  std::atomic<bool> lost_[2] = {false, false};
  // Guards replacing a connection's stream against totals() on other threads.
  mutable absl::Mutex streams_mu_;
  // Bytes of replaced connections, so that totals() never goes back.
  uint64_t retired_up_ ABSL_GUARDED_BY(streams_mu_) = 0;
  uint64_t retired_down_ ABSL_GUARDED_BY(streams_mu_) = 0;

  TableInfo table_;
  uint64_t max_message_bytes_ = 0;
  uint64_t max_queued_keys_ = 0;  // per connection, the smaller of the two; 0: no limit
  std::atomic<uint64_t> total_lookups_{0}, total_keys_{0}, total_calls_{0};
};

absl::Status Client::Impl::ConnectServers(std::array<bool, 2> which, ServerConfig (&configs)[2]) {
  return executor_->executeSync([&]() -> kj::Promise<absl::Status> {
    auto done = std::make_shared<std::array<bool, 2>>();
    auto stages = std::make_shared<std::array<ConnectStage, 2>>();
    auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(2);
    for (int s = 0; s < 2; ++s) {
      if (!which[s]) {
        (*done)[s] = true;
        statuses.add(absl::OkStatus());
        continue;
      }
      (*stages)[s] = ConnectStage::kConnecting;
      statuses.add(
          io_->provider->getNetwork()
              .parseAddress(addresses_[s])
              .then([](kj::Own<kj::NetworkAddress> address) {
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
                    return server::StatusToException(allowed);
                  }
                  return std::make_pair(counted, kj::Own<kj::AsyncIoStream>(kj::mv(socket)));
                }
                (*stages)[s] = ConnectStage::kHandshake;
                return tls_->wrapClient(kj::mv(socket), tls_names_[s])
                    .then([counted](kj::Own<kj::AsyncIoStream> secure) {
                      return std::make_pair(counted, kj::mv(secure));
                    });
              })
              .then(
                  [this, s, stages](std::pair<CountingStream*, kj::Own<kj::AsyncIoStream>> opened) {
                    (*stages)[s] = ConnectStage::kConfig;
                    Connection& c = connections_[s];
                    absl::MutexLock lock(&streams_mu_);
                    if (c.socket != nullptr) {
                      retired_up_ += c.socket->bytes_written();
                      retired_down_ += c.socket->bytes_read();
                    }
                    c.Close();
                    c.socket = opened.first;
                    c.stream = kj::mv(opened.second);
                    c.rpc = kj::heap<capnp::TwoPartyClient>(*c.stream);
                    c.cap = c.rpc->bootstrap().castAs<rpc::PirServer>();
                    return c.cap.configRequest().send();
                  })
              .then(
                  [&configs, done, s](capnp::Response<rpc::PirServer::ConfigResults> reply) {
                    configs[s] = ReadConfig(reply.getConfig());
                    (*done)[s] = true;
                    return absl::OkStatus();
                  },
                  [this, s, stages](kj::Exception&& e) { return ConnectError(s, (*stages)[s], e); })
              // Now, not when the join completes: `done` must name the servers that answered.
              .eagerlyEvaluate(nullptr));
    }
    auto all = kj::joinPromises(statuses.finish()).then([](kj::Array<absl::Status> results) {
      for (absl::Status& r : results) {
        if (!r.ok()) return r;
      }
      return absl::OkStatus();
    });
    return WithTimeout(kj::mv(all), done, absl::InfiniteFuture(), stages);
  });
}

absl::Status Client::Impl::CheckPlaintextAllowed(int s, kj::AsyncIoStream& stream) const {
  if (options_.allow_plaintext) return absl::OkStatus();
  sockaddr_storage peer;
  uint length = sizeof(peer);
  stream.getpeername(reinterpret_cast<sockaddr*>(&peer), &length);
  if (server::IsLoopback(reinterpret_cast<const sockaddr*>(&peer), length)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to send queries in plaintext to ", addresses_[s],
      ", which is not a loopback address: ", server::kPlaintextRisk,
      ". Set tls_trusted_certs (the servers' certificate or their CA), or allow_plaintext if "
      "this network is protected otherwise"));
}

absl::Status Client::Impl::HandshakeError(int s, const kj::Exception& e) const {
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

absl::Status Client::Impl::ConnectError(int s, ConnectStage stage, const kj::Exception& e) {
  switch (stage) {
    case ConnectStage::kConnecting:
      break;
    case ConnectStage::kHandshake:
      return HandshakeError(s, e);
    case ConnectStage::kConfig:
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

absl::Status Client::Impl::CheckServer(int s, const ServerConfig& c) const {
  if (c.protocol_version != rpc::PROTOCOL_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(s), " speaks protocol version ", c.protocol_version,
                     "; this client speaks version ", rpc::PROTOCOL_VERSION));
  }
  if (c.party != s) {
    return absl::FailedPreconditionError(absl::StrCat(
        Name(s), " is party ", c.party, ", expected party ", s, " (are the addresses swapped?)"));
  }
  if (!Contains(c.prgs, static_cast<uint8_t>(options_.prg)) ||
      !Contains(c.outputs, static_cast<uint8_t>(options_.output)) ||
      !Contains(c.outputs, static_cast<uint8_t>(dpf::OutputType::kAdditive))) {
    return absl::FailedPreconditionError(absl::StrCat(Name(s), " does not evaluate PRG ",
                                                      std::string(dpf::PrgName(options_.prg)),
                                                      " with these key types"));
  }
  return absl::OkStatus();
}

absl::Status Client::Impl::Connect() {
  for (int s = 0; s < 2; ++s) {
    if (addresses_[s].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no address for server ", s));
    }
  }
  ServerConfig configs[2];
  if (absl::Status s = ConnectServers({true, true}, configs); !s.ok()) return s;
  for (int s = 0; s < 2; ++s) {
    if (absl::Status status = CheckServer(s, configs[s]); !status.ok()) return status;
  }
  const TableInfo& a = configs[0].table;
  const TableInfo& b = configs[1].table;
  if (a.digest != b.digest || a.epoch != b.epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("the two servers serve different tables: ", Name(0), " has digest ",
                     a.digest_hex, " epoch ", a.epoch, ", ", Name(1), " has digest ", b.digest_hex,
                     " epoch ", b.epoch, "; refusing to combine their answers"));
  }
  if (a.rows != b.rows || a.row_words != b.row_words || a.dim != b.dim || a.format != b.format ||
      a.frac_bits != b.frac_bits) {
    return absl::FailedPreconditionError(
        "the two servers report the same digest but different table shapes");
  }
  if (a.rows == 0 || a.row_words == 0 || !embedding::IsKnownRowFormat(a.format) ||
      embedding::RowWords(a.format, a.dim) != a.row_words) {
    return absl::FailedPreconditionError(
        absl::StrCat("the servers describe an unusable table (", a.rows, " rows, ", a.row_words,
                     " words, ", embedding::RowFormatName(a.format), " dim ", a.dim, ")"));
  }
  table_ = a;
  table_.backend[1] = b.backend[1];
  table_.range_queries = a.range_queries && b.range_queries;
  table_.max_keys_per_call = std::min(a.max_keys_per_call, b.max_keys_per_call);
  max_message_bytes_ = std::min(configs[0].max_message_bytes, configs[1].max_message_bytes);
  for (const ServerConfig& c : configs) {
    if (c.max_queued_keys != 0) {
      max_queued_keys_ =
          max_queued_keys_ == 0 ? c.max_queued_keys : std::min(max_queued_keys_, c.max_queued_keys);
    }
  }
  if (table_.max_keys_per_call == 0) {
    return absl::FailedPreconditionError("a server accepts no keys per call");
  }
  return absl::OkStatus();
}

absl::Status Client::Impl::Reconnect() {
  std::array<bool, 2> which = {lost_[0].load(), lost_[1].load()};
  if (!which[0] && !which[1]) return absl::OkStatus();
  ServerConfig configs[2];
  if (absl::Status s = ConnectServers(which, configs); !s.ok()) return s;
  for (int s = 0; s < 2; ++s) {
    if (!which[s]) continue;
    if (absl::Status status = CheckServer(s, configs[s]); !status.ok()) return status;
    const TableInfo& t = configs[s].table;
    if (t.digest != table_.digest || t.epoch != table_.epoch || t.rows != table_.rows ||
        t.row_words != table_.row_words || t.dim != table_.dim || t.format != table_.format ||
        t.frac_bits != table_.frac_bits) {
      return absl::FailedPreconditionError(absl::StrCat(
          Name(s), " came back serving another table (digest ", t.digest_hex, " epoch ", t.epoch,
          ") than this session's (digest ", table_.digest_hex, " epoch ", table_.epoch,
          "); connect a new client once both servers serve the same table"));
    }
    lost_[s] = false;
  }
  return absl::OkStatus();
}

absl::Status Client::Impl::RunCalls(std::vector<PreparedCall>& calls,
                                    std::vector<uint32_t> (&shares)[2], CallStats& stats) {
  if (absl::Status s = Reconnect(); !s.ok()) return s;
  size_t total_words = 0;
  for (const PreparedCall& c : calls) total_words += c.reply_words;
  shares[0].assign(total_words, 0);
  shares[1].assign(total_words, 0);
  const uint64_t up_before = totals().bytes_up, down_before = totals().bytes_down;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.timeout;

  // Calls go out in waves that each fit the servers' per-connection queue, all within one deadline.
  size_t first = 0, first_offset = 0;
  while (first < calls.size()) {
    size_t last = first, wave_keys = 0, wave_words = 0;
    while (last < calls.size() && (last == first || max_queued_keys_ == 0 ||
                                   wave_keys + calls[last].keys[0].size() <= max_queued_keys_)) {
      wave_keys += calls[last].keys[0].size();
      wave_words += calls[last].reply_words;
      ++last;
    }
    absl::Status status = SendWave(absl::MakeSpan(calls.data() + first, last - first), first_offset,
                                   shares, deadline);
    if (!status.ok()) return status;
    first = last;
    first_offset += wave_words;
  }
  stats.latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  CallStats after = totals();
  stats.bytes_up = after.bytes_up - up_before;
  stats.bytes_down = after.bytes_down - down_before;
  stats.calls = static_cast<uint32_t>(calls.size());
  for (const PreparedCall& c : calls) stats.keys += static_cast<uint32_t>(c.keys[0].size());
  return absl::OkStatus();
}

absl::Status Client::Impl::SendWave(absl::Span<PreparedCall> calls, size_t first_offset,
                                    std::vector<uint32_t> (&shares)[2], absl::Time deadline) {
  return executor_->executeSync([&]() -> kj::Promise<absl::Status> {
    auto done = std::make_shared<std::array<bool, 2>>();
    auto remaining = std::make_shared<std::array<size_t, 2>>();
    (*remaining)[0] = (*remaining)[1] = calls.size();
    auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(2 * calls.size());
    size_t offset = first_offset;
    for (PreparedCall& call : calls) {
      for (int s = 0; s < 2; ++s) {
        auto on_reply = [this, s, offset, words = call.reply_words, &shares, done,
                         remaining](auto reply) -> absl::Status {
          rpc::TableId::Reader id = reply.getTable();
          capnp::Data::Reader digest = id.getDigest();
          if (id.getEpoch() != table_.epoch || digest.size() != table_.digest.size() ||
              std::memcmp(digest.begin(), table_.digest.data(), digest.size()) != 0) {
            return absl::FailedPreconditionError(
                absl::StrCat(Name(s), " answered from another table (epoch ", id.getEpoch(),
                             ") than the one both servers reported at connect (epoch ",
                             table_.epoch, "); reconnect to use the new table"));
          }
          auto list = reply.getShares();
          if (list.size() != words) {
            return absl::InternalError(
                absl::StrCat(Name(s), " returned ", list.size(), " share words, expected ", words));
          }
          uint32_t* out = shares[s].data() + offset;
          for (size_t i = 0; i < words; ++i) out[i] = list[i];
          if (--(*remaining)[s] == 0) (*done)[s] = true;
          return absl::OkStatus();
        };
        auto on_error = [this, s](kj::Exception&& e) { return ServerError(s, e); };
        rpc::PirServer::Client& cap = connections_[s].cap;
        if (call.bag_sizes.empty()) {
          auto request = cap.answerRequest();
          auto keys = request.initKeys(call.keys[s].size());
          for (size_t k = 0; k < call.keys[s].size(); ++k) {
            keys.set(k, capnp::Data::Reader(call.keys[s][k].data(), call.keys[s][k].size()));
          }
          SetRanges(request, call.ranges);
          statuses.add(
              request.send()
                  .then(
                      [on_reply](capnp::Response<rpc::PirServer::AnswerResults> r) mutable {
                        return on_reply(kj::mv(r));
                      },
                      std::move(on_error))
                  .eagerlyEvaluate(nullptr));
        } else {
          auto request = cap.answerPooledRequest();
          auto keys = request.initKeys(call.keys[s].size());
          for (size_t k = 0; k < call.keys[s].size(); ++k) {
            keys.set(k, capnp::Data::Reader(call.keys[s][k].data(), call.keys[s][k].size()));
          }
          auto bags = request.initBagSizes(call.bag_sizes.size());
          for (size_t b = 0; b < call.bag_sizes.size(); ++b) bags.set(b, call.bag_sizes[b]);
          SetRanges(request, call.ranges);
          statuses.add(
              request.send()
                  .then(
                      [on_reply](capnp::Response<rpc::PirServer::AnswerPooledResults> r) mutable {
                        return on_reply(kj::mv(r));
                      },
                      std::move(on_error))
                  .eagerlyEvaluate(nullptr));
        }
      }
      offset += call.reply_words;
    }
    auto all = kj::joinPromises(statuses.finish()).then([](kj::Array<absl::Status> results) {
      for (absl::Status& r : results) {
        if (!r.ok()) return r;
      }
      return absl::OkStatus();
    });
    // evalLast: the replies' Finish messages are written in a later turn; count them here.
    return WithTimeout(kj::mv(all), done, deadline).then([](absl::Status s) {
      return kj::evalLast([s = std::move(s)]() mutable { return std::move(s); });
    });
  });
}

absl::StatusOr<ServerStatsInfo> Client::Impl::Stats(int party) {
  if (party != 0 && party != 1) return absl::InvalidArgumentError("party must be 0 or 1");
  if (absl::Status s = Reconnect(); !s.ok()) return s;
  ServerStatsInfo info;
  absl::Status status = executor_->executeSync([&]() -> kj::Promise<absl::Status> {
    auto done = std::make_shared<std::array<bool, 2>>();
    (*done)[1 - party] = true;
    auto reply = connections_[party].cap.statsRequest().send().then(
        [&info, done, party](capnp::Response<rpc::PirServer::StatsResults> r) {
          rpc::Stats::Reader s = r.getStats();
          info.calls = s.getCalls();
          info.keys = s.getKeys();
          info.passes = s.getPasses();
          info.mean_batch_keys = s.getMeanBatchKeys();
          info.max_batch_keys = s.getMaxBatchKeys();
          info.latency_p50_ms = s.getLatencyP50Ms();
          info.latency_p90_ms = s.getLatencyP90Ms();
          info.latency_p99_ms = s.getLatencyP99Ms();
          info.queued_keys = s.getQueuedKeys();
          info.errors = s.getErrors();
          info.connections = s.getConnections();
          info.uptime_s = s.getUptimeS();
          (*done)[party] = true;
          return absl::OkStatus();
        },
        [this, party](kj::Exception&& e) { return ServerError(party, e); });
    return WithTimeout(kj::mv(reply), done);
  });
  if (!status.ok()) return status;
  return info;
}

// ---- Client ----------------------------------------------------------------------------------

namespace {

// Splits `keys` (one pair per wanted row or bag member) into calls that fit the servers' limits:
// at most max_keys keys and max_message_bytes bytes per call, never splitting a bag.
absl::StatusOr<std::vector<PreparedCall>> SplitIntoCalls(std::vector<pir::QueryKeys>& queries,
                                                         absl::Span<const uint32_t> bag_sizes,
                                                         absl::Span<const RowRange> ranges,
                                                         uint32_t row_words, size_t max_keys) {
  std::vector<PreparedCall> calls;
  auto start_call = [&] { calls.emplace_back(); };
  size_t added = 0;
  auto add_key = [&](pir::QueryKeys& q) {
    for (int s = 0; s < 2; ++s) calls.back().keys[s].push_back(q.key[s].Serialize());
    if (!ranges.empty()) calls.back().ranges.push_back(ranges[added]);
    ++added;
  };
  if (bag_sizes.empty()) {
    for (size_t i = 0; i < queries.size(); ++i) {
      if (i % max_keys == 0) start_call();
      add_key(queries[i]);
      calls.back().reply_words += row_words;
    }
    return calls;
  }
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (bag_sizes[b] > max_keys) {
      return absl::InvalidArgumentError(absl::StrCat("bag ", b, " holds ", bag_sizes[b],
                                                     " keys; the servers accept at most ", max_keys,
                                                     " per call"));
    }
    if (calls.empty() || calls.back().keys[0].size() + bag_sizes[b] > max_keys) start_call();
    for (uint32_t k = 0; k < bag_sizes[b]; ++k) add_key(queries[next++]);
    calls.back().bag_sizes.push_back(bag_sizes[b]);
    calls.back().reply_words += row_words;
  }
  return calls;
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive");
  }
  std::unique_ptr<kj::TlsContext> tls;
  if (!options.tls_trusted_certs.empty()) {
    auto context = server::MakeClientTlsContext(options.tls_trusted_certs);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  } else if (!options.tls_server_name0.empty() || !options.tls_server_name1.empty()) {
    return absl::InvalidArgumentError(
        "tls_server_name0 / tls_server_name1 need tls_trusted_certs (TLS is off without it)");
  }
  auto impl = std::make_unique<Impl>(options, std::move(tls));
  try {
    if (absl::Status s = impl->Connect(); !s.ok()) return s;
  } catch (const kj::Exception& e) {
    return server::ExceptionToStatus(e, "connect");
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const TableInfo& Client::table() const { return impl_->table(); }

absl::StatusOr<std::vector<uint32_t>> Client::Impl::Exchange(
    std::vector<pir::QueryKeys>& queries, absl::Span<const uint32_t> bag_sizes,
    absl::Span<const RowRange> ranges, dpf::OutputType output, uint32_t lookups,
    const char* what) {
  // Keys over a range are no larger than whole-table keys; a range adds two words.
  const size_t per_key = RoundUp8(key_bytes(output)) + 8 + (ranges.empty() ? 0 : 16);
  const size_t max_keys = std::max<size_t>(
      1, std::min<size_t>(table_.max_keys_per_call, (max_message_bytes() - 512) / per_key));
  auto calls = SplitIntoCalls(queries, bag_sizes, ranges, table_.row_words, max_keys);
  if (!calls.ok()) return calls.status();

  absl::MutexLock lock(&call_mu);
  std::vector<uint32_t> shares[2];
  CallStats stats;
  try {
    if (absl::Status s = RunCalls(*calls, shares, stats); !s.ok()) return s;
  } catch (const kj::Exception& e) {
    return server::ExceptionToStatus(e, what);
  }
  std::vector<uint32_t> out(shares[0].size());
  if (absl::Status s = pir::Reconstruct(output, shares[0], shares[1], absl::MakeSpan(out));
      !s.ok()) {
    return s;
  }
  stats.lookups = lookups;
  last_call = stats;
  CountLookups(stats);
  return out;
}

absl::StatusOr<std::vector<uint32_t>> Client::LookupWords(absl::Span<const uint64_t> indices) {
  const TableInfo& t = impl_->table();
  if (indices.empty()) return absl::InvalidArgumentError("no rows requested");
  std::vector<pir::QueryKeys> queries;
  queries.reserve(indices.size());
  for (uint64_t index : indices) {
    if (index >= t.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", index, " is outside the table (", t.rows, " rows)"));
    }
    auto q = pir::MakeQuery(t.rows, index, 1, impl_->options().prg, impl_->options().output);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  return impl_->Exchange(queries, {}, {}, impl_->options().output,
                         static_cast<uint32_t>(indices.size()), "lookup");
}

absl::StatusOr<std::vector<uint32_t>> Client::LookupWordsInRanges(
    absl::Span<const uint64_t> indices, absl::Span<const RowRange> ranges) {
  const TableInfo& t = impl_->table();
  if (indices.empty()) return absl::InvalidArgumentError("no rows requested");
  if (ranges.size() != indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ranges.size(), " row ranges for ", indices.size(), " indices"));
  }
  if (!t.range_queries) {
    return absl::FailedPreconditionError(
        "the servers do not answer range queries (an older server version); use Lookup");
  }
  std::vector<pir::QueryKeys> queries;
  queries.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const RowRange& r = ranges[i];
    if (r.rows == 0 || r.first_row >= t.rows || r.rows > t.rows - r.first_row) {
      return absl::InvalidArgumentError(absl::StrCat("range ", i, " (rows [", r.first_row, ", ",
                                                     r.first_row, " + ", r.rows,
                                                     ")) is empty or outside the table (", t.rows,
                                                     " rows)"));
    }
    if (indices[i] >= r.rows) {
      return absl::InvalidArgumentError(absl::StrCat("index ", indices[i], " is outside range ", i,
                                                     " (", r.rows, " rows)"));
    }
    auto q = pir::MakeQuery(r.rows, indices[i], 1, impl_->options().prg, impl_->options().output);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  return impl_->Exchange(queries, {}, ranges, impl_->options().output,
                         static_cast<uint32_t>(indices.size()), "range lookup");
}

namespace {
// Dequantizes `count` fetched rows.
absl::StatusOr<std::vector<float>> DecodeRows(const TableInfo& t,
                                              const std::vector<uint32_t>& words, size_t count) {
  std::vector<float> values(count * t.dim);
  for (size_t i = 0; i < count; ++i) {
    absl::Status s =
        embedding::DecodeRow(t.format, t.frac_bits, t.dim,
                             absl::MakeConstSpan(words.data() + i * t.row_words, t.row_words),
                             absl::MakeSpan(values.data() + i * t.dim, t.dim));
    if (!s.ok()) return s;
  }
  return values;
}
}  // namespace

absl::StatusOr<std::vector<float>> Client::LookupInRanges(absl::Span<const uint64_t> indices,
                                                          absl::Span<const RowRange> ranges) {
  auto words = LookupWordsInRanges(indices, ranges);
  if (!words.ok()) return words.status();
  return DecodeRows(impl_->table(), *words, indices.size());
}

absl::StatusOr<std::vector<float>> Client::Lookup(absl::Span<const uint64_t> indices) {
  auto words = LookupWords(indices);
  if (!words.ok()) return words.status();
  return DecodeRows(impl_->table(), *words, indices.size());
}

absl::StatusOr<std::vector<uint32_t>> Client::LookupPooledWords(
    absl::Span<const uint64_t> indices, absl::Span<const uint32_t> bag_sizes,
    absl::Span<const int32_t> weights) {
  const TableInfo& t = impl_->table();
  if (t.format != embedding::RowFormat::kFixed32) {
    return absl::FailedPreconditionError(
        absl::StrCat("pooled lookups need a fixed-point table; this one is ",
                     embedding::RowFormatName(t.format), " (build it with --format=fixed)"));
  }
  if (bag_sizes.empty()) return absl::InvalidArgumentError("no bags requested");
  uint64_t total = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (bag_sizes[b] == 0) return absl::InvalidArgumentError(absl::StrCat("bag ", b, " is empty"));
    total += bag_sizes[b];
  }
  if (total != indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("bag sizes add up to ", total, " but ",
                                                   indices.size(), " indices were given"));
  }
  if (!weights.empty() && weights.size() != indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights.size(), " weights for ", indices.size(), " indices"));
  }
  for (uint64_t index : indices) {
    if (index >= t.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", index, " is outside the table (", t.rows, " rows)"));
    }
  }
  const uint32_t pad = impl_->options().pad_bags_to;
  std::vector<pir::QueryKeys> queries;
  std::vector<uint32_t> sent_bag_sizes;
  absl::BitGen gen;
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (pad != 0 && bag_sizes[b] > pad) {
      return absl::InvalidArgumentError(absl::StrCat("bag ", b, " holds ", bag_sizes[b],
                                                     " rows, more than pad_bags_to (", pad, ")"));
    }
    for (uint32_t k = 0; k < std::max(bag_sizes[b], pad); ++k) {
      // Padding keys select a random row with weight 0: they add nothing to the sum.
      const bool real = k < bag_sizes[b];
      uint64_t index = real ? indices[next + k] : absl::Uniform<uint64_t>(gen, 0, t.rows);
      uint32_t weight = !real             ? 0u
                        : weights.empty() ? 1u
                                          : static_cast<uint32_t>(weights[next + k]);
      auto q =
          pir::MakeQuery(t.rows, index, weight, impl_->options().prg, dpf::OutputType::kAdditive);
      if (!q.ok()) return q.status();
      queries.push_back(*std::move(q));
    }
    sent_bag_sizes.push_back(std::max(bag_sizes[b], pad));
    next += bag_sizes[b];
  }
  return impl_->Exchange(queries, sent_bag_sizes, {}, dpf::OutputType::kAdditive,
                         static_cast<uint32_t>(bag_sizes.size()), "pooled lookup");
}

absl::StatusOr<std::vector<float>> Client::LookupPooled(absl::Span<const uint64_t> indices,
                                                        absl::Span<const uint32_t> bag_sizes,
                                                        absl::Span<const int32_t> weights,
                                                        PoolingMode mode) {
  auto sums = LookupPooledWords(indices, bag_sizes, weights);
  if (!sums.ok()) return sums.status();
  const TableInfo& t = impl_->table();
  std::vector<float> values(bag_sizes.size() * t.dim);
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    double divisor = 1;
    if (mode == PoolingMode::kMean) {
      divisor = 0;
      for (uint32_t k = 0; k < bag_sizes[b]; ++k) {
        divisor += weights.empty() ? 1.0 : static_cast<double>(weights[next + k]);
      }
      if (divisor == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bag ", b, " has weight sum 0: its mean is undefined"));
      }
    }
    next += bag_sizes[b];
    absl::Status s = embedding::DecodePooledFixed(
        t.frac_bits, absl::MakeConstSpan(sums->data() + b * t.row_words, t.row_words), divisor,
        absl::MakeSpan(values.data() + b * t.dim, t.dim));
    if (!s.ok()) return s;
  }
  return values;
}

absl::StatusOr<ServerStatsInfo> Client::ServerStats(int party) {
  absl::MutexLock lock(&impl_->call_mu);
  try {
    return impl_->Stats(party);
  } catch (const kj::Exception& e) {
    return server::ExceptionToStatus(e, "stats");
  }
}

CallStats Client::last_call() const {
  absl::MutexLock lock(&impl_->call_mu);
  return impl_->last_call;
}

CallStats Client::totals() const { return impl_->totals(); }

}  // namespace veil
