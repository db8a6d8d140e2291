#include "server/lwe_pack.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "pir/lattice/double_pack.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/pack_double.h"
#include "pir/lattice/pack_simple.h"
#include "server/backend_select.h"
#include "server/galois_cache.h"
#include "server/key_upload.h"
#include "server/log.h"
#include "server/lwe.h"
#include "server/scheduler.h"

namespace veil::server {
namespace {

// Queries travel as little-endian words, copied as they are.
static_assert(std::endian::native == std::endian::little);

// Room for a call's Cap'n Proto envelope (pointers, the offset, the list headers) beside its data.
constexpr uint64_t kEnvelopeBytes = 1024;

// The packed instance and its sizes; read-only once made.
struct PackTable {
  std::unique_ptr<lattice::PackedServer> server;
  const char* name = "";  // lwe-exppack-s, lwe-hybrid, lwe-exppack-d or lwe-double-pack
  std::string backend;    // the LWE product's
  double hint_s = 0;
  uint64_t key_bytes = 0;         // PackedServer::key_bytes
  uint64_t parsed_key_bytes = 0;  // one session's keys once parsed
  uint64_t ciphertext_bytes = 0;  // all of a lookup's: ciphertexts x SecretCiphertextBytes
  uint64_t selection_bytes = 0;   // PackedSelectionBytes (lwe-hybrid; else 0)
  uint64_t response_bytes = 0;    // PackedResponseBytes
  uint64_t max_chunk_bytes = 0;
  ServerLimits limits;  // the server's, queues counted in queries (see lwe_pack.h)
};

// One call's work on the scheduler's worker: an AnswerWork or a KeysWork.
class PackWork : public BatchItem {
 public:
  size_t cost() const override { return 1; }
};

// A lookup: the LWE answer, expanded and packed with the session's keys (lwe-hybrid: narrowed by
// its selection; lwe-double-pack: folded and packed again); a pass answers its lookups together
// (lattice::PackedServer::AnswerBatch).
class AnswerWork final : public PackWork {
 public:
  AnswerWork(std::vector<uint32_t> query, std::vector<uint8_t> ciphertext,
             std::vector<uint8_t> selection, GaloisKeyCache::Keys keys)
      : query_(std::move(query)),
        ciphertext_(std::move(ciphertext)),
        selection_(std::move(selection)),
        keys_(std::move(keys)) {}

  lattice::PackedRequest request() const { return {query_, ciphertext_, keys_.keys, selection_}; }

  absl::Status Finish(absl::StatusOr<std::vector<uint8_t>> response) {
    query_ = std::vector<uint32_t>();
    ciphertext_ = std::vector<uint8_t>();
    selection_ = std::vector<uint8_t>();
    if (!response.ok()) return response.status();
    response_ = *std::move(response);
    return absl::OkStatus();
  }

  std::vector<uint8_t>& response() { return response_; }

 private:
  std::vector<uint32_t> query_;
  std::vector<uint8_t> ciphertext_;
  std::vector<uint8_t> selection_;
  GaloisKeyCache::Keys keys_;  // held (not evicted) until this item is destroyed, on the loop
  std::vector<uint8_t> response_;
};

// A complete key upload: parsed and checked against the expansion's elements.
class KeysWork final : public PackWork {
 public:
  explicit KeysWork(GaloisKeyCache::Upload upload) : upload_(std::move(upload)) {}

  absl::Status Run(const PackTable& table) {
    absl::StatusOr<he::GaloisKeys> keys = table.server->ParseKeys(upload_.bytes);
    upload_.bytes = std::vector<uint8_t>();
    if (!keys.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("expansion keys: ", keys.status().message()));
    }
    keys_ = std::make_shared<const he::GaloisKeys>(*std::move(keys));
    return absl::OkStatus();
  }

  std::shared_ptr<const he::GaloisKeys> keys() const { return keys_; }

