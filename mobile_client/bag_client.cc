#include "mobile_client/bag_client.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/row_format.h"
#include "mobile_client/key_uploads.h"
#include "mobile_client/replicas.h"
#include "mobile_client/row_tag_use.h"
#include "mobile_client/transport.h"
#include "pir/he/bag.h"
#include "pir/he/serialization.h"
#include "rpc/status.h"

namespace veil::client {

// One bag's distinct rows and their weights.
struct BagClient::Bag {
  std::vector<uint64_t> rows;
  std::vector<int64_t> weights;
};

// What the server said in its `config` reply.
struct BagClient::ServerConfig {
  BagTableInfo table;
  std::vector<uint8_t> info_bytes;  // he::SerializeBagTableInfo
  uint64_t max_chunk_bytes = 0;
  uint32_t max_queued_ciphertexts = 0;  // per connection
  bool rounded_queries = false;         // reads queries whose c_0 is rounded
};

namespace {

using ServerConfig = BagClient::ServerConfig;

ServerConfig ParseConfig(rpc::BagConfig::Reader c) {
  ServerConfig config;
  BagTableInfo& t = config.table;
  capnp::Data::Reader digest = c.getTable().getDigest();
  if (digest.size() == t.digest.size()) std::memcpy(t.digest.data(), digest.begin(), digest.size());
  t.digest_hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.begin()), digest.size()));
  t.epoch = c.getTable().getEpoch();
  t.row_tag = static_cast<embedding::RowTag>(c.getRowTag());
  t.rows = c.getRows();
  t.dim = c.getDim();
  t.frac_bits = c.getFracBits();
  t.log_n = c.getLogN();
  t.query_blocks = c.getQueryBlocks();
  t.galois_key_bytes = c.getGaloisKeyBytes();
  capnp::Data::Reader info = c.getTableInfo();
  config.info_bytes.assign(info.begin(), info.end());
  config.max_chunk_bytes = c.getMaxChunkBytes();
  config.max_queued_ciphertexts = c.getLimits().getMaxQueuedCiphertextsPerConnection();
  config.rounded_queries = c.getRoundedQueries();
  return config;
}

bool SameTable(const BagTableInfo& a, const BagTableInfo& b) {
  return a.digest == b.digest && a.epoch == b.epoch && a.row_tag == b.row_tag && a.rows == b.rows &&
         a.dim == b.dim && a.frac_bits == b.frac_bits && a.log_n == b.log_n &&
         a.query_blocks == b.query_blocks && a.galois_key_bytes == b.galois_key_bytes;
}

// FAILED_PRECONDITION unless `config` (of `who`) serves `table`.
absl::Status SameTableAs(const ServerConfig& config, const BagTableInfo& table,
                         const std::string& who, const char* whose) {
  if (SameTable(config.table, table)) {
    if (table.query_round_bits == 0 || config.rounded_queries) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(who,
                     " reads only exact queries (an older server), and this session rounds them; "
                     "connect a new client once every replica is updated"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      who, " serves another table (digest ", config.table.digest_hex, " epoch ", config.table.epoch,
      ") than ", whose, " (digest ", table.digest_hex, " epoch ", table.epoch,
      "); connect a new client once every replica serves the same table"));
}

// One bag's distinct rows and their weights (repeated rows add up, as in EmbeddingBag).
absl::Status MergeBag(absl::Span<const uint64_t> indices, absl::Span<const int64_t> weights,
                      uint64_t rows, BagClient::Bag& bag) {
  std::map<uint64_t, int64_t> merged;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", indices[i], " is outside the table (", rows, " rows)"));
    }
    int64_t& w = merged[indices[i]];
    if (__builtin_add_overflow(w, weights.empty() ? 1 : weights[i], &w)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the weights of row ", indices[i], " overflow 64 bits"));
    }
  }
  for (const auto& [row, weight] : merged) {
    bag.rows.push_back(row);
    bag.weights.push_back(weight);
  }
  return absl::OkStatus();
}

// FAILED_PRECONDITION unless an answer of `server` is from the session's table.
absl::Status CheckReplyTable(const BagTableInfo& table, const std::string& server,
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

}  // namespace

namespace {

// Loop thread: the server's `config` into `config`.
kj::Promise<absl::Status> ReadConfig(rpc::VeilServer::Client server, ServerConfig& config) {
  return server.castAs<rpc::BagServer>().configRequest().send().then(
      [&config](capnp::Response<rpc::BagServer::ConfigResults> reply) {
        config = ParseConfig(reply.getConfig());
        return absl::OkStatus();
      });
}

}  // namespace

