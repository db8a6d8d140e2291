#include "mobile_client/lwe_client.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "mobile_client/key_uploads.h"
#include "mobile_client/replicas.h"
#include "mobile_client/row_tag_use.h"
#include "mobile_client/transport.h"
#include "pir/lattice/client.h"
#include "pir/lattice/double_pack.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/pack_double.h"
#include "pir/lattice/pack_simple.h"
#include "rpc/status.h"

namespace veil::client {

// Queries and answers travel as little-endian words, copied as they are.
static_assert(std::endian::native == std::endian::little);

// What the server said in its `config` reply, as received (Adopt checks it).
struct LweClient::ServerConfig {
  LweTableInfo table;
  uint32_t row_words_with_tags = 0;
  uint8_t lwe_protocol = 0;
  uint32_t lwe_dimension = 0;
  uint32_t log_modulus = 0;
  uint32_t plaintext_modulus = 0;
  uint32_t sigma_micro = 0;
  std::vector<uint8_t> seed;
  std::vector<uint8_t> hint_digest;
  uint64_t hint_chunk_bytes = 0;
  uint64_t query_words = 0;
  uint64_t answer_words = 0;
  uint32_t max_queries_per_call = 0;
  uint32_t max_queued_queries = 0;  // per connection
  uint64_t max_message_bytes = 0;
  // lwe-exppack-s: the ring and the sizes it gives.
  uint32_t log_n = 0;
  std::vector<uint64_t> primes;
  uint64_t special_prime = 0;
  uint64_t expansion_key_bytes = 0;
  uint64_t secret_ciphertext_bytes = 0;
  uint64_t response_bytes = 0;
  uint64_t max_chunk_bytes = 0;
  uint64_t selection_bytes = 0;  // lwe-hybrid
  uint32_t ciphertexts_per_query = 0;
};

namespace {

using ServerConfig = LweClient::ServerConfig;

// Room for a call's Cap'n Proto envelope beside its queries (as the server counts it).
constexpr uint64_t kEnvelopeBytes = 1024;
// Hint chunks smaller than this (unless the hint is) are refused: a server sending the hint a few
// bytes a call would hold a client for hours (GetHint also bounds the whole download).
constexpr uint64_t kMinHintChunkBytes = uint64_t{64} << 10;
// Calls in flight at once (the server bounds calls per connection, 64 by default).
constexpr size_t kMaxCallsInFlight = 32;
constexpr char kExpPack[] = "lwe-exppack-s";
constexpr char kHybrid[] = "lwe-hybrid";
constexpr char kExpPackD[] = "lwe-exppack-d";
constexpr char kDoublePack[] = "lwe-double-pack";

// The packed protocols (LwePackServer).
bool IsPacked(const std::string& name) {
  return name == kExpPack || name == kHybrid || name == kExpPackD || name == kDoublePack;
}

// The LWE protocol underneath a protocol name: lwe-exppack-s and lwe-hybrid pack SimplePIR
// answers, lwe-exppack-d DoublePIR's.
absl::StatusOr<lattice::Protocol> LweProtocolOf(const std::string& name) {
  if (name == kExpPackD) return lattice::Protocol::kDoublePir;
  if (IsPacked(name)) return lattice::Protocol::kSimplePir;
  if (name.rfind("lwe-", 0) == 0) {
    if (auto protocol = lattice::ParseProtocol(name); protocol.ok()) return protocol;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown LWE protocol \"", name,
                   "\"; use lwe-simple, lwe-double, lwe-exppack-s, lwe-exppack-d, lwe-hybrid or "
                   "lwe-double-pack"));
}

std::string Hex(absl::Span<const uint8_t> bytes) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::vector<uint8_t> Bytes(capnp::Data::Reader data) {
  return std::vector<uint8_t>(data.begin(), data.end());
}

ServerConfig ParseConfig(rpc::LweConfig::Reader c, const std::string& protocol) {
  ServerConfig config;
  LweTableInfo& t = config.table;
  capnp::Data::Reader digest = c.getTable().getDigest();
  if (digest.size() == t.digest.size()) std::memcpy(t.digest.data(), digest.begin(), digest.size());
  t.digest_hex = Hex(absl::MakeConstSpan(digest.begin(), digest.size()));
  t.epoch = c.getTable().getEpoch();
  t.rows = c.getRows();
  t.row_tag = static_cast<embedding::RowTag>(c.getRowTag());
  config.row_words_with_tags = c.getRowWords();
  t.row_words = c.getRowWords() - std::min(c.getRowWords(), embedding::TagWords(t.row_tag));
  t.dim = c.getDim();
  t.format = static_cast<embedding::RowFormat>(c.getRowFormat());
  t.frac_bits = c.getFracBits();
  t.protocol = protocol;
  t.backend = c.getBackend();
  t.records_per_column = c.getRecordsPerColumn();
  t.d0 = c.getD0();
  t.d1 = c.getD1();
  t.hint_bytes = c.getHintBytes();
  config.lwe_protocol = c.getLweProtocol();
  config.lwe_dimension = c.getLweDimension();
  config.log_modulus = c.getLogModulus();
  config.plaintext_modulus = c.getPlaintextModulus();
  config.sigma_micro = c.getSigmaMicro();
  config.seed = Bytes(c.getSeed());
  config.hint_digest = Bytes(c.getHintDigest());
  t.hint_digest_hex = Hex(config.hint_digest);
  config.hint_chunk_bytes = c.getHintChunkBytes();
  config.query_words = c.getQueryWords();
  config.answer_words = c.getAnswerWords();
  config.max_queries_per_call = c.getLimits().getMaxQueriesPerCall();
  config.max_queued_queries = c.getLimits().getMaxQueuedQueriesPerConnection();
  config.max_message_bytes = c.getLimits().getMaxMessageBytes();
  return config;
}

// Loop thread: the server's `config` into `config`.
kj::Promise<absl::Status> ReadConfig(rpc::VeilServer::Client server, const std::string& protocol,
                                     ServerConfig& config) {
  if (IsPacked(protocol)) {
    return server.castAs<rpc::LwePackServer>().configRequest().send().then(
        [&config, protocol](capnp::Response<rpc::LwePackServer::ConfigResults> reply) {
          rpc::LwePackConfig::Reader c = reply.getConfig();
          config = ParseConfig(c.getLwe(), protocol);
          config.log_n = c.getLogN();
          for (uint64_t prime : c.getPrimes()) config.primes.push_back(prime);
          config.special_prime = c.getSpecialPrime();
          config.expansion_key_bytes = c.getExpansionKeyBytes();
          config.secret_ciphertext_bytes = c.getSecretCiphertextBytes();
          config.response_bytes = c.getResponseBytes();
          config.max_chunk_bytes = c.getMaxChunkBytes();
          config.selection_bytes = c.getSelectionBytes();
          config.ciphertexts_per_query = c.getCiphertextsPerQuery();
          return absl::OkStatus();
        });
  }
  return server.castAs<rpc::LweServer>().configRequest().send().then(
      [&config, protocol](capnp::Response<rpc::LweServer::ConfigResults> reply) {
        config = ParseConfig(reply.getConfig(), protocol);
        return absl::OkStatus();
      });
}

// The lattice parameters of `c`, checked against this client's: the shape recomputed from the
// table's size and records per column (never taken from the server), the seed derived from the
// table. INVALID_ARGUMENT naming the problem.
absl::StatusOr<lattice::LweConfig> LatticeConfig(const ServerConfig& c) {
  const LweTableInfo& t = c.table;
  absl::StatusOr<lattice::Protocol> protocol = LweProtocolOf(t.protocol);
  if (!protocol.ok()) return protocol.status();
  if (c.lwe_protocol != static_cast<uint8_t>(*protocol) ||
      c.lwe_dimension != lattice::kLweDimension || c.log_modulus != lattice::kLogModulus ||
      c.plaintext_modulus != lattice::kPlaintextModulus || c.sigma_micro != lattice::kSigmaMicro) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LWE parameters (protocol ", c.lwe_protocol, ", n = ", c.lwe_dimension,
        ", log q = ", c.log_modulus, ", p = ", c.plaintext_modulus, ", sigma = ", c.sigma_micro,
        "e-6) other than this client's (n = ", lattice::kLweDimension,
        ", log q = ", lattice::kLogModulus, ", p = ", lattice::kPlaintextModulus,
        ", sigma = ", lattice::kSigmaMicro, "e-6)"));
  }
  if (c.row_words_with_tags == 0 || c.row_words_with_tags > lattice::kMaxRecordBytes / 4 ||
      t.records_per_column == 0) {
    return absl::InvalidArgumentError(absl::StrCat("a table of ", c.row_words_with_tags,
                                                   " words per row, ", t.records_per_column,
                                                   " records per column"));
  }
  lattice::ShapeOptions options;
  options.records_per_column = t.records_per_column;
  absl::StatusOr<lattice::Shape> shape =
      lattice::ChooseShape(*protocol, t.rows, 4 * c.row_words_with_tags, options);
  if (!shape.ok()) return shape.status();
  if (shape->d0 != t.d0 || shape->d1 != t.d1 || shape->query_words() != c.query_words ||
      shape->answer_words() != c.answer_words) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", t.d1, " x ", t.d0, " database with queries of ", c.query_words,
        " words and answers of ", c.answer_words, "; the table's shape is ", shape->d1, " x ",
        shape->d0, " with ", shape->query_words(), " and ", shape->answer_words()));
  }
  lattice::LweConfig config;
  config.shape = *shape;
  if (c.seed.size() != config.seed.size() || c.hint_digest.size() != config.hint_digest.size()) {
    return absl::InvalidArgumentError("a seed or hint digest that is not 32 bytes");
  }
  std::copy(c.seed.begin(), c.seed.end(), config.seed.begin());
  std::copy(c.hint_digest.begin(), c.hint_digest.end(), config.hint_digest.begin());
  config.table_digest = t.digest;
  config.hint_bytes = t.hint_bytes;
  config.hint_chunk_bytes = c.hint_chunk_bytes;
  if (absl::Status s = lattice::ValidateConfig(config); !s.ok()) return s;
  return config;
}

