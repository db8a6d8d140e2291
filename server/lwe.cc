#include "server/lwe.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/server.h"
#include "server/backend_select.h"
#include "server/log.h"
#include "server/scheduler.h"

namespace veil::server {
namespace {

// Queries and answers travel as little-endian words, copied as they are.
static_assert(std::endian::native == std::endian::little);

// Hint bytes a connection may be sent, in hints (LweService::hint).
constexpr uint64_t kHintDownloadsPerConnection = 2;
// Room for a call's Cap'n Proto envelope (pointers, the digest, the list header) beside its data.
constexpr uint64_t kEnvelopeBytes = 1024;

// The protocol instance every connection shares; read-only once made.
struct LweTable {
  std::string name;  // "lwe-simple" or "lwe-double"
  std::unique_ptr<lattice::LweServer> server;
  uint64_t query_words = 0;
  uint64_t answer_words = 0;
};

// One answer call's queries, and room for their answers.
class QueriesWork final : public BatchItem {
 public:
  QueriesWork(std::vector<uint32_t> queries, size_t count)
      : queries_(std::move(queries)), count_(count) {}
  size_t cost() const override { return count_; }

  std::vector<uint32_t>& queries() { return queries_; }
  std::vector<uint32_t>& answers() { return answers_; }

 private:
  std::vector<uint32_t> queries_;
  size_t count_;
  std::vector<uint32_t> answers_;
};

absl::Status StaleHint(capnp::Data::Reader digest, const lattice::Digest& current) {
  if (digest.size() == current.size() &&
      std::memcmp(digest.begin(), current.data(), current.size()) == 0) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "stale hint: the hint digest of this call is not the one of the hint this server serves "
      "now; fetch its config and hint again");
}

class LweService final : public ServiceBase<rpc::LweServer> {
 public:
  // Everything must outlive the service.
  LweService(const LweTable& table, const embedding::Table& file, const ServerLimits& limits,
             BatchScheduler& scheduler, ServerStats& stats, const ConnectionPolicy& policy)
      : ServiceBase(table.name, stats, policy),
        table_(table),
        file_(file),
        limits_(limits),
        scheduler_(scheduler) {}

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> hint(HintContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;

 private:
  // The number of queries in `bytes` of queries, or INVALID_ARGUMENT.
  absl::StatusOr<size_t> CountQueries(size_t bytes) const;

  const LweTable& table_;
  const embedding::Table& file_;
  const ServerLimits limits_;
  BatchScheduler& scheduler_;
  uint64_t hint_bytes_sent_ = 0;  // hint chunks sent on this connection
  uint64_t queued_ = 0;           // this connection's queries waiting for the worker
  uint32_t calls_ = 0;            // this connection's answer calls waiting
};

kj::Promise<void> LweService::config(ConfigContext context) {
  FillLweConfig(table_.server->config(), file_, limits_, limits_.max_keys_per_call,
                table_.server->database_product().name(), context.getResults().initConfig());
  return kj::READY_NOW;
}

kj::Promise<void> LweService::hint(HintContext context) {
  auto params = context.getParams();
  if (absl::Status s = CheckCallWords(params.totalSize().wordCount, limits_); !s.ok())
    Reject(s, "hint");
  if (absl::Status s = StaleHint(params.getHintDigest(), table_.server->config().hint_digest);
      !s.ok()) {
    Reject(s, "hint");
  }
  auto chunk = table_.server->HintChunk(params.getChunk());
  if (!chunk.ok()) Reject(chunk.status(), "hint");
  // A chunk request is ~100 bytes and its reply 1 MiB, and replies wait in memory until the
  // client reads them: a connection that asked for the hint more than kHintDownloadsPerConnection
  // times is refused further chunks (a client downloads it once; a resumed download is a new
  // connection), so that no connection can make the server buffer without bound.
  const uint64_t budget = kHintDownloadsPerConnection * table_.server->hint_blob().size();
  if (hint_bytes_sent_ + chunk->size() > budget) {
    Reject(absl::ResourceExhaustedError(absl::StrCat(
               "this connection has already been sent ", hint_bytes_sent_, " bytes of hint (",
               kHintDownloadsPerConnection, " times the hint); reconnect to download it again")),
           "hint");
  }
  hint_bytes_sent_ += chunk->size();
  auto results = context.getResults(capnp::MessageSize{chunk->size() / 8 + 8, 0});
  results.setData(capnp::Data::Reader(chunk->data(), chunk->size()));
  return kj::READY_NOW;
}

absl::StatusOr<size_t> LweService::CountQueries(size_t bytes) const {
  const uint64_t query_bytes = 4 * table_.query_words;
  if (bytes == 0 || bytes % query_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queries of ", bytes, " bytes; a query of this table (", table_.name, ") is ", query_bytes,
        " bytes, and a call holds 1 to ", limits_.max_keys_per_call, " of them"));
  }
  const uint64_t count = bytes / query_bytes;
  if (count > limits_.max_keys_per_call) {
    return absl::InvalidArgumentError(
        absl::StrCat(count, " queries in one call; the limit is ", limits_.max_keys_per_call));
  }
  // The reply is bounded like a call (Cap'n Proto refuses to send more than the peer reads).
  if (count * 4 * table_.answer_words + kEnvelopeBytes > limits_.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        count, " queries in one call would be answered with ", count * 4 * table_.answer_words,
        " bytes; the limit is ", limits_.max_message_bytes, " bytes per message"));
  }
  return count;
}

