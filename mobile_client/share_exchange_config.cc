// The dpf2 client core's side of the servers' configurations: connecting (every replica read and
// checked), the table version both servers serve, and moving to a newer one (share_exchange.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dpf/params.h"
#include "mobile_client/row_tag_use.h"
#include "mobile_client/share_exchange.h"

namespace veil::client {

// What one server said in its `config` reply.
struct ShareExchange::ServerConfig {
  int party = -1;
  TableInfo table;  // the newest version and the shape
  // Every version served (epoch, digest, digest_hex set), oldest first; the newest is `table`'s.
  std::vector<TableInfo> versions;
  uint64_t max_message_bytes = 0;
  uint64_t max_queued_keys = 0;  // per connection (0 from servers that do not say)
  std::vector<uint8_t> prgs;
  std::vector<uint8_t> outputs;
  bool digests_whole = true;  // every version's digest had its 32 bytes
};

namespace {

using ServerConfig = ShareExchange::ServerConfig;

// Sets t's version (epoch and digest) to `id`'s; false (the digest left zero) if the digest is
// not of its size.
bool SetVersion(rpc::TableId::Reader id, TableInfo& t) {
  capnp::Data::Reader digest = id.getDigest();
  t.digest = {};
  const bool whole = digest.size() == t.digest.size();
  if (whole) std::memcpy(t.digest.data(), digest.begin(), digest.size());
  t.digest_hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.begin()), digest.size()));
  t.epoch = id.getEpoch();
  return whole;
}

void CopyVersion(const TableInfo& from, TableInfo& to) {
  to.epoch = from.epoch;
  to.digest = from.digest;
  to.digest_hex = from.digest_hex;
}

bool SameVersion(const TableInfo& a, const TableInfo& b) {
  return a.epoch == b.epoch && a.digest == b.digest;
}

ServerConfig ParseConfig(rpc::Config::Reader config) {
  ServerConfig c;
  c.party = config.getParty();
  TableInfo& t = c.table;
  c.digests_whole = SetVersion(config.getTable(), t);
  for (rpc::TableId::Reader id : config.getEpochs()) {
    c.versions.emplace_back();
    c.digests_whole = SetVersion(id, c.versions.back()) && c.digests_whole;
  }
  // Servers from before rolling updates serve one version and do not list it.
  if (c.versions.empty()) c.versions.push_back(t);
  t.rows = config.getRows();
  t.row_tag = static_cast<embedding::RowTag>(config.getRowTag());
  // What lookups return is the data; the tag words travel in the shares and are checked here.
  t.row_words =
      config.getRowWords() - std::min(config.getRowWords(), embedding::TagWords(t.row_tag));
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

// What a session's keys and decoding depend on; the same across a table's versions.
bool SameShape(const TableInfo& a, const TableInfo& b) {
  return a.rows == b.rows && a.row_words == b.row_words && a.row_tag == b.row_tag &&
         a.dim == b.dim && a.format == b.format && a.frac_bits == b.frac_bits;
}

// Whether `config` serves `version` (epoch and digest).
bool Serves(const ServerConfig& config, const TableInfo& version) {
  return std::any_of(config.versions.begin(), config.versions.end(),
                     [&](const TableInfo& v) { return SameVersion(v, version); });
}

// "1, 2": the epochs `config` serves.
std::string Epochs(const ServerConfig& config) {
  std::string out;
  for (const TableInfo& v : config.versions)
    absl::StrAppend(&out, out.empty() ? "" : ", ", v.epoch);
  return out;
}

}  // namespace