// The packed protocols: INVALID_ARGUMENT unless `c`'s ring is this client's (RingParams::Default)
// and its sizes are the ones the ring, the protocol and the shape give `packed`.
absl::Status CheckRing(const ServerConfig& c, const lattice::PackedClient& packed) {
  const lattice::RingParams& ring = packed.ring().params();
  if (c.log_n != static_cast<uint32_t>(ring.log_n) || c.primes != ring.primes ||
      c.special_prime != ring.special) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring parameters (N = 2^", c.log_n, ", primes ", absl::StrJoin(c.primes, ","),
        ", special prime ", c.special_prime, ") other than this client's (N = 2^", ring.log_n,
        ", primes ", absl::StrJoin(ring.primes, ","), ", special prime ", ring.special, ")"));
  }
  const uint64_t keys = packed.expansion_keys().size();
  const uint64_t ciphertext = lattice::SecretCiphertextBytes(packed.ring());
  const uint64_t response = packed.response_bytes();
  const uint64_t selection = packed.selection_bytes();
  if (c.expansion_key_bytes != keys || c.secret_ciphertext_bytes != ciphertext ||
      c.ciphertexts_per_query != packed.ciphertexts() || c.response_bytes != response ||
      c.selection_bytes != selection) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expansion keys of ", c.expansion_key_bytes, " bytes, ", c.ciphertexts_per_query,
        " ciphertexts of ", c.secret_ciphertext_bytes, ", selections of ", c.selection_bytes,
        " and responses of ", c.response_bytes, " bytes; this client's are ", keys, ", ",
        packed.ciphertexts(), " x ", ciphertext, ", ", selection, " and ", response));
  }
  return absl::OkStatus();
}