kj::Promise<void> LweService::answer(AnswerContext context) {
  const absl::Time arrival = absl::Now();
  auto params = context.getParams();
  if (absl::Status s = CheckCallWords(params.totalSize().wordCount, limits_); !s.ok())
    Reject(s, "answer");
  if (absl::Status s = StaleHint(params.getHintDigest(), table_.server->config().hint_digest);
      !s.ok()) {
    Reject(s, "answer");
  }
  capnp::Data::Reader bytes = params.getQueries();
  absl::StatusOr<size_t> count = CountQueries(bytes.size());
  if (!count.ok()) Reject(count.status(), "answer");
  if (calls_ >= limits_.max_calls_per_connection) {
    Reject(absl::ResourceExhaustedError(absl::StrCat(
               "this connection already has ", calls_, " calls waiting (limit ",
               limits_.max_calls_per_connection, " per connection); wait for answers")),
           "answer");
  }
  if (queued_ + *count > limits_.max_queued_keys_per_connection) {
    Reject(absl::ResourceExhaustedError(absl::StrCat(
               "this connection already has ", queued_, " queries waiting (limit ",
               limits_.max_queued_keys_per_connection, " per connection); wait for answers first")),
           "answer");
  }
  std::vector<uint32_t> queries(bytes.size() / 4);
  std::memcpy(queries.data(), bytes.begin(), bytes.size());
  context.releaseParams();
  const size_t n = *count;
  queued_ += n;
  ++calls_;
  // A client gone (or cancelling) drops its call: the scheduler then drops the queries unanswered.
  context.allowCancellation();
  return scheduler_.Submit(std::make_unique<QueriesWork>(std::move(queries), n), this)
      .attach(kj::defer([this, n] {
        queued_ -= n;
        --calls_;
      }))
      .then([this, context, arrival, n](absl::StatusOr<std::unique_ptr<QueriesWork>> done) mutable {
        if (!done.ok()) Reject(done.status(), "answer");
        const std::vector<uint32_t>& answers = (*done)->answers();
        auto results = context.getResults(
            capnp::MessageSize{answers.size() / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        results.setAnswers(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(answers.data()),
                                               4 * answers.size()));
        FillTableId(file_, results.initTable());
        stats_.RecordCall("answer", n, absl::Now() - arrival);
      });
}

class LweProtocol final : public Protocol {
 public:
  LweProtocol(const ProtocolEnv& env, std::unique_ptr<LweTable> table, double hint_s)
      : env_(env),
        table_(std::move(table)),
        hint_s_(hint_s),
        scheduler_([this](absl::Span<BatchItem* const> batch) { return Pass(batch); },
                   env.options.limits, env.stats, "queries") {}

  std::string Describe() const override {
    const lattice::LweServer& s = *table_->server;
    const lattice::LweServerMemory m = s.memory();
    return absl::StrFormat(
        "protocol %s, %s; hint %s in %.2f s%s; memory: database %d MiB, hint %d MiB, server "
        "digits %d MiB, A2 %d MiB; product %s, %d thread(s), batches up to %d queries / %s",
        table_->name, lattice::ShapeSummary(s.shape()),
        s.hint_note().empty() ? "read from its file" : "computed", hint_s_,
        s.hint_note().empty() ? "" : absl::StrCat(" (", s.hint_note(), ")"), m.database >> 20,
        m.hint_blob >> 20, m.server_digits >> 20, m.a2 >> 20, s.database_product().name(),
        env_.options.threads, env_.options.limits.max_batch_keys,
        absl::FormatDuration(env_.options.limits.max_wait));
  }
  // Served until the process stops: these protocols do not roll tables.
  std::vector<std::shared_ptr<const embedding::Table>> ServedTables() const override {
    return {env_.table};
  }
  kj::Own<capnp::Capability::Server> NewConnection(const ConnectionPolicy& policy) override {
    return kj::heap<LweService>(*table_, *env_.table, env_.options.limits, scheduler_, env_.stats,
                                policy);
  }
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) override {
    scheduler_.Stop(wait_scope, timer);
  }

 private:
  // One product for every waiting query (the batch's items concatenated); the sizes were
  // checked on arrival, so an error here is the product's and fails the whole pass.
  std::vector<absl::Status> Pass(absl::Span<BatchItem* const> batch) {
    size_t total = 0;
    for (BatchItem* item : batch) total += item->cost();
    const uint64_t qw = table_->query_words, aw = table_->answer_words;
    std::vector<uint32_t> queries;
    std::vector<uint32_t> joined_answers;
    absl::Span<const uint32_t> all_queries;
    if (batch.size() == 1) {
      all_queries = static_cast<QueriesWork*>(batch[0])->queries();
    } else {
      queries.reserve(total * qw);
      for (BatchItem* item : batch) {
        const std::vector<uint32_t>& q = static_cast<QueriesWork*>(item)->queries();
        queries.insert(queries.end(), q.begin(), q.end());
      }
      all_queries = queries;
    }
    joined_answers.resize(total * aw);
    absl::Status status = table_->server->Answer(all_queries, static_cast<int>(total),
                                                 absl::MakeSpan(joined_answers));
    std::vector<absl::Status> statuses(batch.size(), status);
    if (!status.ok()) return statuses;
    size_t next = 0;
    for (BatchItem* item : batch) {
      auto* work = static_cast<QueriesWork*>(item);
      const size_t words = work->cost() * aw;
      work->queries() = std::vector<uint32_t>();
      if (batch.size() == 1) {
        work->answers() = std::move(joined_answers);
      } else {
        work->answers().assign(joined_answers.begin() + next,
                               joined_answers.begin() + next + words);
      }
      next += words;
    }
    return statuses;
  }

  const ProtocolEnv env_;
  std::unique_ptr<LweTable> table_;
  const double hint_s_;
  BatchScheduler scheduler_;
};

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweProtocol(lattice::Protocol protocol,
                                                            const ProtocolEnv& env) {
  const ServerOptions& o = env.options;
  auto table = std::make_unique<LweTable>();
  table->name = absl::StrCat("lwe-", std::string(lattice::ProtocolName(protocol)));
  // A pass holds at most max_batch_keys - 1 waiting queries and one more call (items are never
  // split).
  auto prepared = PrepareLweServer(protocol, env, table->name,
                                   o.limits.max_batch_keys + o.limits.max_keys_per_call);
  if (!prepared.ok()) return prepared.status();
  table->server = std::move(prepared->server);
  table->query_words = table->server->shape().query_words();
  table->answer_words = table->server->shape().answer_words();
  const uint64_t largest =
      4 * std::max(table->query_words, table->answer_words);  // a query or its answer
  if (largest + kEnvelopeBytes > o.limits.max_message_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a query and its answer of this table (", table->name, ") are ",
                     4 * table->query_words, " and ", 4 * table->answer_words,
                     " bytes: --max_message_bytes must be at least ", largest + kEnvelopeBytes));
  }
  return std::make_unique<LweProtocol>(env, std::move(table), prepared->hint_s);
}

}  // namespace