 private:
  GaloisKeyCache::Upload upload_;  // its Hold keeps the session's charge until destroyed
  std::shared_ptr<const he::GaloisKeys> keys_;
};

class PackService final : public ServiceBase<rpc::LwePackServer> {
 public:
  // Everything must outlive the service.
  PackService(const PackTable& table, const embedding::Table& file, GaloisKeyCache& cache,
              BatchScheduler& scheduler, ServerStats& stats, const ConnectionPolicy& policy)
      : ServiceBase(table.name, stats, policy),
        table_(table),
        file_(file),
        cache_(cache),
        scheduler_(scheduler),
        session_(cache.Open()) {}
  ~PackService() { cache_.Close(session_); }

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> uploadGaloisKeys(UploadGaloisKeysContext context) override;
  kj::Promise<void> resumeGaloisKeys(ResumeGaloisKeysContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;

 private:
  const PackTable& table_;
  const embedding::Table& file_;
  GaloisKeyCache& cache_;
  BatchScheduler& scheduler_;
  const GaloisKeyCache::Session session_;
  uint64_t queued_ = 0;  // this connection's queries waiting for the worker
};

kj::Promise<void> PackService::config(ConfigContext context) {
  rpc::LwePackConfig::Builder config = context.getResults().initConfig();
  FillLweConfig(table_.server->config(), file_, table_.limits, 1, table_.backend, config.initLwe());
  const lattice::RingParams& ring = table_.server->ring().params();
  config.setLogN(static_cast<uint8_t>(ring.log_n));
  auto primes = config.initPrimes(static_cast<unsigned>(ring.primes.size()));
  for (size_t i = 0; i < ring.primes.size(); ++i) primes.set(i, ring.primes[i]);
  config.setSpecialPrime(ring.special);
  config.setExpansionKeyBytes(table_.key_bytes);
  config.setSecretCiphertextBytes(table_.ciphertext_bytes / table_.server->ciphertexts());
  config.setCiphertextsPerQuery(static_cast<uint32_t>(table_.server->ciphertexts()));
  config.setResponseBytes(table_.response_bytes);
  config.setMaxChunkBytes(table_.max_chunk_bytes);
  config.setMaxKeyBytes(table_.limits.max_galois_key_bytes);
  config.setSelectionBytes(table_.selection_bytes);
  return kj::READY_NOW;
}

kj::Promise<void> PackService::uploadGaloisKeys(UploadGaloisKeysContext context) {
  return ServeKeyUpload<KeysWork>(
      context, this, cache_, session_, scheduler_, table_.limits, table_.key_bytes,
      [this](const absl::Status& status) { Reject(status, "uploadGaloisKeys"); });
}

kj::Promise<void> PackService::resumeGaloisKeys(ResumeGaloisKeysContext context) {
  return ServeKeyResume(context, cache_, session_,
                        [this](const absl::Status& status) { Reject(status, "resumeGaloisKeys"); });
}

kj::Promise<void> PackService::answer(AnswerContext context) {
  const absl::Time arrival = absl::Now();
  auto params = context.getParams();
  if (absl::Status s = CheckCallWords(params.totalSize().wordCount, table_.limits); !s.ok())
    Reject(s, "answer");
  capnp::Data::Reader query = params.getQuery();
  capnp::Data::Reader ciphertext = params.getCiphertext();
  capnp::Data::Reader selection = params.getSelection();
  const uint64_t query_bytes = 4 * table_.server->query_words();
  if (query.size() != query_bytes || ciphertext.size() != table_.ciphertext_bytes ||
      selection.size() != table_.selection_bytes) {
    Reject(absl::InvalidArgumentError(absl::StrCat(
               "a query of ", query.size(), " bytes, a ciphertext of ", ciphertext.size(),
               " bytes and a selection of ", selection.size(), " bytes; this table's are ",
               query_bytes, ", ", table_.ciphertext_bytes, " and ", table_.selection_bytes)),
           "answer");
  }
  if (queued_ + 1 > table_.limits.max_queued_keys_per_connection) {
    Reject(absl::ResourceExhaustedError(absl::StrCat(
               "this connection already has ", queued_, " queries waiting (limit ",
               table_.limits.max_queued_keys_per_connection, " per connection); wait for answers")),
           "answer");
  }
  auto keys = cache_.Acquire(session_);
  if (!keys.ok()) Reject(keys.status(), "answer");
  std::vector<uint32_t> words(query.size() / 4);
  std::memcpy(words.data(), query.begin(), query.size());
  auto work = std::make_unique<AnswerWork>(
      std::move(words), std::vector<uint8_t>(ciphertext.begin(), ciphertext.end()),
      std::vector<uint8_t>(selection.begin(), selection.end()), *std::move(keys));
  context.releaseParams();
  ++queued_;
  // A client gone (or cancelling) drops its call: the scheduler then drops the query unanswered.
  context.allowCancellation();
  return scheduler_.Submit(std::move(work), this)
      .attach(kj::defer([this] { --queued_; }))
      .then([this, context, arrival](absl::StatusOr<std::unique_ptr<AnswerWork>> done) mutable {
        if (!done.ok()) Reject(done.status(), "answer");
        std::vector<uint8_t>& response = (*done)->response();
        auto results = context.getResults(capnp::MessageSize{response.size() / 8 + 64, 0});
        results.setResponse(capnp::Data::Reader(response.data(), response.size()));
        FillTableId(file_, results.initTable());
        stats_.RecordCall("answer", 1, absl::Now() - arrival);
      });
}

class LwePackProtocol final : public Protocol {
 public:
  LwePackProtocol(const ProtocolEnv& env, std::unique_ptr<PackTable> table)
      : env_(env),
        table_(std::move(table)),
        cache_(table_->limits.max_galois_key_bytes, table_->key_bytes, table_->parsed_key_bytes,
               table_->limits.key_resume),
        scheduler_([this](absl::Span<BatchItem* const> batch) { return Pass(batch); },
                   table_->limits, env.stats, "queries") {
    cache_.OnChange([&stats = env.stats](const KeyCacheCounts& c) { stats.SetKeyCache(c); });
  }