// FAILED_PRECONDITION unless an answer of `server` is from the session's table.
absl::Status CheckReplyTable(const LweTableInfo& table, const std::string& server,
                             rpc::TableId::Reader id) {
  capnp::Data::Reader digest = id.getDigest();
  if (id.getEpoch() == table.epoch && digest.size() == table.digest.size() &&
      std::memcmp(digest.begin(), table.digest.data(), digest.size()) == 0) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(server, " answered from another table (epoch ", id.getEpoch(),
                   ") than the one it reported at connect (epoch ", table.epoch,
                   "); connect a new client to use the new table"));
}

// FAILED_PRECONDITION unless `config` (of `who`) serves `table` with its hint.
absl::Status SameTableAndHint(const ServerConfig& config, const LweTableInfo& table,
                              const std::string& who, const char* whose) {
  const LweTableInfo& t = config.table;
  if (t.digest == table.digest && t.epoch == table.epoch &&
      t.hint_digest_hex == table.hint_digest_hex) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      who, " serves another table or hint (digest ", t.digest_hex, " epoch ", t.epoch, ", hint ",
      t.hint_digest_hex.substr(0, 16), ") than ", whose, " (digest ", table.digest_hex, " epoch ",
      table.epoch, ", hint ", table.hint_digest_hex.substr(0, 16),
      "); connect a new client once every replica serves the same table"));
}

// Up to `n` queries prepared ahead from `pool` (the caller holds its mutex), the rest of the
// pool left.
template <typename Prepared>
std::vector<Prepared> TakePrepared(std::vector<Prepared>& pool, size_t n) {
  std::vector<Prepared> taken;
  while (taken.size() < n && !pool.empty()) {
    taken.push_back(std::move(pool.back()));
    pool.pop_back();
  }
  return taken;
}

}  // namespace

LweClient::LweClient(LweClientOptions options, std::unique_ptr<Transport> transport)
    : options_(std::move(options)),
      latch_(options_.failure_latch_file),
      transport_(std::move(transport)),
      keys_(KeyUploads::Of<rpc::LwePackServer>()) {}

