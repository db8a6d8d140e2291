#include "server/bfv_bag.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "pir/he/bag.h"
#include "pir/he/serialization.h"
#include "server/galois_cache.h"
#include "server/key_upload.h"
#include "server/scheduler.h"

namespace veil::server {
namespace {

constexpr char kProtocolName[] = "bfv-bag";
// Room for a call's Cap'n Proto envelope (pointers, the offset, the list header) beside its data.
constexpr uint64_t kEnvelopeBytes = 1024;

// The encoded table and what every session is checked against; read-only once made.
struct BagTable {
  std::shared_ptr<const he::BfvContext> ctx;
  std::unique_ptr<he::BagServer> server;
  std::vector<uint8_t> info_bytes;  // he::SerializeBagTableInfo
  he::BagSizes sizes;               // of one session
  std::vector<uint32_t> elements;   // the Galois elements the product needs, increasing
  uint64_t parsed_key_bytes = 0;    // one session's keys once parsed
  uint64_t max_chunk_bytes = 0;
  int log_n = 0;
  int threads = 1;
};

// One call's work on the scheduler's worker.
class BagWork : public BatchItem {
 public:
  virtual absl::Status Run(const BagTable& table) = 0;
};

// An answer: parse the query, multiply, serialize Enc(T^T w) compressed.
class AnswerWork final : public BagWork {
 public:
  AnswerWork(std::vector<uint8_t> query, GaloisKeyCache::Keys keys, size_t blocks)
      : query_(std::move(query)), keys_(std::move(keys)), blocks_(blocks) {}
  size_t cost() const override { return blocks_; }

  absl::Status Run(const BagTable& table) override {
    absl::StatusOr<he::BagQuery> query =
        he::ParseBagQuery(*table.ctx, query_, blocks_, table.threads);
    query_ = std::vector<uint8_t>();
    if (!query.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("query: ", query.status().message()));
    }
    if (query->blocks.size() != blocks_) {
      return absl::InvalidArgumentError(absl::StrCat("a query of ", query->blocks.size(),
                                                     " ciphertexts; this table takes ", blocks_));
    }
    absl::StatusOr<he::CompressedCiphertext> answer =
        table.server->Answer(*query, *keys_.keys, table.threads);
    if (!answer.ok()) return answer.status();
    absl::StatusOr<std::vector<uint8_t>> bytes =
        he::SerializeCompressedCiphertext(*table.ctx, *answer);
    if (!bytes.ok()) return bytes.status();
    answer_ = *std::move(bytes);
    return absl::OkStatus();
  }

  std::vector<uint8_t>& answer() { return answer_; }

 private:
  std::vector<uint8_t> query_;
  GaloisKeyCache::Keys keys_;  // held (not evicted) until this item is destroyed, on the loop
  size_t blocks_;
  std::vector<uint8_t> answer_;
};

// A complete key upload: parse and check it against the rotations the table needs.
class KeysWork final : public BagWork {
 public:
  explicit KeysWork(GaloisKeyCache::Upload upload) : upload_(std::move(upload)) {}
  size_t cost() const override { return 1; }

  absl::Status Run(const BagTable& table) override {
    absl::StatusOr<he::GaloisKeys> keys = he::ParseGaloisKeys(*table.ctx, upload_.bytes);
    upload_.bytes = std::vector<uint8_t>();
    if (!keys.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("Galois keys: ", keys.status().message()));
    }
    std::vector<uint32_t> held;
    for (const auto& [element, key] : keys->keys) held.push_back(element);
    if (held != table.elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("the Galois keys are for elements {", absl::StrJoin(held, ", "),
                       "}; this table's product rotates by elements {",
                       absl::StrJoin(table.elements, ", "), "}"));
    }
    keys_ = std::make_shared<const he::GaloisKeys>(*std::move(keys));
    return absl::OkStatus();
  }

  std::shared_ptr<const he::GaloisKeys> keys() const { return keys_; }

 private:
  GaloisKeyCache::Upload upload_;  // its Hold keeps the session's charge until destroyed
  std::shared_ptr<const he::GaloisKeys> keys_;
};