ShareExchange::ShareExchange(ClientOptions options, std::unique_ptr<Transport> transport)
    : options_(std::move(options)),
      latch_(options_.failure_latch_file),
      transport_(std::move(transport)) {}

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
  absl::StatusOr<std::optional<embedding::RowKey>> row_key =
      ReadOptionalRowKey(options.row_key_file);
  if (!row_key.ok()) return row_key.status();
  auto transport = Transport::Create(std::move(t));
  if (!transport.ok()) return transport.status();
  std::unique_ptr<ShareExchange> exchange(new ShareExchange(options, *std::move(transport)));
  exchange->row_key_ = *row_key;
  Transport& connections = *exchange->transport_;
  for (int s = 0; s < 2; ++s) exchange->replica_configs_[s].resize(connections.replicas(s));
  auto read_config = [e = exchange.get()](int s, int replica, rpc::VeilServer::Client server) {
    return e->ReadConfig(s, replica, std::move(server));
  };
  connections.SetReconnectCheck(read_config);
  if (absl::Status connected = connections.Connect({true, true}, read_config); !connected.ok()) {
    return connected;
  }
  absl::MutexLock lock(&exchange->call_mu_);
  auto configs = exchange->ConfigsAtConnect();
  if (!configs.ok()) return configs.status();
  if (absl::Status s = exchange->Adopt(*configs); !s.ok()) return s;
  exchange->adopted_ = true;
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
        // A replica (re)connected after Connect: it must serve the session's table version.
        const TableInfo session = table();
        const TableInfo& t = config.table;
        if (!SameShape(t, session) || !Serves(config, session)) {
          return absl::FailedPreconditionError(absl::StrCat(
              transport_->ReplicaName(s, replica), " came back serving another table (digest ",
              t.digest_hex, " epoch ", t.epoch, ", serving epochs ", Epochs(config),
              ") than this session's (digest ", session.digest_hex, " epoch ", session.epoch,
              "); connect a new client once both servers serve the same table"));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<ShareExchange::ServerConfig>> ShareExchange::ConfigsAtConnect() const {
  // Each server's configuration is its first replica's that answered, keeping only the versions
  // every answering replica serves; the replicas must all have one shape and a version in common.
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
      std::vector<TableInfo> shared;
      for (const TableInfo& v : configs[s].versions) {
        if (Serves(*c, v)) shared.push_back(v);
      }
      if (!SameShape(c->table, configs[s].table) || shared.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            transport_->ReplicaName(s, r), " serves another table (digest ", c->table.digest_hex,
            " epoch ", c->table.epoch, ", serving epochs ", Epochs(*c),
            ") than its fellow replica ", transport_->ReplicaName(s, first), " (digest ",
            configs[s].table.digest_hex, " epoch ", configs[s].table.epoch, ", serving epochs ",
            Epochs(configs[s]),
            "); replicas of one server must serve the same table: refusing it"));
      }
      configs[s].versions = std::move(shared);
    }
  }
  return configs;
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
  if (!c.digests_whole) {
    return absl::FailedPreconditionError(absl::StrCat(
        transport_->ReplicaName(s, replica), " names a table version by a digest that is not ",
        TableInfo{}.digest.size(), " bytes"));
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

absl::Status ShareExchange::Adopt(const std::vector<ServerConfig>& configs) {
  // The newest version both serve (their versions all have their config's shape).
  const TableInfo* common = nullptr;
  if (SameShape(configs[0].table, configs[1].table)) {
    for (const TableInfo& v : configs[0].versions) {
      if (Serves(configs[1], v) && (common == nullptr || v.epoch > common->epoch)) common = &v;
    }
  }
  if (common == nullptr) {
    const TableInfo& a = configs[0].table;
    const TableInfo& b = configs[1].table;
    return absl::FailedPreconditionError(
        absl::StrCat("the two servers serve different tables: ", transport_->Name(0),
                     " has digest ", a.digest_hex, " epoch ", a.epoch, " (serving epochs ",
                     Epochs(configs[0]), "), ", transport_->Name(1), " has digest ", b.digest_hex,
                     " epoch ", b.epoch, " (serving epochs ", Epochs(configs[1]),
                     "), and no version in common (or of the "
                     "same shape); refusing to combine their answers"));
  }
  if (common->epoch < options_.min_epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("the newest table version both servers serve is epoch ", common->epoch,
                     ", older than the oldest this client accepts (min_epoch ", options_.min_epoch,
                     "): refusing it (", transport_->Name(0), " serves epochs ", Epochs(configs[0]),
                     ", ", transport_->Name(1), " serves epochs ", Epochs(configs[1]), ")"));
  }
  if (table_.rows != 0 && common->epoch < table_.epoch) {
    // Row tags do not bind the version: servers could else hold a session on a stale table.
    return absl::FailedPreconditionError(absl::StrCat(
        "the servers now serve epoch ", common->epoch, " at the newest, older than this session's ",
        table_.epoch, ": refusing to go back to an older table version (a new client accepts it)"));
  }
  TableInfo t = configs[0].table;
  CopyVersion(*common, t);
  if (t.rows == 0 || t.row_words == 0 || !embedding::IsKnownRowFormat(t.format) ||
      !embedding::IsKnownRowTag(static_cast<uint8_t>(t.row_tag)) ||
      embedding::RowWords(t.format, t.dim) != t.row_words) {
    return absl::FailedPreconditionError(
        absl::StrCat("the servers describe an unusable table (", t.rows, " rows, ", t.row_words,
                     " words, ", embedding::RowFormatName(t.format), " dim ", t.dim, ")"));
  }
  if (table_.rows != 0 && !SameShape(t, table_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the servers now serve a table of another shape (epoch ", t.epoch, ": ",
                     t.rows, " rows, dim ", t.dim, ") than this session's (", table_.rows,
                     " rows, dim ", table_.dim, "); connect a new client"));
  }
  t.backend[1] = configs[1].table.backend[1];
  t.range_queries = configs[0].table.range_queries && configs[1].table.range_queries;
  t.max_keys_per_call =
      std::min(configs[0].table.max_keys_per_call, configs[1].table.max_keys_per_call);
  if (t.max_keys_per_call == 0) {
    return absl::FailedPreconditionError("a server accepts no keys per call");
  }
  if (absl::Status s =
          CheckRowTagUse(t.row_tag, row_key_.has_value(), options_.min_epoch, "the servers'");
      !s.ok()) {
    return s;
  }
  uint64_t max_queued_keys = 0;
  for (const ServerConfig& c : configs) {
    if (c.max_queued_keys != 0) {
      max_queued_keys =
          max_queued_keys == 0 ? c.max_queued_keys : std::min(max_queued_keys, c.max_queued_keys);
    }
  }
  {
    absl::MutexLock lock(&table_mu_);
    table_ = std::move(t);
  }
  share_words_ = table_.row_words + embedding::TagWords(table_.row_tag);
  max_message_bytes_ = std::min(configs[0].max_message_bytes, configs[1].max_message_bytes);
  max_queued_keys_ = max_queued_keys;
  for (int s = 0; s < 2; ++s) newest_epoch_[s] = configs[s].table.epoch;
  newer_version_ = false;
  return absl::OkStatus();
}