LweClient::~LweClient() {
  // The key uploads are the loop thread's promises: dropped there, then the loop stops.
  transport_
      ->Run(
          [this]() -> kj::Promise<absl::Status> {
            keys_->Clear();
            return absl::OkStatus();
          },
          "closing")
      .IgnoreError();
  transport_.reset();
}

absl::StatusOr<std::unique_ptr<LweClient>> LweClient::Connect(const LweClientOptions& options) {
  if (absl::Status s = LweProtocolOf(options.protocol).status(); !s.ok()) return s;
  if (absl::Status s = FailureLatch(options.failure_latch_file).Check(); !s.ok()) return s;
  absl::StatusOr<std::optional<embedding::RowKey>> row_key =
      ReadOptionalRowKey(options.row_key_file);
  if (!row_key.ok()) return row_key.status();
  TransportOptions t;
  t.addresses = {options.server};
  t.tls_names = {options.tls_server_name};
  t.tls_trusted_certs = options.tls_trusted_certs;
  t.allow_plaintext = options.allow_plaintext;
  t.timeout = options.timeout;
  t.protocol = options.protocol;
  auto transport = Transport::Create(std::move(t));
  if (!transport.ok()) return transport.status();
  std::unique_ptr<LweClient> client(new LweClient(options, *std::move(transport)));
  client->row_key_ = *row_key;
  LweClient* c = client.get();
  c->replica_configs_.resize(c->transport_->replicas(0));
  c->transport_->SetReconnectCheck([c](int, int replica, rpc::VeilServer::Client server) {
    auto config = std::make_unique<ServerConfig>();
    ServerConfig& read = *config;
    return ReadConfig(server, c->options_.protocol, read)
        .then([c, replica, config = std::move(config)](absl::Status s) mutable {
          if (!s.ok()) return s;
          if (!c->adopted_.load()) {
            c->replica_configs_[replica] = std::move(config);
            return absl::OkStatus();
          }
          // A new connection holds no keys: its first query uploads them.
          c->keys_->Forget(replica);
          return SameTableAndHint(*config, c->table_, c->transport_->ReplicaName(0, replica),
                                  "this session's");
        });
  });
  if (absl::Status s = c->transport_->Connect({true}, c->transport_->reconnect_check()); !s.ok()) {
    return s;
  }
  // The first replica that answered gives the session's config; the others must agree.
  auto config = FirstAgreeingConfig(
      c->replica_configs_, [c](const ServerConfig& other, const ServerConfig& first, int r) {
        return SameTableAndHint(other, first.table, c->transport_->ReplicaName(0, r),
                                "another replica's");
      });
  if (!config.ok()) return config.status();
  absl::StatusOr<lattice::LweConfig> lattice_config = c->Adopt(**config);
  if (!lattice_config.ok()) return lattice_config.status();
  absl::MutexLock lock(&client->mu_);
  if (client->packed()) {
    if (absl::Status s = client->keys_->Upload(*client->transport_, "expansion key upload");
        !s.ok()) {
      return s;
    }
    client->replica_configs_.clear();
    return client;
  }
  absl::StatusOr<std::vector<uint8_t>> blob = client->GetHint();
  if (!blob.ok()) return blob.status();
  auto lwe = lattice::LweClient::Create(*lattice_config, *blob);
  if (!lwe.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        client->transport_->Name(0), " sent an unusable hint: ", lwe.status().message()));
  }
  client->lwe_ = *std::move(lwe);
  client->replica_configs_.clear();
  return client;
}