absl::StatusOr<PreparedLweServer> PrepareLweServer(lattice::Protocol protocol,
                                                   const ProtocolEnv& env, const std::string& name,
                                                   uint32_t max_batch,
                                                   const lattice::ShapeOptions& shape_options) {
  const ServerOptions& o = env.options;
  lattice::LweServerOptions options;
  options.protocol = protocol;
  options.threads = o.threads;
  options.shape = shape_options;
  if (o.lwe_records_per_column != 0) options.shape.records_per_column = o.lwe_records_per_column;
  if (o.lwe_hint_cache) {
    // TABLE.<protocol name>.hint: lattice::HintPathFor's name for lwe-simple and lwe-double, and
    // a file of its own for a protocol that shapes the same table otherwise.
    options.hint_path =
        o.lwe_hint_file.empty() ? absl::StrCat(o.table_path, ".", name, ".hint") : o.lwe_hint_file;
  }
  // The shape is cheap and tells how long the hint will take; log it before the wait.
  absl::StatusOr<lattice::Shape> shape =
      lattice::ChooseShape(protocol, env.table->rows(), 4 * env.table->row_words(), options.shape);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol ", name, " cannot serve this table: ", shape.status().message()));
  }
  Log("hint_preparing",
      absl::StrCat(name, ": ", lattice::ShapeSummary(*shape), "; preparing the hint (",
                   options.hint_path.empty() ? std::string("computing it in memory")
                                             : absl::StrCat("file ", options.hint_path),
                   ") on ", o.threads, " thread(s)"));
  const absl::Time start = absl::Now();
  auto server = lattice::LweServer::FromTable(*env.table, options);
  if (!server.ok()) return server.status();
  PreparedLweServer prepared;
  prepared.hint_s = absl::ToDoubleSeconds(absl::Now() - start);
  Log("hint_ready", absl::StrFormat("%s: hint ready after %.2f s (%s)", name, prepared.hint_s,
                                    (*server)->hint_note().empty()
                                        ? std::string("read from its file, current")
                                        : absl::StrCat("computed: ", (*server)->hint_note())));
  prepared.server = *std::move(server);
  auto product = CreateLweProduct(o.backend, prepared.server->database().view(),
                                  static_cast<int>(max_batch), o.gpus);
  if (!product.ok()) return product.status();
  if (*product != nullptr) prepared.server->SetDatabaseProduct(*std::move(product));
  // The product picks its kernel per power-of-two batch size by measuring it the first time;
  // measure every size this server can batch now, so that no client's first query pays for it.
  if (prepared.server->database_product().on_host()) {
    const absl::Time kernels_start = absl::Now();
    const uint32_t largest = std::min(o.limits.max_batch_keys, max_batch);
    std::string kernels;
    for (uint32_t batch = 1;; batch = std::min(2 * batch, largest)) {
      absl::StrAppend(
          &kernels, kernels.empty() ? "" : ", ", batch, ": ",
          std::string(lattice::ProductKernelName(lattice::FastestKernelForBatch(batch))));
      if (batch == largest) break;
    }
    Log("lwe_kernels",
        absl::StrFormat("%s: product kernels by batch size (measured in %.2f s): %s", name,
                        absl::ToDoubleSeconds(absl::Now() - kernels_start), kernels));
  }
  return prepared;
}