class BagService final : public ServiceBase<rpc::BagServer> {
 public:
  // Everything must outlive the service.
  BagService(const BagTable& table, const embedding::Table& file, const ServerLimits& limits,
             GaloisKeyCache& cache, BatchScheduler& scheduler, ServerStats& stats,
             const ConnectionPolicy& policy)
      : ServiceBase(kProtocolName, stats, policy),
        table_(table),
        file_(file),
        limits_(limits),
        cache_(cache),
        scheduler_(scheduler),
        session_(cache.Open()) {}
  ~BagService() { cache_.Close(session_); }

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> uploadGaloisKeys(UploadGaloisKeysContext context) override;
  kj::Promise<void> resumeGaloisKeys(ResumeGaloisKeysContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;

 private:
  const BagTable& table_;
  const embedding::Table& file_;
  const ServerLimits limits_;
  GaloisKeyCache& cache_;
  BatchScheduler& scheduler_;
  const GaloisKeyCache::Session session_;
  uint64_t queued_ = 0;  // this connection's query ciphertexts waiting for the worker
};

kj::Promise<void> BagService::config(ConfigContext context) {
  rpc::BagConfig::Builder config = context.getResults().initConfig();
  FillTableId(file_, config.initTable());
  config.setRows(file_.rows());
  config.setDim(file_.dim());
  config.setFracBits(static_cast<uint8_t>(file_.frac_bits()));
  config.setLogN(static_cast<uint8_t>(table_.log_n));
  config.setTableInfo(capnp::Data::Reader(table_.info_bytes.data(), table_.info_bytes.size()));
  config.setQueryBlocks(static_cast<uint32_t>(table_.server->plan().blocks()));
  config.setGaloisKeyBytes(table_.sizes.galois_key_bytes);
  config.setMaxChunkBytes(table_.max_chunk_bytes);
  rpc::BagLimits::Builder limits = config.initLimits();
  limits.setMaxMessageBytes(limits_.max_message_bytes);
  limits.setMaxQueuedCiphertexts(limits_.max_queued_ciphertexts);
  limits.setMaxQueuedCiphertextsPerConnection(limits_.max_queued_ciphertexts_per_connection);
  limits.setMaxGaloisKeyBytes(limits_.max_galois_key_bytes);
  config.setBackend("cpu");
  config.setRowTag(static_cast<uint8_t>(file_.row_tag()));
  config.setRoundedQueries(true);
  return kj::READY_NOW;
}

kj::Promise<void> BagService::uploadGaloisKeys(UploadGaloisKeysContext context) {
  return ServeKeyUpload<KeysWork>(
      context, this, cache_, session_, scheduler_, limits_, table_.sizes.galois_key_bytes,
      [this](const absl::Status& status) { Reject(status, "uploadGaloisKeys"); });
}

kj::Promise<void> BagService::resumeGaloisKeys(ResumeGaloisKeysContext context) {
  return ServeKeyResume(context, cache_, session_,
                        [this](const absl::Status& status) { Reject(status, "resumeGaloisKeys"); });
}

kj::Promise<void> BagService::answer(AnswerContext context) {
  const absl::Time arrival = absl::Now();
  auto params = context.getParams();
  if (absl::Status s = CheckCallWords(params.totalSize().wordCount, limits_); !s.ok())
    Reject(s, "answer");
  const size_t blocks = table_.server->plan().blocks();
  if (queued_ + blocks > limits_.max_queued_ciphertexts_per_connection) {
    Reject(absl::ResourceExhaustedError(absl::StrCat("this connection already has ", queued_,
                                                     " query ciphertexts waiting (limit ",
                                                     limits_.max_queued_ciphertexts_per_connection,
                                                     " per connection); wait for answers first")),
           "answer");
  }
  auto keys = cache_.Acquire(session_);
  if (!keys.ok()) Reject(keys.status(), "answer");
  capnp::Data::Reader query = params.getQuery();
  auto work = std::make_unique<AnswerWork>(std::vector<uint8_t>(query.begin(), query.end()),
                                           *std::move(keys), blocks);
  context.releaseParams();
  queued_ += blocks;
  // A client gone (or cancelling) drops its call: the scheduler then drops the query unanswered.
  context.allowCancellation();
  return scheduler_.Submit(std::move(work), this)
      .attach(kj::defer([this, blocks] { queued_ -= blocks; }))
      .then([this, context, arrival](absl::StatusOr<std::unique_ptr<AnswerWork>> done) mutable {
        if (!done.ok()) Reject(done.status(), "answer");
        std::vector<uint8_t>& answer = (*done)->answer();
        auto results = context.getResults(capnp::MessageSize{answer.size() / 8 + 64, 0});
        results.setAnswer(capnp::Data::Reader(answer.data(), answer.size()));
        FillTableId(file_, results.initTable());
        stats_.RecordCall("answer", 1, absl::Now() - arrival);
      });
}

class BfvBagProtocol final : public Protocol {
 public:
  BfvBagProtocol(const ProtocolEnv& env, std::unique_ptr<BagTable> table, ServerLimits scheduling)
      : env_(env),
        table_(std::move(table)),
        cache_(env.options.limits.max_galois_key_bytes, table_->sizes.galois_key_bytes,
               table_->parsed_key_bytes, env.options.limits.key_resume),
        scheduler_([this](absl::Span<BatchItem* const> batch) { return Pass(batch); }, scheduling,
                   env.stats, "query ciphertexts") {
    cache_.OnChange([&stats = env.stats](const KeyCacheCounts& c) { stats.SetKeyCache(c); });
  }