absl::StatusOr<lattice::LweConfig> LweClient::Adopt(const ServerConfig& config) {
  const std::string who = transport_->Name(0);
  const LweTableInfo& t = config.table;
  if (t.rows == 0 || t.row_words == 0 || !embedding::IsKnownRowFormat(t.format) ||
      !embedding::IsKnownRowTag(static_cast<uint8_t>(t.row_tag)) ||
      embedding::RowWords(t.format, t.dim) != t.row_words) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " describes an unusable table (", t.rows, " rows, ", t.row_words,
                     " words, ", embedding::RowFormatName(t.format), " dim ", t.dim, ")"));
  }
  if (absl::Status s = CheckMinEpoch(t.epoch, options_.min_epoch, who); !s.ok()) return s;
  absl::StatusOr<lattice::LweConfig> lattice_config = LatticeConfig(config);
  if (!lattice_config.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " reports a configuration this client refuses: ", lattice_config.status().message()));
  }
  if (absl::Status s = CheckRowTagUse(t.row_tag, row_key_.has_value(), options_.min_epoch,
                                      absl::StrCat(who, "'s"));
      !s.ok()) {
    return s;
  }
  const bool packed = IsPacked(t.protocol);
  // What a server can make this client allocate and download is bounded, before anything is.
  const lattice::Shape& shape = lattice_config->shape;
  const uint64_t hint = packed ? 0 : lattice_config->hint_bytes;
  if (hint > options_.max_hint_bytes || 4 * shape.query_words() > kMaxCallBytes ||
      4 * shape.answer_words() > kMaxCallBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        who, " serves a table whose hint takes ", hint, " bytes and whose queries and answers ",
        4 * shape.query_words(), " and ", 4 * shape.answer_words(),
        " bytes; this client takes hints up to ", options_.max_hint_bytes,
        " bytes (max_hint_bytes) and calls up to ", kMaxCallBytes, " bytes"));
  }
  if (!packed && config.hint_chunk_bytes < std::min(kMinHintChunkBytes, hint)) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " sends its hint in chunks of ", config.hint_chunk_bytes,
                     " bytes; this client needs at least ", kMinHintChunkBytes));
  }
  std::unique_ptr<lattice::PackedClient> made;
  if (packed) {
    absl::StatusOr<std::unique_ptr<lattice::PackedClient>> client;
    if (t.protocol == kExpPackD) {
      client = lattice::PackedDoubleClient::Create(*lattice_config);
    } else if (t.protocol == kDoublePack) {
      client = lattice::DoublePackedClient::Create(*lattice_config);
    } else {
      client = lattice::PackedSimpleClient::Create(*lattice_config, lattice::RingParams::Default(),
                                                   t.protocol == kHybrid
                                                       ? lattice::PackedProtocol::kHybrid
                                                       : lattice::PackedProtocol::kExpPackS);
    }
    if (!client.ok()) return client.status();
    if (absl::Status s = CheckRing(config, **client); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " reports a configuration this client refuses: ", s.message()));
    }
    made = *std::move(client);
  }
  // Bytes of one call each way: a packed protocol sends its query words (lwe-double-pack: two
  // queries') and its ciphertexts (lwe-hybrid also its selection) and gets the packed response
  // (never the LWE answer).
  const uint64_t up = packed ? 4 * made->query_words() +
                                   made->ciphertexts() * config.secret_ciphertext_bytes +
                                   config.selection_bytes
                             : 4 * config.query_words;
  const uint64_t down = packed ? config.response_bytes : 4 * config.answer_words;
  if (config.max_queries_per_call == 0 || config.max_queued_queries == 0 ||
      std::max(up, down) + kEnvelopeBytes > config.max_message_bytes ||
      (packed && config.max_chunk_bytes < kMinKeyChunkBytes)) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " accepts no query (", config.max_queries_per_call, " per call, ",
        config.max_message_bytes, " bytes per call",
        packed ? absl::StrCat(", keys in chunks of ", config.max_chunk_bytes, " bytes") : "", ")"));
  }
  if (packed) {
    packed_ = std::move(made);
    max_chunk_bytes_ = config.max_chunk_bytes;
    keys_->Reset(packed_->expansion_keys(), max_chunk_bytes_, transport_->replicas(0));
  }
  table_ = t;
  record_bytes_ = lattice_config->shape.record_bytes;
  table_.log2_failure = lattice_config->shape.log2_failure;
  table_.query_bytes = up;
  table_.answer_bytes = down;
  if (packed) {
    table_.hint_bytes = 0;
    table_.key_bytes = config.expansion_key_bytes;
  }
  hint_digest_ = lattice_config->hint_digest;
  hint_chunk_bytes_ = config.hint_chunk_bytes;
  max_queries_per_call_ = config.max_queries_per_call;
  max_queued_queries_ = config.max_queued_queries;
  max_message_bytes_ = config.max_message_bytes;
  adopted_.store(true);
  return lattice_config;
}

size_t LweClient::QueriesPerCall() const {
  return std::max<size_t>(
      1, std::min<uint64_t>({max_queries_per_call_,
                             (max_message_bytes_ - kEnvelopeBytes) / table_.query_bytes,
                             (max_message_bytes_ - kEnvelopeBytes) / table_.answer_bytes}));
}