BagClient::BagClient(BagClientOptions options, std::unique_ptr<Transport> transport)
    : options_(std::move(options)),
      threads_(options_.threads > 0
                   ? options_.threads
                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      latch_(options_.failure_latch_file),
      transport_(std::move(transport)),
      keys_(KeyUploads::Of<rpc::BagServer>()) {}

BagClient::~BagClient() {
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

absl::StatusOr<std::unique_ptr<BagClient>> BagClient::Connect(const BagClientOptions& options) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  if (options.server.empty()) return absl::InvalidArgumentError("no server address");
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be 0 (the machine's cores) or more, not ", options.threads));
  }
  if (absl::Status s = FailureLatch(options.failure_latch_file).Check(); !s.ok()) return s;
  auto row_key = ReadOptionalRowKey(options.row_key_file);
  if (!row_key.ok()) return row_key.status();
  TransportOptions t;
  t.addresses = {options.server};
  t.tls_names = {options.tls_server_name};
  t.tls_trusted_certs = options.tls_trusted_certs;
  t.allow_plaintext = options.allow_plaintext;
  t.timeout = options.timeout;
  t.protocol = "bfv-bag";
  auto transport = Transport::Create(std::move(t));
  if (!transport.ok()) return transport.status();
  std::unique_ptr<BagClient> client(new BagClient(options, *std::move(transport)));
  BagClient* c = client.get();
  c->row_key_ = *row_key;
  c->replica_configs_.resize(c->transport_->replicas(0));
  c->transport_->SetReconnectCheck([c](int, int replica, rpc::VeilServer::Client server) {
    auto config = std::make_unique<ServerConfig>();
    ServerConfig& read = *config;
    return ReadConfig(server, read)
        .then([c, replica, config = std::move(config)](absl::Status s) mutable {
          if (!s.ok()) return s;
          if (!c->adopted_.load()) {
            c->replica_configs_[replica] = std::move(config);
            return absl::OkStatus();
          }
          // A new connection holds no keys: its first query uploads them.
          c->keys_->Forget(replica);
          return SameTableAs(*config, c->table_, c->transport_->ReplicaName(0, replica),
                             "this session's");
        });
  });
  if (absl::Status s = c->transport_->Connect({true}, c->transport_->reconnect_check()); !s.ok()) {
    return s;
  }
  // The first replica that answered gives the session's config; the others must agree.
  auto config = FirstAgreeingConfig(c->replica_configs_, [c](const ServerConfig& other,
                                                             const ServerConfig& first, int r) {
    return SameTableAs(other, first.table, c->transport_->ReplicaName(0, r), "another replica's");
  });
  if (!config.ok()) return config.status();
  // Queries are rounded if every replica that answered reads them so.
  const bool rounded = std::all_of(
      c->replica_configs_.begin(), c->replica_configs_.end(),
      [](const std::unique_ptr<ServerConfig>& r) { return r == nullptr || r->rounded_queries; });
  if (absl::Status s = c->Adopt(**config, rounded); !s.ok()) return s;
  c->replica_configs_.clear();
  absl::MutexLock lock(&c->mu_);
  if (absl::Status s = c->UploadKeys(); !s.ok()) return s;
  return client;
}

absl::Status BagClient::Adopt(const ServerConfig& config, bool rounded_queries) {
  const BagTableInfo& t = config.table;
  const std::string who = transport_->Name(0);
  if (absl::Status s = CheckRowTagUse(t.row_tag, row_key_.has_value(), options_.min_epoch,
                                      absl::StrCat(who, "'s"));
      !s.ok()) {
    return s;
  }
  if (t.row_tag != embedding::RowTag::kNone && t.row_tag != embedding::RowTag::kLinearMac61) {
    return absl::FailedPreconditionError(absl::StrCat(who, " serves a table with row tags of kind ",
                                                      static_cast<int>(t.row_tag),
                                                      ", which no pooled sum can be checked by"));
  }
  if (absl::Status s = CheckMinEpoch(t.epoch, options_.min_epoch, who); !s.ok()) return s;
  // A tagged table's product pools its two tag columns with the data.
  const uint64_t columns = uint64_t{t.dim} + embedding::TagWords(t.row_tag);
  auto params = he::BagParams(t.log_n);
  if (!params.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " uses BFV parameters this client cannot make: ", params.status().message()));
  }
  auto ctx = he::BfvContext::Create(*params);
  if (!ctx.ok()) return ctx.status();
  auto info = he::ParseBagTableInfo(config.info_bytes);
  if (!info.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " sent an unusable table description: ", info.status().message()));
  }
  if (info->rows != t.rows || info->dim != columns) {
    return absl::FailedPreconditionError(absl::StrCat(who, " describes its table as ", t.rows,
                                                      " x ", columns, " and as ", info->rows, " x ",
                                                      info->dim));
  }
  if (t.row_tag == embedding::RowTag::kLinearMac61) {
    // The tag's check holds while every true sum stays below p = 2^61 - 1 in absolute value, and
    // the weights are bounded by the largest |value| the server states: take the largest any
    // int32 column can hold instead, so that a server understating it cannot make sums wrap.
    info->max_abs = std::max<uint32_t>(info->max_abs, uint32_t{1} << 31);
  }
  auto he_client = he::BagClient::Create(*ctx, *info);
  if (!he_client.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " serves a table this client cannot query: ", he_client.status().message()));
  }
  const int round_bits = rounded_queries ? he::kBagQueryRoundBits : 0;
  const he::BagSizes sizes = (*he_client)->Sizes(round_bits);
  // A lookup's query and answer must be able to travel: a server claiming a larger table would
  // make the client allocate for nothing (its rows' weights, per lookup).
  if (sizes.query_bytes > kMaxCallBytes || sizes.answer_bytes > kMaxCallBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        who, " serves a table of ", t.rows, " rows x ", t.dim, " whose queries and answers take ",
        sizes.query_bytes, " and ", sizes.answer_bytes,
        " bytes; this client sends and takes at most ", kMaxCallBytes, " bytes a call"));
  }
  auto plan = he::MatVecPlan::Create(**ctx, columns, t.rows);
  if (!plan.ok()) return plan.status();
  if (sizes.galois_key_bytes != t.galois_key_bytes || plan->blocks() != t.query_blocks ||
      config.max_chunk_bytes < kMinKeyChunkBytes ||
      config.max_queued_ciphertexts < t.query_blocks) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " reports sizes this client does not expect (Galois keys ", t.galois_key_bytes,
        " bytes, expected ", sizes.galois_key_bytes, "; chunks of ", config.max_chunk_bytes,
        " bytes; ", t.query_blocks, " ciphertexts per query, ", config.max_queued_ciphertexts,
        " allowed in flight)"));
  }
  auto keys = (*he_client)->MakeGaloisKeys();
  if (!keys.ok()) return keys.status();
  auto bytes = he::SerializeGaloisKeys(**ctx, *keys);
  if (!bytes.ok()) return bytes.status();
  table_ = t;
  columns_ = static_cast<uint32_t>(columns);
  table_.query_round_bits = round_bits;
  table_.query_bytes = sizes.query_bytes;
  table_.answer_bytes = sizes.answer_bytes;
  max_chunk_bytes_ = config.max_chunk_bytes;
  max_queued_ciphertexts_ = config.max_queued_ciphertexts;
  galois_keys_ = *std::move(bytes);
  keys_->Reset(galois_keys_, max_chunk_bytes_, transport_->replicas(0));
  ctx_ = *std::move(ctx);
  he_ = *std::move(he_client);
  adopted_.store(true);
  return absl::OkStatus();
}

