#include "server/dpf2.h"

#include <sodium.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dpf/params.h"
#include "pir/batch/bags.h"
#include "server/backend_select.h"
#include "server/key_batcher.h"
#include "server/request.h"
#include "server/table_set.h"

namespace veil::server {
namespace {

constexpr char kProtocolName[] = "dpf2";

class Dpf2Service final : public ServiceBase<rpc::PirServer> {
 public:
  // `tables`, `batcher` and `stats` must outlive the service.
  Dpf2Service(const ServerOptions& options, const TableSet& tables, std::string backend_name,
              KeyBatcher& batcher, ServerStats& stats, const ConnectionPolicy& policy)
      : ServiceBase(kProtocolName, stats, policy),
        party_(options.party),
        prgs_(options.prgs),
        tables_(tables),
        backend_name_(std::move(backend_name)),
        limits_(options.limits),
        batcher_(batcher) {}

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;
  kj::Promise<void> answerPooled(AnswerPooledContext context) override;

 private:
  // The table version a call names (`table`), or the newest when it names none.
  template <typename Params>
  std::shared_ptr<const ServedTable> FindTable(Params params, absl::string_view call);
  // Queues this connection's keys for `served` (with their row ranges, or none for the whole
  // table), within max_queued_keys_per_connection.
  kj::Promise<absl::StatusOr<KeyBatcher::Shares>> Submit(std::shared_ptr<const ServedTable> served,
                                                         std::vector<dpf::DpfKey> keys,
                                                         std::vector<pir::RowRange> ranges);
  // The reply's `table` (the version that answered) and `newestEpoch`.
  template <typename Results>
  void FillVersion(const ServedTable& served, Results& results) const {
    FillTableId(*served.table, results.initTable());
    results.setNewestEpoch(tables_.newest_epoch());
  }