absl::Status LweClient::SendQueries(absl::Span<const uint32_t> queries, size_t count,
                                    absl::Time deadline, absl::Span<uint32_t> answers) {
  const uint64_t qw = queries.size() / count, aw = answers.size() / count;
  const size_t per_call = QueriesPerCall();
  const size_t calls = (count + per_call - 1) / per_call;
  return transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        std::vector<Transport::Send> sends;
        sends.reserve(calls);
        for (size_t call = 0; call < calls; ++call) {
          const size_t first = call * per_call, n = std::min(per_call, count - first);
          auto send = [this, queries, first, n, qw, aw, answers](rpc::VeilServer::Client cap,
                                                                 int replica) {
            auto request = cap.castAs<rpc::LweServer>().answerRequest(
                capnp::MessageSize{n * qw / 2 + 16 + hint_digest_.size() / 8, 0});
            request.setQueries(capnp::Data::Reader(
                reinterpret_cast<const uint8_t*>(queries.data() + first * qw), 4 * n * qw));
            request.setHintDigest(capnp::Data::Reader(hint_digest_.data(), hint_digest_.size()));
            return request.send().then([this, first, n, aw, answers,
                                        replica](capnp::Response<rpc::LweServer::AnswerResults> r) {
              const std::string who = transport_->ReplicaName(0, replica);
              if (absl::Status s = CheckReplyTable(table_, who, r.getTable()); !s.ok()) {
                return s;
              }
              capnp::Data::Reader data = r.getAnswers();
              if (data.size() != 4 * n * aw) {
                return absl::InternalError(absl::StrCat(
                    who, " sent ", data.size(), " bytes of answers, expected ", 4 * n * aw));
              }
              // A hedged call may be answered twice: any answer to these queries decrypts
              // to the same rows (the tags check them).
              std::memcpy(answers.data() + first * aw, data.begin(), data.size());
              return absl::OkStatus();
            });
          };
          sends.push_back(std::move(send));
        }
        return transport_->CallEach(0, std::move(sends), deadline);
      },
      "LWE lookup");
}

absl::Status LweClient::LookupPacked(absl::Span<const uint64_t> rows, absl::Time deadline,
                                     absl::Span<uint8_t> records, LweClientTimes& times) {
  std::vector<lattice::PackedQuery> queries;
  absl::Time t0 = absl::Now();
  // The first rows from prepared queries, the rest made whole.
  std::vector<lattice::PreparedQuery> prepared;
  {
    absl::MutexLock lock(&prepared_mu_);
    prepared = TakePrepared(prepared_, rows.size());
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    auto query = i < prepared.size() ? packed_->FinishQuery(rows[i], std::move(prepared[i]))
                                     : packed_->MakeQuery(rows[i]);
    if (!query.ok()) return query.status();
    queries.push_back(*std::move(query));
  }
  times.prepared += static_cast<uint32_t>(prepared.size());
  times.query_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
  std::vector<std::vector<uint8_t>> responses;
  absl::Status status = SendPacked(queries, deadline, responses);
  if (absl::IsAborted(status)) {
    // The server evicted this session's keys for another's: upload them again, retry once.
    status = keys_->Upload(*transport_, "expansion key upload", deadline);
    if (status.ok()) status = SendPacked(queries, deadline, responses);
  }
  if (!status.ok()) return status;
  t0 = absl::Now();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (absl::Status s = packed_->Decode(queries[i], responses[i],
                                         records.subspan(i * record_bytes_, record_bytes_));
        !s.ok()) {
      return absl::InternalError(
          absl::StrCat(transport_->Name(0), " sent a malformed response: ", s.message()));
    }
  }
  times.decode_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
  return absl::OkStatus();
}

absl::Status LweClient::SendPacked(absl::Span<const lattice::PackedQuery> queries,
                                   absl::Time deadline,
                                   std::vector<std::vector<uint8_t>>& responses) {
  responses.assign(queries.size(), {});
  return transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        std::vector<Transport::Send> sends;
        sends.reserve(queries.size());
        for (size_t i = 0; i < queries.size(); ++i) {
          auto send = [this, &query = queries[i], &response = responses[i]](
                          rpc::VeilServer::Client cap, int replica) {
            const std::string who = transport_->ReplicaName(0, replica);
            return keys_->On(replica, cap, who)
                .then([this, &query, &response, cap, replica,
                       who](absl::Status keys) mutable -> kj::Promise<absl::Status> {
                  if (!keys.ok()) return keys;
                  const size_t query_bytes = 4 * query.query.size();
                  auto request = cap.castAs<rpc::LwePackServer>().answerRequest(capnp::MessageSize{
                      (query_bytes + query.ciphertext.size() + query.selection.size()) / 8 + 24,
                      0});
                  request.setQuery(capnp::Data::Reader(
                      reinterpret_cast<const uint8_t*>(query.query.data()), query_bytes));
                  request.setCiphertext(
                      capnp::Data::Reader(query.ciphertext.data(), query.ciphertext.size()));
                  request.setSelection(
                      capnp::Data::Reader(query.selection.data(), query.selection.size()));
                  return request.send().then(
                      [this, &response, who](capnp::Response<rpc::LwePackServer::AnswerResults> r) {
                        if (absl::Status s = CheckReplyTable(table_, who, r.getTable()); !s.ok()) {
                          return s;
                        }
                        capnp::Data::Reader data = r.getResponse();
                        if (data.size() != table_.answer_bytes) {
                          return absl::InternalError(absl::StrCat(who, " sent a response of ",
                                                                  data.size(), " bytes, expected ",
                                                                  table_.answer_bytes));
                        }
                        // A hedged query may be answered twice: either decrypts to the record.
                        response.assign(data.begin(), data.end());
                        return absl::OkStatus();
                      },
                      [this, replica](kj::Exception&& e) -> absl::Status {
                        // Evicted keys (ABORTED): the replica is sent them again before a retry.
                        if (absl::IsAborted(rpc::ExceptionToStatus(e, ""))) keys_->Forget(replica);
                        kj::throwFatalException(kj::mv(e));
                      });
                });
          };
          sends.push_back(std::move(send));
        }
        return transport_->CallEach(0, std::move(sends), deadline);
      },
      "LWE lookup");
}

