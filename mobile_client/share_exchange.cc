#include "mobile_client/share_exchange.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dpf/key.h"
#include "rpc/stats_wire.h"

namespace veil::client {

// What one server said in its `config` reply.
struct ShareExchange::ServerConfig {
  int party = -1;
  TableInfo table;
  uint64_t max_message_bytes = 0;
  uint64_t max_queued_keys = 0;  // per connection (0 from servers that do not say)
  std::vector<uint8_t> prgs;
  std::vector<uint8_t> outputs;
};

// One RPC per server: the keys (serialized) for each server, and the bag sizes of answerPooled
// (empty for answer). Each reply has `reply_words` words. The serialized keys are secrets
// (together they reveal the rows) and are wiped when the call is done.
// TODO(security): the copies in Cap'n Proto's outgoing message buffers are freed unwiped.
struct ShareExchange::PreparedCall {
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

namespace {

using PreparedCall = ShareExchange::PreparedCall;
using ServerConfig = ShareExchange::ServerConfig;

ServerConfig ParseConfig(rpc::Config::Reader config) {
  ServerConfig c;
  c.party = config.getParty();
  TableInfo& t = c.table;
  capnp::Data::Reader digest = config.getTable().getDigest();
  if (digest.size() == t.digest.size()) std::memcpy(t.digest.data(), digest.begin(), digest.size());
  t.digest_hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.begin()), digest.size()));
  t.epoch = config.getTable().getEpoch();
  t.rows = config.getRows();
  t.row_tag = static_cast<embedding::RowTag>(config.getRowTag());
  // What lookups return is the data; the tag words travel in the shares and are checked here.
  t.row_words = config.getRowWords() - std::min(config.getRowWords(), embedding::TagWords(t.row_tag));
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

bool SameTable(const TableInfo& a, const TableInfo& b) {
  return a.digest == b.digest && a.epoch == b.epoch && a.rows == b.rows &&
         a.row_words == b.row_words && a.row_tag == b.row_tag && a.dim == b.dim &&
         a.format == b.format &&
         a.frac_bits == b.frac_bits;
}

// Bytes of one key in a call's Cap'n Proto message: the key padded to words, its list pointer,
// and its range (two words) when the call has ranges.
size_t MessageBytesPerKey(size_t key_bytes, bool ranges) {
  return (key_bytes + 7) / 8 * 8 + 8 + (ranges ? 16 : 0);
}

// Splits `queries` (one pair per wanted row or bag member) into calls that fit the servers'
// limits: at most max_keys keys per call, never splitting a bag.
absl::StatusOr<std::vector<PreparedCall>> SplitIntoCalls(std::vector<pir::QueryKeys>& queries,
                                                         absl::Span<const uint32_t> bag_sizes,
                                                         absl::Span<const RowRange> ranges,
                                                         uint32_t row_words, size_t max_keys) {
  std::vector<PreparedCall> calls;
  size_t added = 0;
  auto add_key = [&](pir::QueryKeys& q) {
    for (int s = 0; s < 2; ++s) calls.back().keys[s].push_back(q.key[s].Serialize());
    if (!ranges.empty()) calls.back().ranges.push_back(ranges[added]);
    ++added;
  };
  if (bag_sizes.empty()) {
    for (size_t i = 0; i < queries.size(); ++i) {
      if (i % max_keys == 0) calls.emplace_back();
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
    if (calls.empty() || calls.back().keys[0].size() + bag_sizes[b] > max_keys) calls.emplace_back();
    for (uint32_t k = 0; k < bag_sizes[b]; ++k) add_key(queries[next++]);
    calls.back().bag_sizes.push_back(bag_sizes[b]);
    calls.back().reply_words += row_words;
  }
  return calls;
}

// Fills the parameters of an answer or answerPooled request with server s's part of `call`.
template <typename Request>
void FillRequest(Request& request, const PreparedCall& call, int s) {
  auto keys = request.initKeys(call.keys[s].size());
  for (size_t k = 0; k < call.keys[s].size(); ++k) {
    keys.set(k, capnp::Data::Reader(call.keys[s][k].data(), call.keys[s][k].size()));
  }
  if (!call.ranges.empty()) {
    auto list = request.initRanges(call.ranges.size());
    for (size_t i = 0; i < call.ranges.size(); ++i) {
      list[i].setFirstRow(call.ranges[i].first_row);
      list[i].setRows(call.ranges[i].rows);
    }
  }
}

}  // namespace

ShareExchange::ShareExchange(ClientOptions options, std::unique_ptr<Transport> transport)
    : options_(std::move(options)), transport_(std::move(transport)) {}

ShareExchange::~ShareExchange() = default;

absl::StatusOr<std::unique_ptr<ShareExchange>> ShareExchange::Connect(
    const ClientOptions& options) {
  TransportOptions t;
  t.addresses = {options.server0, options.server1};
  t.tls_names = {options.tls_server_name0, options.tls_server_name1};
  t.tls_trusted_certs = options.tls_trusted_certs;
  t.allow_plaintext = options.allow_plaintext;
  t.timeout = options.timeout;
  t.protocol = "dpf2";
  std::optional<embedding::RowKey> row_key;
  if (!options.row_key_file.empty()) {
    auto key = embedding::ReadRowKeyFile(options.row_key_file);
    if (!key.ok()) return key.status();
    row_key = *key;
  }
  auto transport = Transport::Create(std::move(t));
  if (!transport.ok()) return transport.status();
  std::unique_ptr<ShareExchange> exchange(new ShareExchange(options, *std::move(transport)));
  exchange->row_key_ = row_key;
  Transport& t_ref = *exchange->transport_;
  for (int s = 0; s < 2; ++s) exchange->replica_configs_[s].resize(t_ref.replicas(s));
  auto read_config = [e = exchange.get()](int s, int replica, rpc::VeilServer::Client server) {
    return e->ReadConfig(s, replica, std::move(server));
  };
  t_ref.SetReconnectCheck(read_config);
  if (absl::Status connected = t_ref.Connect({true, true}, read_config); !connected.ok()) {
    return connected;
  }
  if (absl::Status s = exchange->Adopt(); !s.ok()) return s;
  return exchange;
}

kj::Promise<absl::Status> ShareExchange::ReadConfig(int s, int replica,
                                                    rpc::VeilServer::Client server) {
  return server.castAs<rpc::PirServer>().configRequest().send().then(
      [this, s, replica](capnp::Response<rpc::PirServer::ConfigResults> reply) {
        ServerConfig config = ParseConfig(reply.getConfig());
        if (absl::Status ok = CheckServer(s, replica, config); !ok.ok()) return ok;
        if (!adopted_) {
          replica_configs_[s][replica] = std::move(config);
          return absl::OkStatus();
        }
        // A replica (re)connected after Connect: it must serve the session's table.
        const TableInfo& t = config.table;
        if (!SameTable(t, table_)) {
          return absl::FailedPreconditionError(absl::StrCat(
              transport_->ReplicaName(s, replica), " came back serving another table (digest ",
              t.digest_hex, " epoch ", t.epoch, ") than this session's (digest ", table_.digest_hex,
              " epoch ", table_.epoch,
              "); connect a new client once both servers serve the same table"));
        }
        return absl::OkStatus();
      });
}

std::string ShareExchange::ServerPair() const {
  return absl::StrCat("servers ", transport_->Name(0).substr(7), " and ",
                      transport_->Name(1).substr(7));
}

absl::Status ShareExchange::CheckServer(int s, int replica, const ServerConfig& c) const {
  if (c.party != s) {
    return absl::FailedPreconditionError(absl::StrCat(transport_->ReplicaName(s, replica),
                                                      " is party ", c.party, ", expected party ", s,
                                                      " (are the addresses swapped?)"));
  }
  if (!Contains(c.prgs, static_cast<uint8_t>(options_.prg)) ||
      !Contains(c.outputs, static_cast<uint8_t>(options_.output)) ||
      !Contains(c.outputs, static_cast<uint8_t>(dpf::OutputType::kAdditive))) {
    return absl::FailedPreconditionError(
        absl::StrCat(transport_->ReplicaName(s, replica), " does not evaluate PRG ",
                     std::string(dpf::PrgName(options_.prg)), " with these key types"));
  }
  return absl::OkStatus();
}

absl::Status ShareExchange::Adopt() {
  // Each server's configuration is its first replica's that answered; the others must match it.
  std::vector<ServerConfig> configs(2);
  for (int s = 0; s < 2; ++s) {
    int first = -1;
    for (int r = 0; r < transport_->replicas(s); ++r) {
      const std::optional<ServerConfig>& c = replica_configs_[s][r];
      if (!c) continue;
      if (first < 0) {
        first = r;
        configs[s] = *c;
        continue;
      }
      if (!SameTable(c->table, configs[s].table)) {
        return absl::FailedPreconditionError(absl::StrCat(
            transport_->ReplicaName(s, r), " serves another table (digest ", c->table.digest_hex,
            " epoch ", c->table.epoch, ") than its fellow replica ",
            transport_->ReplicaName(s, first), " (digest ", configs[s].table.digest_hex, " epoch ",
            configs[s].table.epoch,
            "); replicas of one server must serve the same table: refusing it"));
      }
    }
  }
  const TableInfo& a = configs[0].table;
  const TableInfo& b = configs[1].table;
  if (a.digest != b.digest || a.epoch != b.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the two servers serve different tables: ", transport_->Name(0), " has digest ",
        a.digest_hex, " epoch ", a.epoch, ", ", transport_->Name(1), " has digest ", b.digest_hex,
        " epoch ", b.epoch, "; refusing to combine their answers"));
  }
  if (!SameTable(a, b)) {
    return absl::FailedPreconditionError(
        "the two servers report the same digest but different table shapes");
  }
  if (a.rows == 0 || a.row_words == 0 || !embedding::IsKnownRowFormat(a.format) ||
      !embedding::IsKnownRowTag(static_cast<uint8_t>(a.row_tag)) ||
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
  if (table_.row_tag != embedding::RowTag::kNone && !row_key_) {
    return absl::FailedPreconditionError(
        "the servers' table carries row authentication tags, but this client has no row key to "
        "check them with: set row_key_file to the table's key file (veil table build writes "
        "TABLE.rowkey)");
  }
  adopted_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> ShareExchange::Exchange(
    std::vector<pir::QueryKeys>& queries, absl::Span<const uint32_t> bag_sizes,
    absl::Span<const RowRange> ranges, dpf::OutputType output, uint32_t lookups,
    const char* what) {
  // Keys over a range are no larger than whole-table keys.
  dpf::DpfParameters params;
  params.log_domain = dpf::LogDomainForRows(table_.rows);
  params.prg = options_.prg;
  params.output = output;
  const size_t per_key = MessageBytesPerKey(dpf::DpfKey::SerializedSize(params), !ranges.empty());
  const size_t max_keys = std::max<size_t>(
      1, std::min<size_t>(table_.max_keys_per_call, (max_message_bytes_ - 512) / per_key));
  auto calls = SplitIntoCalls(queries, bag_sizes, ranges, share_words(), max_keys);
  if (!calls.ok()) return calls.status();

  absl::MutexLock lock(&call_mu_);
  std::vector<uint32_t> shares[2];
  CallStats stats;
  if (absl::Status s = RunCalls(*calls, shares, stats, what); !s.ok()) return s;
  std::vector<uint32_t> out(shares[0].size());
  if (absl::Status s = pir::Reconstruct(output, shares[0], shares[1], absl::MakeSpan(out));
      !s.ok()) {
    return s;
  }
  stats.lookups = lookups;
  last_call_ = stats;
  total_lookups_ += stats.lookups;
  total_keys_ += stats.keys;
  total_calls_ += stats.calls;
  total_failovers_ += stats.failovers;
  total_hedges_ += stats.hedges;
  return out;
}

absl::Status ShareExchange::RunCalls(std::vector<PreparedCall>& calls,
                                     std::vector<uint32_t> (&shares)[2], CallStats& stats,
                                     const char* what) {
  size_t total_words = 0;
  for (const PreparedCall& c : calls) total_words += c.reply_words;
  shares[0].assign(total_words, 0);
  shares[1].assign(total_words, 0);
  const uint64_t up_before = transport_->bytes_up(), down_before = transport_->bytes_down();
  const uint64_t failovers_before = transport_->failovers(), hedges_before = transport_->hedges();
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
                                   shares, deadline, what);
    if (!status.ok()) return status;
    first = last;
    first_offset += wave_words;
  }
  stats.latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  stats.bytes_up = transport_->bytes_up() - up_before;
  stats.bytes_down = transport_->bytes_down() - down_before;
  stats.calls = static_cast<uint32_t>(calls.size());
  stats.failovers = static_cast<uint32_t>(transport_->failovers() - failovers_before);
  stats.hedges = static_cast<uint32_t>(transport_->hedges() - hedges_before);
  for (const PreparedCall& c : calls) stats.keys += static_cast<uint32_t>(c.keys[0].size());
  return absl::OkStatus();
}