  std::string Describe() const override {
    const he::MatVecPlan& plan = table_->server->plan();
    return absl::StrCat(
        "protocol bfv-bag, N = ", table_->ctx->n(), " (", table_->ctx->params().SecuritySource(),
        "), table encoded in ", table_->server->encoded_bytes() >> 20, " MiB (", plan.blocks(),
        " block(s), ", plan.diagonals(), " diagonals = ", plan.baby(), " x ", plan.giant(), "), ",
        table_->sizes.galois_keys, " Galois keys per session (", table_->sizes.galois_key_bytes,
        " bytes up, ", cache_.session_bytes(), " bytes held while parsed), key memory ",
        env_.options.limits.max_galois_key_bytes, " bytes, ", table_->threads, " thread(s)");
  }
  // Served until the process stops: these protocols do not roll tables.
  std::vector<std::shared_ptr<const embedding::Table>> ServedTables() const override {
    return {env_.table};
  }
  kj::Own<capnp::Capability::Server> NewConnection(const ConnectionPolicy& policy) override {
    return kj::heap<BagService>(*table_, *env_.table, env_.options.limits, cache_, scheduler_,
                                env_.stats, policy);
  }
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) override {
    scheduler_.Stop(wait_scope, timer);
  }

 private:
  std::vector<absl::Status> Pass(absl::Span<BatchItem* const> batch) {
    std::vector<absl::Status> statuses;
    for (BatchItem* item : batch) statuses.push_back(static_cast<BagWork*>(item)->Run(*table_));
    return statuses;
  }

  const ProtocolEnv env_;
  std::unique_ptr<BagTable> table_;
  GaloisKeyCache cache_;  // outlives the scheduler's items (their Holds)
  BatchScheduler scheduler_;
};

// The table's fixed-point values and tag columns (row_words per row), row-major without the
// file's row padding.
std::vector<int32_t> FixedValues(const embedding::Table& file) {
  std::vector<int32_t> values;
  values.reserve(file.rows() * file.row_words());
  for (uint64_t r = 0; r < file.rows(); ++r) {
    for (uint32_t word : file.row(r)) values.push_back(static_cast<int32_t>(word));
  }
  return values;
}