  std::string Describe() const override {
    const lattice::PackedServer& s = *table_->server;
    const lattice::RingContext& ring = s.ring();
    return absl::StrFormat(
        "protocol %s, %s; hint ready in %.2f s, packing matrix %d MiB (%d group(s)), engine "
        "%d MiB; ring N = %d, "
        "%d primes + special prime %d (%s); per lookup %d bytes up (query %d + ciphertexts %d + "
        "selection %d), %d bytes down; expansion keys %d bytes per session (%d bytes held while "
        "parsed), key memory %d bytes; product %s, expansion and packing %s, %d thread(s)",
        table_->name, lattice::ShapeSummary(s.config().shape), table_->hint_s,
        s.matrix().bytes() >> 20, s.matrix().groups(), s.packing_engine().host_bytes() >> 20,
        ring.n(), ring.k(), ring.params().special, ring.params().SecuritySource(),
        4 * s.query_words() + table_->ciphertext_bytes + table_->selection_bytes,
        4 * s.query_words(), table_->ciphertext_bytes, table_->selection_bytes,
        table_->response_bytes, table_->key_bytes, cache_.session_bytes(),
        table_->limits.max_galois_key_bytes, table_->backend, s.packing_engine().name(),
        env_.options.threads);
  }
  // Served until the process stops: this protocol does not roll tables.
  std::vector<std::shared_ptr<const embedding::Table>> ServedTables() const override {
    return {env_.table};
  }
  kj::Own<capnp::Capability::Server> NewConnection(const ConnectionPolicy& policy) override {
    return kj::heap<PackService>(*table_, *env_.table, cache_, scheduler_, env_.stats, policy);
  }
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) override {
    scheduler_.Stop(wait_scope, timer);
  }