absl::Status ShareExchange::CheckReply(int s, int replica, rpc::TableId::Reader id, size_t words,
                                       size_t expected) const {
  capnp::Data::Reader digest = id.getDigest();
  if (id.getEpoch() != table_.epoch || digest.size() != table_.digest.size() ||
      std::memcmp(digest.begin(), table_.digest.data(), digest.size()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(transport_->ReplicaName(s, replica), " answered from another table (epoch ",
                     id.getEpoch(), ") than the one both servers reported at connect (epoch ",
                     table_.epoch, "); reconnect to use the new table"));
  }
  if (words != expected) {
    return absl::InternalError(absl::StrCat(transport_->ReplicaName(s, replica), " returned ",
                                            words, " share words, expected ", expected));
  }
  return absl::OkStatus();
}

absl::Status ShareExchange::SendWave(absl::Span<PreparedCall> calls, size_t first_offset,
                                     std::vector<uint32_t> (&shares)[2], absl::Time deadline,
                                     const char* what) {
  return transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(2, false);
        auto remaining = std::make_shared<std::array<size_t, 2>>();
        (*remaining)[0] = (*remaining)[1] = calls.size();
        auto statuses = kj::heapArrayBuilder<kj::Promise<absl::Status>>(2 * calls.size());
        size_t offset = first_offset;
        for (PreparedCall& call : calls) {
          for (int s = 0; s < 2; ++s) {
            // The same keys may go to several replicas (failover, hedging); the first good reply
            // fills the shares, later ones are dropped.
            auto filled = std::make_shared<bool>(false);
            auto send = [this, s, &call, offset, &shares, filled](
                            rpc::VeilServer::Client cap, int replica) -> kj::Promise<absl::Status> {
              auto on_reply = [this, s, replica, offset, words = call.reply_words, &shares,
                               filled](auto reply) -> absl::Status {
                auto list = reply.getShares();
                if (absl::Status ok = CheckReply(s, replica, reply.getTable(), list.size(), words);
                    !ok.ok()) {
                  return ok;
                }
                if (*filled) return absl::OkStatus();
                *filled = true;
                uint32_t* out = shares[s].data() + offset;
                for (size_t i = 0; i < words; ++i) out[i] = list[i];
                return absl::OkStatus();
              };
              auto server = cap.castAs<rpc::PirServer>();
              if (call.bag_sizes.empty()) {
                auto request = server.answerRequest();
                FillRequest(request, call, s);
                return request.send().then(std::move(on_reply));
              }
              auto request = server.answerPooledRequest();
              FillRequest(request, call, s);
              auto bags = request.initBagSizes(call.bag_sizes.size());
              for (size_t b = 0; b < call.bag_sizes.size(); ++b) bags.set(b, call.bag_sizes[b]);
              return request.send().then(std::move(on_reply));
            };
            statuses.add(transport_->Call(s, std::move(send))
                             .then([s, done, remaining](absl::Status status) {
                               if (status.ok() && --(*remaining)[s] == 0) (*done)[s] = true;
                               return status;
                             })
                             .eagerlyEvaluate(nullptr));
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
        return transport_->WithTimeout(kj::mv(all), done, deadline).then([](absl::Status s) {
          return kj::evalLast([s = std::move(s)]() mutable { return std::move(s); });
        });
      },
      what);
}