// The limits every query and key upload must be able to meet.
absl::Status CheckLimits(const BagTable& t, const ServerLimits& l) {
  const size_t blocks = t.server->plan().blocks();
  if (t.sizes.query_bytes + kEnvelopeBytes > l.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a query of this table is ", t.sizes.query_bytes,
                                                   " bytes: --max_message_bytes must be at "
                                                   "least ",
                                                   t.sizes.query_bytes + kEnvelopeBytes));
  }
  if (blocks > l.max_queued_ciphertexts_per_connection || blocks > l.max_queued_ciphertexts) {
    return absl::InvalidArgumentError(
        absl::StrCat("a query of this table is ", blocks,
                     " ciphertexts: --max_queued_ciphertexts and "
                     "--max_queued_ciphertexts_per_connection must be at least that"));
  }
  const uint64_t session = t.sizes.galois_key_bytes + t.parsed_key_bytes;
  if (session > l.max_galois_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("one session's Galois keys take ", session,
                                                   " bytes while uploaded and parsed: "
                                                   "--max_galois_key_bytes must be at least that"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Protocol>> CreateBfvBagProtocol(const ProtocolEnv& env) {
  const embedding::Table& file = *env.table;
  if (file.format() != embedding::RowFormat::kFixed32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "protocol bfv-bag serves fixed-point tables (its pooled sums are exact integers); this "
        "table is ",
        embedding::RowFormatName(file.format()),
        ": build it with veil table build --format=fixed"));
  }
  if (file.row_tag() != embedding::RowTag::kNone &&
      file.row_tag() != embedding::RowTag::kLinearMac61) {
    return absl::InvalidArgumentError(absl::StrCat(
        "protocol bfv-bag cannot serve a table whose rows carry ",
        embedding::RowTagName(file.row_tag()),
        " tags: a sum of such tags checks nothing, so its clients could not check a pooled sum. "
        "Build it with veil table build --row-tag-kind=4 (a linear MAC that pooled sums keep), "
        "or --row-tags=false"));
  }
  auto params = he::BagParams(env.options.bfv_log_n);
  if (!params.ok()) return params.status();
  auto ctx = he::BfvContext::Create(*params);
  if (!ctx.ok()) return ctx.status();
  auto table = std::make_unique<BagTable>();
  table->ctx = *std::move(ctx);
  table->log_n = env.options.bfv_log_n;
  table->threads = env.options.threads;
  // Tag columns (kind 4) are pooled with the data: the product has row_words columns.
  auto server = he::BagServer::Create(table->ctx, FixedValues(file), file.rows(), file.row_words(),
                                      env.options.threads);
  if (!server.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol bfv-bag cannot serve this table: ", server.status().message()));
  }
  table->server = *std::move(server);
  table->info_bytes = he::SerializeBagTableInfo(table->server->info());
  const he::MatVecPlan& plan = table->server->plan();
  table->sizes = he::SizesOf(*table->ctx, plan);
  table->elements = plan.GaloisElements();
  std::sort(table->elements.begin(), table->elements.end());
  table->elements.erase(std::unique(table->elements.begin(), table->elements.end()),
                        table->elements.end());
  // A key-switching key holds b and a, each k x (k + 1) x N residues (pir/he/bfv.h).
  const uint64_t k = table->ctx->q_size();
  table->parsed_key_bytes =
      table->elements.size() * 2 * k * (k + 1) * table->ctx->n() * sizeof(uint64_t);
  table->max_chunk_bytes = env.options.limits.max_message_bytes - kEnvelopeBytes;
  if (absl::Status s = CheckLimits(*table, env.options.limits); !s.ok()) return s;

  // One query per pass (see bfv_bag.h); the queue is bounded in query ciphertexts.
  ServerLimits scheduling = env.options.limits;
  scheduling.max_queued_keys = env.options.limits.max_queued_ciphertexts;
  scheduling.max_batch_keys = 1;
  return std::make_unique<BfvBagProtocol>(env, std::move(table), scheduling);
}

}  // namespace veil::server