  const int party_;
  const absl::Span<const dpf::Prg> prgs_;  // accepted (ServerOptions::prgs)
  const TableSet& tables_;
  const std::string backend_name_;
  const ServerLimits limits_;
  KeyBatcher& batcher_;
  uint64_t queued_keys_ = 0;  // this connection's keys waiting for the backend
  uint32_t calls_ = 0;        // this connection's calls waiting for the backend
};

template <typename Params>
std::shared_ptr<const ServedTable> Dpf2Service::FindTable(Params params, absl::string_view call) {
  absl::StatusOr<std::shared_ptr<const ServedTable>> served;
  if (params.hasTable()) {
    capnp::Data::Reader digest = params.getTable().getDigest();
    served = tables_.Find(params.getTable().getEpoch(),
                          absl::MakeConstSpan(digest.begin(), digest.size()));
  } else {
    served = tables_.Find(std::nullopt);
  }
  if (!served.ok()) Reject(served.status(), call);
  return *std::move(served);
}

kj::Promise<absl::StatusOr<KeyBatcher::Shares>> Dpf2Service::Submit(
    std::shared_ptr<const ServedTable> served, std::vector<dpf::DpfKey> keys,
    std::vector<pir::RowRange> ranges) {
  const size_t count = keys.size();
  if (calls_ >= limits_.max_calls_per_connection) {
    return absl::StatusOr<KeyBatcher::Shares>(absl::ResourceExhaustedError(
        absl::StrCat("this connection already has ", calls_, " calls waiting (limit ",
                     limits_.max_calls_per_connection, " per connection); wait for answers")));
  }
  if (queued_keys_ + count > limits_.max_queued_keys_per_connection) {
    return absl::StatusOr<KeyBatcher::Shares>(absl::ResourceExhaustedError(absl::StrCat(
        "this connection already has ", queued_keys_, " keys waiting (limit ",
        limits_.max_queued_keys_per_connection, " per connection); wait for answers first")));
  }
  queued_keys_ += count;
  ++calls_;
  // Released when the answer comes or the call is cancelled.
  return batcher_.Submit(BackendOf(std::move(served)), std::move(keys), std::move(ranges), this)
      .attach(kj::defer([this, count] {
        queued_keys_ -= count;
        --calls_;
      }));
}

kj::Promise<void> Dpf2Service::config(ConfigContext context) {
  // Every served version has the newest one's shape (TableSet).
  const std::vector<std::shared_ptr<const ServedTable>> served = tables_.Served();
  const embedding::Table& table = *served.back()->table;
  rpc::Config::Builder config = context.getResults().initConfig();
  config.setParty(static_cast<uint8_t>(party_));
  FillTableId(table, config.initTable());
  auto epochs = config.initEpochs(served.size());
  for (size_t i = 0; i < served.size(); ++i) FillTableId(*served[i]->table, epochs[i]);
  config.setRows(table.rows());
  config.setRowWords(table.row_words());
  config.setDim(table.dim());
  config.setRowFormat(static_cast<uint8_t>(table.format()));
  config.setFracBits(static_cast<uint8_t>(table.frac_bits()));
  config.setLogDomain(static_cast<uint8_t>(dpf::LogDomainForRows(table.rows())));
  auto prgs = config.initPrgs(prgs_.size());
  for (size_t i = 0; i < prgs_.size(); ++i) prgs.set(i, static_cast<uint8_t>(prgs_[i]));
  auto outputs = config.initOutputTypes(2);
  outputs.set(0, static_cast<uint8_t>(dpf::OutputType::kAdditive));
  outputs.set(1, static_cast<uint8_t>(dpf::OutputType::kXor));
  rpc::Limits::Builder limits = config.initLimits();
  limits.setMaxKeysPerCall(limits_.max_keys_per_call);
  limits.setMaxMessageBytes(limits_.max_message_bytes);
  limits.setMaxQueuedKeys(limits_.max_queued_keys);
  limits.setMaxQueuedKeysPerConnection(limits_.max_queued_keys_per_connection);
  config.setBackend(backend_name_);
  config.setRangeQueries(true);
  config.setRowTag(static_cast<uint8_t>(table.row_tag()));
  return kj::READY_NOW;
}

kj::Promise<void> Dpf2Service::answer(AnswerContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  std::shared_ptr<const ServedTable> served = FindTable(params, "answer");
  const uint64_t rows = served->table->rows();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), rows);
  if (!ranges.ok()) Reject(ranges.status(), "answer");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, rows, /*pooled=*/false, prgs_}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answer");
  size_t key_count = keys->size();
  context.releaseParams();
  context.allowCancellation();  // a client gone drops its call, and the scheduler its keys
  return Submit(served, *std::move(keys), *std::move(ranges))
      .then([this, context, arrival, key_count,
             served](absl::StatusOr<KeyBatcher::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answer");
        auto results = context.getResults(
            capnp::MessageSize{shares->size() / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        auto list = results.initShares(shares->size());
        for (size_t i = 0; i < shares->size(); ++i) list.set(i, (*shares)[i]);
        sodium_memzero(shares->data(), shares->size() * sizeof(uint32_t));
        FillVersion(*served, results);
        stats_.RecordCall("answer", key_count, absl::Now() - arrival);
      });
}

kj::Promise<void> Dpf2Service::answerPooled(AnswerPooledContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  std::shared_ptr<const ServedTable> served = FindTable(params, "answerPooled");
  const uint64_t rows = served->table->rows();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), rows);
  if (!ranges.ok()) Reject(ranges.status(), "answerPooled");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, rows, /*pooled=*/true, prgs_}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answerPooled");
  auto parsed_bags = ParseBagSizes(params.getBagSizes(), keys->size());
  if (!parsed_bags.ok()) Reject(parsed_bags.status(), "answerPooled");
  std::vector<uint32_t> bag_sizes = *std::move(parsed_bags);
  size_t key_count = keys->size();
  context.releaseParams();
  context.allowCancellation();  // a client gone drops its call, and the scheduler its keys
  return Submit(served, *std::move(keys), *std::move(ranges))
      .then([this, context, arrival, key_count, served,
             bag_sizes = std::move(bag_sizes)](absl::StatusOr<KeyBatcher::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answerPooled");
        const uint32_t row_words = served->table->row_words();
        auto results = context.getResults(capnp::MessageSize{
            bag_sizes.size() * row_words / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        std::vector<uint32_t> sums(bag_sizes.size() * row_words);
        batch::SumBags(*shares, bag_sizes, row_words, absl::MakeSpan(sums));
        auto list = results.initShares(sums.size());
        for (size_t i = 0; i < sums.size(); ++i) list.set(i, sums[i]);
        sodium_memzero(shares->data(), shares->size() * sizeof(uint32_t));
        sodium_memzero(sums.data(), sums.size() * sizeof(uint32_t));
        FillVersion(*served, results);
        stats_.RecordCall("answerPooled", key_count, absl::Now() - arrival);
      });
}

// The table at options.table_path, loaded and verified, with a backend started on it.
absl::StatusOr<std::unique_ptr<ServedTable>> LoadServedTable(
    const ServerOptions& options, std::shared_ptr<const embedding::Table> table) {
  if (table == nullptr) {
    auto loaded = embedding::Table::Load(options.table_path, {.verify = options.verify_table});
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("table ", options.table_path, ": ",
                                                               loaded.status().message()));
    }
    table = *std::move(loaded);
  }
  auto backend = CreateBackend(options.backend, table->view(), options.threads, options.gpus);
  if (!backend.ok()) return backend.status();
  auto served = std::make_unique<ServedTable>();
  served->table = std::move(table);
  served->backend = *std::move(backend);
  return served;
}