void FillLweConfig(const lattice::LweConfig& c, const embedding::Table& file,
                   const ServerLimits& limits, uint32_t max_queries_per_call,
                   const std::string& backend, rpc::LweConfig::Builder config) {
  const lattice::Shape& s = c.shape;
  FillTableId(file, config.initTable());
  config.setRows(file.rows());
  config.setRowWords(file.row_words());
  config.setDim(file.dim());
  config.setRowFormat(static_cast<uint8_t>(file.format()));
  config.setFracBits(static_cast<uint8_t>(file.frac_bits()));
  config.setRowTag(static_cast<uint8_t>(file.row_tag()));
  config.setLweProtocol(static_cast<uint8_t>(s.protocol));
  config.setLweDimension(lattice::kLweDimension);
  config.setLogModulus(lattice::kLogModulus);
  config.setPlaintextModulus(s.plaintext_modulus);
  config.setSigmaMicro(lattice::kSigmaMicro);
  config.setRecordsPerColumn(s.records_per_column);
  config.setD0(s.d0);
  config.setD1(s.d1);
  config.setSeed(capnp::Data::Reader(c.seed.data(), c.seed.size()));
  config.setHintBytes(c.hint_bytes);
  config.setHintDigest(capnp::Data::Reader(c.hint_digest.data(), c.hint_digest.size()));
  config.setHintChunkBytes(c.hint_chunk_bytes);
  config.setQueryWords(s.query_words());
  config.setAnswerWords(s.answer_words());
  rpc::LweLimits::Builder l = config.initLimits();
  l.setMaxQueriesPerCall(max_queries_per_call);
  l.setMaxMessageBytes(limits.max_message_bytes);
  l.setMaxQueuedQueries(limits.max_queued_keys);
  l.setMaxQueuedQueriesPerConnection(limits.max_queued_keys_per_connection);
  config.setBackend(backend);
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweSimpleProtocol(const ProtocolEnv& env) {
  return CreateLweProtocol(lattice::Protocol::kSimplePir, env);
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateLweDoubleProtocol(const ProtocolEnv& env) {
  return CreateLweProtocol(lattice::Protocol::kDoublePir, env);
}

}  // namespace veil::server