absl::Status BagClient::UploadKeys(absl::Time deadline) {
  return keys_->Upload(*transport_, "Galois key upload", deadline);
}

absl::StatusOr<std::vector<int64_t>> BagClient::LookupPooledSums(
    absl::Span<const uint64_t> indices, absl::Span<const uint32_t> bag_sizes,
    absl::Span<const int64_t> weights) {
  if (bag_sizes.empty()) return absl::InvalidArgumentError("no bags requested");
  if (!weights.empty() && weights.size() != indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights.size(), " weights for ", indices.size(), " indices"));
  }
  size_t total = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    if (bag_sizes[b] == 0) return absl::InvalidArgumentError(absl::StrCat("bag ", b, " is empty"));
    total += bag_sizes[b];
  }
  if (total != indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the bag sizes add up to ", total,
                                                   ", not to the ", indices.size(), " indices"));
  }
  std::vector<Bag> bags(bag_sizes.size());
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    absl::Status merged = MergeBag(indices.subspan(next, bag_sizes[b]),
                                   weights.empty() ? weights : weights.subspan(next, bag_sizes[b]),
                                   table_.rows, bags[b]);
    if (!merged.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("bag ", b, ": ", merged.message()));
    }
    next += bag_sizes[b];
  }

  absl::MutexLock lock(&mu_);
  if (!stopped_.empty()) return absl::FailedPreconditionError(stopped_);
  if (absl::Status s = latch_.Check(); !s.ok()) return s;
  // One deadline for the whole lookup: a reconnection (bounded by the timeout too), its calls,
  // and a key upload after an eviction.
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.timeout;
  if (absl::Status s = transport_->ReconnectLost(); !s.ok()) return s;
  const uint64_t up_before = transport_->bytes_up(), down_before = transport_->bytes_down();
  const uint64_t failovers_before = transport_->failovers(), hedges_before = transport_->hedges();
  std::vector<int64_t> sums(bags.size() * columns_);
  const auto wipe = absl::MakeCleanup([&sums] {
    sodium_memzero(sums.data(), sums.size() * sizeof(int64_t));  // the bags' sums, tags included
  });
  // Bags go out in waves that fit the server's per-connection queue; each wave's queries are
  // encrypted just before it and its answers decoded right after, so that memory follows the
  // wave, not the lookup.
  const size_t per_wave = std::max<size_t>(1, max_queued_ciphertexts_ / table_.query_blocks);
  for (size_t first = 0; first < bags.size(); first += per_wave) {
    const size_t last = std::min(bags.size(), first + per_wave);
    std::vector<std::vector<uint8_t>> queries;
    for (size_t b = first; b < last; ++b) {
      auto query =
          he_->SerializedQuery(bags[b].rows, bags[b].weights, table_.query_round_bits, threads_);
      if (!query.ok()) {
        return absl::Status(query.status().code(),
                            absl::StrCat("bag ", b, ": ", query.status().message()));
      }
      queries.push_back(*std::move(query));
    }
    absl::Span<int64_t> out = absl::MakeSpan(sums).subspan(first * columns_);
    absl::Status status = SendWave(queries, deadline, out);
    if (absl::IsAborted(status)) {
      // The server evicted this session's keys for another's: upload them again, retry once.
      status = UploadKeys(deadline);
      if (status.ok()) status = SendWave(queries, deadline, out);
    }
    if (!status.ok()) return status;
  }
  const embedding::RowShape shape{embedding::RowFormat::kFixed32,
                                  static_cast<uint8_t>(table_.frac_bits), table_.dim};
  for (size_t b = 0; row_key_.has_value() && b < bags.size(); ++b) {
    if (!embedding::PooledRowTagMatches(
            *row_key_, table_.epoch, shape, bags[b].rows, bags[b].weights,
            absl::MakeConstSpan(sums).subspan(b * columns_, columns_))) {
      return Stop(absl::DataLossError(absl::StrCat(
          "the pooled sum of bag ", b, " fails its authentication tag: ", transport_->Name(0),
          " did not answer with the sum of the rows of the table's epoch ", table_.epoch,
          " (a corrupted, tampered or relabelled table, or a wrong answer); not returning it")));
    }
  }
  std::vector<int64_t> pooled(bags.size() * table_.dim);
  for (size_t b = 0; b < bags.size(); ++b) {
    std::copy_n(sums.begin() + b * columns_, table_.dim, pooled.begin() + b * table_.dim);
  }
  CallStats stats;
  stats.latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  stats.bytes_up = transport_->bytes_up() - up_before;
  stats.bytes_down = transport_->bytes_down() - down_before;
  stats.lookups = static_cast<uint32_t>(bags.size());
  stats.keys = static_cast<uint32_t>(bags.size() * table_.query_blocks);
  stats.calls = static_cast<uint32_t>(bags.size());
  stats.failovers = static_cast<uint32_t>(transport_->failovers() - failovers_before);
  stats.hedges = static_cast<uint32_t>(transport_->hedges() - hedges_before);
  last_call_ = stats;
  totals_.lookups += stats.lookups;
  totals_.keys += stats.keys;
  totals_.calls += stats.calls;
  return pooled;
}