absl::Status ShareExchange::MoveToNewestVersion(bool& moved, absl::Time deadline) {
  moved = false;
  // Each server's configuration, from the replica its calls go to now.
  std::vector<ServerConfig> configs(2);
  absl::Status read = transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(2, false);
        auto replies = kj::heapArrayBuilder<kj::Promise<absl::Status>>(2);
        for (int s = 0; s < 2; ++s) {
          auto read_config = [this, s, &configs](rpc::VeilServer::Client server, int replica) {
            return server.castAs<rpc::PirServer>().configRequest().send().then(
                [this, s, replica, &configs](capnp::Response<rpc::PirServer::ConfigResults> r) {
                  configs[s] = ParseConfig(r.getConfig());
                  return CheckServer(s, replica, configs[s]);
                });
          };
          replies.add(transport_->Call(s, std::move(read_config))
                          .then([done, s](absl::Status status) {
                            (*done)[s] = true;
                            return status;
                          })
                          .eagerlyEvaluate(nullptr));
        }
        auto all = kj::joinPromises(replies.finish()).then([](kj::Array<absl::Status> results) {
          for (absl::Status& r : results) {
            if (!r.ok()) return r;
          }
          return absl::OkStatus();
        });
        return transport_->WithTimeout(kj::mv(all), done, deadline);
      },
      "config");
  if (!read.ok()) return read;
  const TableInfo before = table();
  if (absl::Status s = Adopt(configs); !s.ok()) return s;
  moved = !SameVersion(before, table_);
  return absl::OkStatus();
}

}  // namespace veil::client