absl::StatusOr<std::vector<uint32_t>> LweClient::LookupWords(absl::Span<const uint64_t> indices) {
  if (indices.empty()) return absl::InvalidArgumentError("no rows requested");
  for (uint64_t row : indices) {
    if (row >= table_.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", row, " is outside the table (", table_.rows, " rows)"));
    }
  }
  absl::MutexLock lock(&mu_);
  // Under the lock: a lookup waiting for one that trips the latch is stopped by it.
  if (absl::Status s = latch_.Check(); !s.ok()) return s;
  // One deadline for the whole lookup: a reconnection (bounded by the timeout too), its calls,
  // and a key upload after an eviction.
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.timeout;
  if (absl::Status s = transport_->ReconnectLost(); !s.ok()) return s;
  const uint64_t up_before = transport_->bytes_up(), down_before = transport_->bytes_down();
  const uint64_t failovers_before = transport_->failovers(), hedges_before = transport_->hedges();
  const uint32_t data_words = table_.row_words, record_bytes = record_bytes_;
  LweClientTimes times;
  std::vector<uint32_t> rows(indices.size() * data_words);
  std::vector<uint32_t> record(record_bytes / 4);
  // Waves that fit the server's per-connection queue and this client's calls in flight; each
  // wave's queries are made just before it and its answers decoded right after, so that memory
  // follows the wave, not the lookup.
  const size_t per_call = QueriesPerCall();
  const size_t per_wave =
      std::max<size_t>(1, std::min<size_t>(max_queued_queries_, per_call * kMaxCallsInFlight));
  for (size_t first = 0; first < indices.size(); first += per_wave) {
    const size_t n = std::min(per_wave, indices.size() - first);
    const absl::Span<const uint64_t> wave = indices.subspan(first, n);
    std::vector<uint8_t> records(n * record_bytes);
    if (packed()) {
      if (absl::Status s = LookupPacked(wave, deadline, absl::MakeSpan(records), times); !s.ok()) {
        return s;
      }
    } else {
      const uint64_t qw = lwe_->shape().query_words(), aw = lwe_->shape().answer_words();
      std::vector<uint32_t> queries(n * qw), answers(n * aw);
      absl::Time t0 = absl::Now();
      // The first rows from prepared lookups, the rest made here in one pass over A.
      std::vector<lattice::PreparedLookup> prepared;
      {
        absl::MutexLock lock(&prepared_mu_);
        prepared = TakePrepared(prepared_lookups_, n);
      }
      const size_t ahead = prepared.size();
      auto pending =
          lwe_->MakeQueries(wave.subspan(ahead), absl::MakeSpan(queries).subspan(ahead * qw));
      if (!pending.ok()) return pending.status();
      for (size_t i = 0; i < ahead; ++i) {
        auto lookup = lwe_->FinishQuery(wave[i], std::move(prepared[i]),
                                        absl::MakeSpan(queries).subspan(i * qw, qw));
        if (!lookup.ok()) return lookup.status();
        pending->insert(pending->begin() + i, *std::move(lookup));
      }
      times.prepared += static_cast<uint32_t>(ahead);
      times.query_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
      if (absl::Status s = SendQueries(queries, n, deadline, absl::MakeSpan(answers)); !s.ok()) {
        return s;
      }
      t0 = absl::Now();
      for (size_t i = 0; i < n; ++i) {
        if (absl::Status s =
                lwe_->Decode((*pending)[i], absl::MakeConstSpan(answers).subspan(i * aw, aw),
                             absl::MakeSpan(records).subspan(i * record_bytes, record_bytes));
            !s.ok()) {
          return s;
        }
      }
      times.decode_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
    }
    const absl::Time t0 = absl::Now();
    for (size_t i = 0; i < n; ++i) {
      const uint64_t row = wave[i];
      std::memcpy(record.data(), records.data() + i * record_bytes, record_bytes);
      const absl::Span<const uint32_t> words = absl::MakeConstSpan(record);
      if (table_.row_tag != embedding::RowTag::kNone &&
          !embedding::RowTagMatches(
              table_.row_tag, *row_key_, table_.epoch, row,
              {table_.format, static_cast<uint8_t>(table_.frac_bits), table_.dim},
              words.first(data_words), words.subspan(data_words))) {
        return latch_.Trip(absl::DataLossError(absl::StrCat(
            "row ", row, " fails its authentication tag: the answer of ", transport_->Name(0),
            " does not decrypt to the row of the table's epoch ", table_.epoch,
            " (a corrupted, tampered or relabelled table, or a wrong answer); not returning it")));
      }
      std::copy_n(record.begin(), data_words, rows.begin() + (first + i) * data_words);
    }
    times.decode_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
  }
  CallStats stats;
  stats.latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  stats.bytes_up = transport_->bytes_up() - up_before;
  stats.bytes_down = transport_->bytes_down() - down_before;
  stats.lookups = static_cast<uint32_t>(indices.size());
  stats.keys = static_cast<uint32_t>(indices.size());
  stats.calls = static_cast<uint32_t>((indices.size() + per_call - 1) / per_call);
  stats.failovers = static_cast<uint32_t>(transport_->failovers() - failovers_before);
  stats.hedges = static_cast<uint32_t>(transport_->hedges() - hedges_before);
  last_call_ = stats;
  last_times_ = times;
  totals_.lookups += stats.lookups;
  totals_.keys += stats.keys;
  totals_.calls += stats.calls;
  return rows;
}