class Dpf2Protocol final : public Protocol {
 public:
  Dpf2Protocol(const ProtocolEnv& env, std::unique_ptr<ServedTable> first)
      : options_(env.options),
        stats_(env.stats),
        backend_name_(first->backend->name()),
        tables_(
            std::move(first),
            [&options = env.options] { return LoadServedTable(options, nullptr); },
            env.options.epoch_grace),
        batcher_(env.options.limits, env.stats) {}

  std::string Describe() const override {
    return absl::StrCat("protocol dpf2 (party ", options_.party, "), backend ", backend_name_, ", ",
                        options_.threads, " thread(s), batches up to ",
                        options_.limits.max_batch_keys, " keys / ",
                        absl::FormatDuration(options_.limits.max_wait),
                        "; SIGHUP rolls to a new table version (old ones served ",
                        absl::FormatDuration(options_.epoch_grace), " more)");
  }
  std::vector<std::shared_ptr<const embedding::Table>> ServedTables() const override {
    std::vector<std::shared_ptr<const embedding::Table>> tables;
    for (const auto& served : tables_.Served()) tables.push_back(served->table);
    return tables;
  }
  kj::Own<capnp::Capability::Server> NewConnection(const ConnectionPolicy& policy) override {
    return kj::heap<Dpf2Service>(options_, tables_, backend_name_, batcher_, stats_, policy);
  }
  void Roll() override { tables_.Roll(); }
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) override {
    batcher_.Stop(wait_scope, timer);
  }

 private:
  const ServerOptions& options_;
  ServerStats& stats_;
  const std::string backend_name_;
  TableSet tables_;
  KeyBatcher batcher_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Protocol>> CreateDpf2Protocol(const ProtocolEnv& env) {
  if (env.options.party != 0 && env.options.party != 1) {
    return absl::InvalidArgumentError("--party must be 0 or 1 (protocol dpf2)");
  }
  auto first = LoadServedTable(env.options, env.table);
  if (!first.ok()) return first.status();
  return std::make_unique<Dpf2Protocol>(env, *std::move(first));
}

}  // namespace veil::server