 private:
  // Key uploads are parsed one by one; the lookups share one AnswerBatch.
  std::vector<absl::Status> Pass(absl::Span<BatchItem* const> batch) {
    std::vector<absl::Status> statuses(batch.size());
    std::vector<AnswerWork*> lookups;
    std::vector<size_t> at;
    std::vector<lattice::PackedRequest> requests;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (auto* lookup = dynamic_cast<AnswerWork*>(batch[i])) {
        lookups.push_back(lookup);
        at.push_back(i);
        requests.push_back(lookup->request());
      } else {
        statuses[i] = static_cast<KeysWork*>(batch[i])->Run(*table_);
      }
    }
    std::vector<absl::StatusOr<std::vector<uint8_t>>> responses =
        table_->server->AnswerBatch(requests);
    for (size_t j = 0; j < lookups.size(); ++j) {
      statuses[at[j]] = lookups[j]->Finish(std::move(responses[j]));
    }
    return statuses;
  }

  const ProtocolEnv env_;
  std::unique_ptr<PackTable> table_;
  GaloisKeyCache cache_;  // outlives the scheduler's items (their Holds)
  BatchScheduler scheduler_;
};

// The limits every lookup and key upload must be able to meet.
absl::Status CheckLimits(const PackTable& t) {
  const ServerLimits& l = t.limits;
  const uint64_t up = 4 * t.server->query_words() + t.ciphertext_bytes + t.selection_bytes;
  if (std::max(up, t.response_bytes) + kEnvelopeBytes > l.max_message_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a lookup of this table sends ", up, " bytes and gets ", t.response_bytes,
                     " bytes: --max_message_bytes must be at least ",
                     std::max(up, t.response_bytes) + kEnvelopeBytes));
  }
  if (l.max_queued_keys == 0 || l.max_queued_keys_per_connection == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queued_ciphertexts and --max_queued_ciphertexts_per_connection must "
                     "be at least 1 (",
                     t.name, " counts queries with them)"));
  }
  const uint64_t session = t.key_bytes + t.parsed_key_bytes;
  if (session > l.max_galois_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("one session's expansion keys take ", session,
                                                   " bytes while uploaded and parsed: "
                                                   "--max_galois_key_bytes must be at least that"));
  }
  return absl::OkStatus();
}