absl::StatusOr<std::vector<float>> LweClient::Lookup(absl::Span<const uint64_t> indices) {
  auto words = LookupWords(indices);
  if (!words.ok()) return words.status();
  std::vector<float> values(indices.size() * table_.dim);
  for (size_t i = 0; i < indices.size(); ++i) {
    absl::Status s = embedding::DecodeRow(
        table_.format, table_.frac_bits, table_.dim,
        absl::MakeConstSpan(*words).subspan(i * table_.row_words, table_.row_words),
        absl::MakeSpan(values).subspan(i * table_.dim, table_.dim));
    if (!s.ok()) return s;
  }
  return values;
}

absl::StatusOr<rpc::StatsSnapshot> LweClient::ServerStats() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = transport_->ReconnectLost(); !s.ok()) return s;
  return transport_->Stats(0);
}

CallStats LweClient::last_call() const {
  absl::MutexLock lock(&mu_);
  return last_call_;
}

CallStats LweClient::totals() const {
  absl::MutexLock lock(&mu_);
  CallStats t = totals_;
  t.bytes_up = transport_->bytes_up();
  t.bytes_down = transport_->bytes_down();
  t.failovers = static_cast<uint32_t>(transport_->failovers());
  t.hedges = static_cast<uint32_t>(transport_->hedges());
  return t;
}

uint64_t LweClient::key_uploads() const { return keys_->uploads(); }
uint64_t LweClient::key_resumes() const { return keys_->resumes(); }

absl::Status LweClient::PrepareQueries(uint32_t count) {
  const uint64_t max_count = std::max<uint64_t>(1, kMaxPreparedBytes / table_.query_bytes);
  const auto fits = [&](uint64_t held) {
    return held + count <= max_count ? absl::OkStatus()
                                     : absl::InvalidArgumentError(absl::StrCat(
                                           count, " more prepared queries would exceed ", max_count,
                                           " (", held, " held; ", table_.query_bytes,
                                           " bytes each, at most ", kMaxPreparedBytes, ")"));
  };
  // Checked before the work, and again when adding it: another thread may have added some.
  if (absl::Status s = fits(prepared_queries()); !s.ok()) return s;
  std::vector<lattice::PreparedLookup> lookups;
  std::vector<lattice::PreparedQuery> queries;
  if (packed()) {
    queries.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      absl::StatusOr<lattice::PreparedQuery> prepared = packed_->PrepareQuery();
      if (!prepared.ok()) return prepared.status();
      queries.push_back(*std::move(prepared));
    }
  } else {
    lookups = lwe_->PrepareLookups(count);
  }
  absl::MutexLock lock(&prepared_mu_);
  if (absl::Status s = fits(prepared_.size() + prepared_lookups_.size()); !s.ok()) return s;
  for (lattice::PreparedQuery& p : queries) prepared_.push_back(std::move(p));
  for (lattice::PreparedLookup& p : lookups) prepared_lookups_.push_back(std::move(p));
  return absl::OkStatus();
}

uint64_t LweClient::prepared_queries() const {
  absl::MutexLock lock(&prepared_mu_);
  return prepared_.size() + prepared_lookups_.size();
}

LweClientTimes LweClient::last_times() const {
  absl::MutexLock lock(&mu_);
  return last_times_;
}

}  // namespace veil::client
