#include "server/dpf2.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dpf/params.h"
#include "pir/batch/bags.h"
#include "server/backend_select.h"
#include "server/key_batcher.h"
#include "server/request.h"

namespace veil::server {
namespace {

constexpr char kProtocolName[] = "dpf2";

class Dpf2Service final : public ServiceBase<rpc::PirServer> {
 public:
  // `table`, `batcher` and `stats` must outlive the service.
  Dpf2Service(const ServerOptions& options, const embedding::Table& table,
              std::string backend_name, KeyBatcher& batcher, ServerStats& stats,
              const ConnectionPolicy& policy)
      : ServiceBase(kProtocolName, stats, policy),
        party_(options.party),
        prgs_(options.prgs),
        table_(table),
        backend_name_(std::move(backend_name)),
        limits_(options.limits),
        batcher_(batcher) {}

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;
  kj::Promise<void> answerPooled(AnswerPooledContext context) override;

 private:
  // Queues this connection's keys (with their row ranges, or none for the whole table), within
  // max_queued_keys_per_connection.
  kj::Promise<absl::StatusOr<KeyBatcher::Shares>> Submit(std::vector<dpf::DpfKey> keys,
                                                         std::vector<pir::RowRange> ranges);

  const int party_;
  const absl::Span<const dpf::Prg> prgs_;  // accepted (ServerOptions::prgs)
  const embedding::Table& table_;
  const std::string backend_name_;
  const ServerLimits limits_;
  KeyBatcher& batcher_;
  uint64_t queued_keys_ = 0;  // this connection's keys waiting for the backend
  uint32_t calls_ = 0;        // this connection's calls waiting for the backend
};

kj::Promise<absl::StatusOr<KeyBatcher::Shares>> Dpf2Service::Submit(
    std::vector<dpf::DpfKey> keys, std::vector<pir::RowRange> ranges) {
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
  return batcher_.Submit(std::move(keys), std::move(ranges)).attach(kj::defer([this, count] {
    queued_keys_ -= count;
    --calls_;
  }));
}

kj::Promise<void> Dpf2Service::config(ConfigContext context) {
  rpc::Config::Builder config = context.getResults().initConfig();
  config.setParty(static_cast<uint8_t>(party_));
  FillTableId(table_, config.initTable());
  config.setRows(table_.rows());
  config.setRowWords(table_.row_words());
  config.setDim(table_.dim());
  config.setRowFormat(static_cast<uint8_t>(table_.format()));
  config.setFracBits(static_cast<uint8_t>(table_.frac_bits()));
  config.setLogDomain(static_cast<uint8_t>(dpf::LogDomainForRows(table_.rows())));
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
  config.setRowTag(static_cast<uint8_t>(table_.row_tag()));
  return kj::READY_NOW;
}

kj::Promise<void> Dpf2Service::answer(AnswerContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), table_.rows());
  if (!ranges.ok()) Reject(ranges.status(), "answer");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, table_.rows(), /*pooled=*/false, prgs_}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answer");
  size_t key_count = keys->size();
  context.releaseParams();
  return Submit(*std::move(keys), *std::move(ranges))
      .then([this, context, arrival,
             key_count](absl::StatusOr<KeyBatcher::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answer");
        auto results = context.getResults(
            capnp::MessageSize{shares->size() / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        auto list = results.initShares(shares->size());
        for (size_t i = 0; i < shares->size(); ++i) list.set(i, (*shares)[i]);
        FillTableId(table_, results.initTable());
        stats_.RecordCall(key_count, absl::Now() - arrival);
      });
}

kj::Promise<void> Dpf2Service::answerPooled(AnswerPooledContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), table_.rows());
  if (!ranges.ok()) Reject(ranges.status(), "answerPooled");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, table_.rows(), /*pooled=*/true, prgs_}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answerPooled");
  auto parsed_bags = ParseBagSizes(params.getBagSizes(), keys->size());
  if (!parsed_bags.ok()) Reject(parsed_bags.status(), "answerPooled");
  std::vector<uint32_t> bag_sizes = *std::move(parsed_bags);
  size_t key_count = keys->size();
  context.releaseParams();
  return Submit(*std::move(keys), *std::move(ranges))
      .then([this, context, arrival, key_count, bag_sizes = std::move(bag_sizes)](
                absl::StatusOr<KeyBatcher::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answerPooled");
        const uint32_t row_words = table_.row_words();
        auto results = context.getResults(capnp::MessageSize{
            bag_sizes.size() * row_words / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        std::vector<uint32_t> sums(bag_sizes.size() * row_words);
        batch::SumBags(*shares, bag_sizes, row_words, absl::MakeSpan(sums));
        auto list = results.initShares(sums.size());
        for (size_t i = 0; i < sums.size(); ++i) list.set(i, sums[i]);
        FillTableId(table_, results.initTable());
        stats_.RecordCall(key_count, absl::Now() - arrival);
      });
}

class Dpf2Protocol final : public Protocol {
 public:
  Dpf2Protocol(const ProtocolEnv& env, std::unique_ptr<pir::Backend> backend)
      : env_(env), backend_(std::move(backend)),
        batcher_(*backend_, env.options.limits, env.stats) {}

  std::string Describe() const override {
    return absl::StrCat("protocol dpf2 (party ", env_.options.party, "), backend ",
                        backend_->name(), ", ", env_.options.threads, " thread(s), batches up to ",
                        env_.options.limits.max_batch_keys, " keys / ",
                        absl::FormatDuration(env_.options.limits.max_wait));
  }
  capnp::Capability::Client NewConnection(const ConnectionPolicy& policy) override {
    return kj::heap<Dpf2Service>(env_.options, env_.table, backend_->name(), batcher_, env_.stats,
                                 policy);
  }
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) override {
    batcher_.Stop(wait_scope, timer);
  }

 private:
  const ProtocolEnv env_;
  std::unique_ptr<pir::Backend> backend_;
  KeyBatcher batcher_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Protocol>> CreateDpf2Protocol(const ProtocolEnv& env) {
  if (env.options.party != 0 && env.options.party != 1) {
    return absl::InvalidArgumentError("--party must be 0 or 1 (protocol dpf2)");
  }
  auto backend =
      CreateBackend(env.options.backend, env.table.view(), env.options.threads, env.options.gpus);
  if (!backend.ok()) return backend.status();
  return std::make_unique<Dpf2Protocol>(env, *std::move(backend));
}

}  // namespace veil::server