absl::StatusOr<rpc::StatsSnapshot> ShareExchange::Stats(int party) {
  if (party != 0 && party != 1) return absl::InvalidArgumentError("party must be 0 or 1");
  absl::MutexLock lock(&call_mu_);
  rpc::StatsSnapshot info;
  absl::Status status = transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(2, true);
        (*done)[party] = false;
        auto reply = transport_->Call(party, [&info](rpc::VeilServer::Client cap, int) {
          return cap.statsRequest().send().then(
              [&info](capnp::Response<rpc::VeilServer::StatsResults> r) {
                info = rpc::ReadStats(r.getStats());
                return absl::OkStatus();
              });
        });
        return transport_->WithTimeout(kj::mv(reply), done);
      },
      "stats");
  if (!status.ok()) return status;
  return info;
}
CallStats ShareExchange::last_call() const {
  absl::MutexLock lock(&call_mu_);
  return last_call_;
}

CallStats ShareExchange::totals() const {
  CallStats t;
  t.bytes_up = transport_->bytes_up();
  t.bytes_down = transport_->bytes_down();
  t.lookups = total_lookups_.load();
  t.keys = total_keys_.load();
  t.calls = total_calls_.load();
  t.failovers = total_failovers_.load();
  t.hedges = total_hedges_.load();
  return t;
}

}  // namespace veil::client