absl::Status BagClient::SendWave(const std::vector<std::vector<uint8_t>>& queries,
                                 absl::Time deadline, absl::Span<int64_t> sums) {
  std::vector<std::vector<uint8_t>> answers(queries.size());
  absl::Status status = transport_->Run(
      [&]() -> kj::Promise<absl::Status> {
        std::vector<Transport::Send> sends;
        sends.reserve(queries.size());
        for (size_t i = 0; i < queries.size(); ++i) {
          auto send = [this, i, &queries, &answers](rpc::VeilServer::Client cap, int replica) {
            return keys_->On(replica, cap, transport_->ReplicaName(0, replica))
                .then([this, i, &queries, &answers, cap,
                       replica](absl::Status keys) mutable -> kj::Promise<absl::Status> {
                  if (!keys.ok()) return keys;
                  auto request = cap.castAs<rpc::BagServer>().answerRequest();
                  request.setQuery(capnp::Data::Reader(queries[i].data(), queries[i].size()));
                  return request.send().then(
                      [this, i, &answers,
                       replica](capnp::Response<rpc::BagServer::AnswerResults> r) {
                        const std::string who = transport_->ReplicaName(0, replica);
                        if (absl::Status s = CheckReplyTable(table_, who, r.getTable()); !s.ok()) {
                          return s;
                        }
                        // A hedged query may be answered twice: either answer decrypts to the sum.
                        capnp::Data::Reader answer = r.getAnswer();
                        answers[i].assign(answer.begin(), answer.end());
                        return absl::OkStatus();
                      },
                      [this, replica](kj::Exception&& e) -> absl::Status {
                        // Evicted keys (ABORTED): the replica is sent them again before a retry.
                        if (absl::IsAborted(rpc::ExceptionToStatus(e, ""))) {
                          keys_->Forget(replica);
                        }
                        kj::throwFatalException(kj::mv(e));
                      });
                });
          };
          sends.push_back(std::move(send));
        }
        return transport_->CallEach(0, std::move(sends), deadline);
      },
      "pooled lookup");
  if (!status.ok()) return status;
  for (size_t b = 0; b < answers.size(); ++b) {
    auto answer = he::ParseCompressedCiphertext(*ctx_, answers[b]);
    if (!answer.ok()) {
      return Stop(absl::InternalError(absl::StrCat(
          transport_->Name(0), " sent a malformed answer: ", answer.status().message())));
    }
    auto pooled = he_->Decode(*answer);
    if (!pooled.ok()) return Stop(pooled.status());
    const auto wipe = absl::MakeCleanup([&pooled] {  // a bag's sums
      sodium_memzero(pooled->data(), pooled->size() * sizeof((*pooled)[0]));
    });
    if (pooled->size() != columns_) {
      return Stop(absl::InternalError(
          absl::StrCat("an answer decoded to ", pooled->size(), " sums, not ", columns_)));
    }
    std::copy(pooled->begin(), pooled->end(), sums.begin() + b * columns_);
  }
  return absl::OkStatus();
}