// name: lwe-exppack-s, lwe-hybrid or lwe-double-pack (over SimplePIR), or lwe-exppack-d (over
// DoublePIR).
absl::StatusOr<std::unique_ptr<Protocol>> CreatePacked(const ProtocolEnv& env, const char* name) {
  const bool doubled = std::string_view(name) == "lwe-exppack-d";
  const lattice::Protocol lwe =
      doubled ? lattice::Protocol::kDoublePir : lattice::Protocol::kSimplePir;
  const lattice::RingParams ring = lattice::RingParams::Default();
  const std::string security = ring.SecuritySource();
  if (absl::StartsWith(security, "no security claim")) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol ", name, " refuses its ring parameters: ", security));
  }
  // The shape that counts the packed answer (one 32 KiB ciphertext where the query stays small);
  // DoublePIR's answer packs into R ciphertexts whatever its shape, and no hint travels: the
  // shape that minimises the query.
  lattice::ShapeOptions shape;
  if (doubled) {
    shape.lookups_per_hint = uint64_t{1} << 40;
  } else {
    shape.packed_ring_n = static_cast<uint32_t>(ring.n());
  }
  // A pass takes up to --threads queries (AnswerBatch gives each its own thread; more would only
  // add latency), which share one product: its kernels are measured (or its device buffers
  // sized) for that batch now, not on the first busy pass.
  const uint32_t pass_queries = static_cast<uint32_t>(std::max(1, env.options.threads));
  auto prepared = PrepareLweServer(lwe, env, name, pass_queries, shape);
  if (!prepared.ok()) return prepared.status();
  auto table = std::make_unique<PackTable>();
  table->name = name;
  table->backend = std::string(prepared->server->database_product().name());
  table->hint_s = prepared->hint_s;
  absl::StatusOr<std::unique_ptr<lattice::PackedServer>> server;
  if (doubled) {
    server = lattice::PackedDoubleServer::Create(std::move(prepared->server), ring);
  } else if (std::string_view(name) == "lwe-double-pack") {
    server = lattice::DoublePackedServer::Create(std::move(prepared->server), ring);
  } else {
    server = lattice::PackedSimpleServer::Create(std::move(prepared->server), ring,
                                                 std::string_view(name) == "lwe-hybrid"
                                                     ? lattice::PackedProtocol::kHybrid
                                                     : lattice::PackedProtocol::kExpPackS);
  }
  if (!server.ok()) return server.status();
  table->server = *std::move(server);
  const lattice::RingContext& ctx = table->server->ring();
  table->key_bytes = table->server->key_bytes();
  table->ciphertext_bytes = table->server->ciphertexts() * lattice::SecretCiphertextBytes(ctx);
  table->selection_bytes = table->server->selection_bytes();
  table->response_bytes = table->server->response_bytes();
  // A session's keys, made once here (the throwaway secret is wiped with the key), to size them
  // parsed: a device keeps their 64-bit words, and GaloisKeyCache charges them as parsed once the
  // engine is chosen (ParseKeys then leaves out the 32-bit copies that only key switching on this
  // CPU reads).
  std::vector<uint8_t> sample_keys;
  uint64_t wide_key_bytes = 0;
  {
    const he::SecretKey key = he::GenerateSecretKey(*ctx.expansion());
    auto bytes = table->server->MakeKeys(key);
    if (!bytes.ok()) return bytes.status();
    sample_keys = *std::move(bytes);
    auto keys = table->server->ParseKeys(sample_keys);
    if (!keys.ok()) return keys.status();
    for (auto& [element, parsed] : keys->keys) {
      parsed.b32 = std::vector<uint32_t>();
      parsed.a32 = std::vector<uint32_t>();
    }
    wide_key_bytes = GaloisKeyCache::ParsedBytes(*keys);
  }
  // The expansions, packing sums and switches run where --backend says, as the product does; a
  // device keeps the keys of as many sessions as the key memory holds (at most 256, 2 GB).
  {
    const uint64_t held =
        env.options.limits.max_galois_key_bytes / std::max<uint64_t>(1, wide_key_bytes);
    auto engine = CreatePackingEngine(env.options.backend, ctx, table->server->matrix(),
                                      std::clamp<uint64_t>(held, 1, 256), env.options.gpus);
    if (!engine.ok()) return engine.status();
    if (*engine != nullptr) table->server->set_packing_engine(*std::move(engine));
    table->server->packing_engine().Prepare();  // the CPU's folded matrix, before any lookup
  }
  {
    auto keys = table->server->ParseKeys(sample_keys);
    if (!keys.ok()) return keys.status();
    table->parsed_key_bytes = GaloisKeyCache::ParsedBytes(*keys);
  }
  table->limits = env.options.limits;
  table->max_chunk_bytes = table->limits.max_message_bytes - kEnvelopeBytes;
  // Queues in queries, bounded like bfv-bag's query ciphertexts; passes as above.
  table->limits.max_queued_keys = env.options.limits.max_queued_ciphertexts;
  table->limits.max_queued_keys_per_connection =
      env.options.limits.max_queued_ciphertexts_per_connection;
  table->limits.max_batch_keys = pass_queries;
  if (absl::Status s = CheckLimits(*table); !s.ok()) return s;
  Log("lwe_pack_ready",
      absl::StrFormat("%s: packing matrix of %d group(s) ready; ring security: %s", name,
                      table->server->matrix().groups(), security));
  return std::make_unique<LwePackProtocol>(env, std::move(table));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Protocol>> CreateLwePackProtocol(const ProtocolEnv& env) {
  return CreatePacked(env, "lwe-exppack-s");
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweHybridProtocol(const ProtocolEnv& env) {
  return CreatePacked(env, "lwe-hybrid");
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweExpPackDProtocol(const ProtocolEnv& env) {
  return CreatePacked(env, "lwe-exppack-d");
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweDoublePackProtocol(const ProtocolEnv& env) {
  return CreatePacked(env, "lwe-double-pack");
}

}  // namespace veil::server