absl::Status BagClient::Stop(absl::Status status) {
  stopped_ = absl::StrCat("an answer from ", transport_->Name(0), " failed (", status.message(),
                          "), so this client makes no more lookups (whether an answer fails can "
                          "tell the server something about a bag): stop using that server");
  return latch_.Trip(
      absl::Status(status.code(), absl::StrCat(status.message(), "; making no more lookups")));
}

absl::StatusOr<std::vector<float>> BagClient::LookupPooled(absl::Span<const uint64_t> indices,
                                                           absl::Span<const uint32_t> bag_sizes,
                                                           absl::Span<const int64_t> weights,
                                                           PoolingMode mode) {
  auto divisors = BagDivisors(indices.size(), bag_sizes, weights, mode);
  if (!divisors.ok()) return divisors.status();
  auto sums = LookupPooledSums(indices, bag_sizes, weights);
  if (!sums.ok()) return sums.status();
  const auto wipe = absl::MakeCleanup(
      [&sums] { sodium_memzero(sums->data(), sums->size() * sizeof((*sums)[0])); });
  std::vector<float> values(sums->size());
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    const size_t dim = table_.dim;
    absl::Status s = embedding::DecodePooledFixed(
        table_.frac_bits, absl::MakeConstSpan(sums->data() + b * dim, dim), (*divisors)[b],
        absl::MakeSpan(values.data() + b * dim, dim));
    if (!s.ok()) return s;
  }
  return values;
}

absl::StatusOr<rpc::StatsSnapshot> BagClient::ServerStats() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = transport_->ReconnectLost(); !s.ok()) return s;
  return transport_->Stats(0);
}

CallStats BagClient::last_call() const {
  absl::MutexLock lock(&mu_);
  return last_call_;
}

CallStats BagClient::totals() const {
  absl::MutexLock lock(&mu_);
  CallStats t = totals_;
  t.bytes_up = transport_->bytes_up();
  t.bytes_down = transport_->bytes_down();
  t.failovers = static_cast<uint32_t>(transport_->failovers());
  t.hedges = static_cast<uint32_t>(transport_->hedges());
  return t;
}

uint64_t BagClient::key_uploads() const { return keys_->uploads(); }
uint64_t BagClient::key_resumes() const { return keys_->resumes(); }

}  // namespace veil::client
