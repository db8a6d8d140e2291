#include "server/service.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dpf/params.h"
#include "server/log.h"
#include "server/rpc_status.h"

namespace veil::server {
namespace {

// Rejected calls are logged, but a flood of bad calls must not flood the log: the first 100, then
// every 1000th.
bool ShouldLogRejection(uint64_t errors) { return errors <= 100 || errors % 1000 == 0; }

}  // namespace

PirService::PirService(int party, const embedding::Table& table, std::string backend_name,
                       const ServerLimits& limits, BatchScheduler& scheduler, ServerStats& stats)
    : party_(party),
      table_(table),
      backend_name_(std::move(backend_name)),
      limits_(limits),
      scheduler_(scheduler),
      stats_(stats) {}

void PirService::Reject(const absl::Status& status, absl::string_view call) {
  const uint64_t errors = stats_.RecordError();
  if (ShouldLogRejection(errors)) {
    Log(absl::StrCat("rejected ", call, " (error #", errors, "): ", status.ToString()));
  }
  kj::throwFatalException(StatusToException(status));
}

kj::Promise<absl::StatusOr<BatchScheduler::Shares>> PirService::Submit(
    std::vector<dpf::DpfKey> keys, std::vector<pir::RowRange> ranges) {
  const size_t count = keys.size();
  if (queued_keys_ + count > limits_.max_queued_keys_per_connection) {
    return absl::StatusOr<BatchScheduler::Shares>(absl::ResourceExhaustedError(absl::StrCat(
        "this connection already has ", queued_keys_, " keys waiting (limit ",
        limits_.max_queued_keys_per_connection, " per connection); wait for answers first")));
  }
  queued_keys_ += count;
  // Released when the answer comes or the call is cancelled.
  return scheduler_.Submit(std::move(keys), std::move(ranges)).attach(kj::defer([this, count] {
    queued_keys_ -= count;
  }));
}

void PirService::FillTableId(rpc::TableId::Builder table_id) const {
  embedding::TableDigestBytes digest = table_.digest();
  table_id.setDigest(capnp::Data::Reader(digest.data(), digest.size()));
  table_id.setEpoch(table_.epoch());
}

kj::Promise<void> PirService::config(ConfigContext context) {
  rpc::Config::Builder config = context.getResults().initConfig();
  config.setProtocolVersion(rpc::PROTOCOL_VERSION);
  config.setParty(static_cast<uint8_t>(party_));
  FillTableId(config.initTable());
  config.setRows(table_.rows());
  config.setRowWords(table_.row_words());
  config.setDim(table_.dim());
  config.setRowFormat(static_cast<uint8_t>(table_.format()));
  config.setFracBits(static_cast<uint8_t>(table_.frac_bits()));
  config.setLogDomain(static_cast<uint8_t>(dpf::LogDomainForRows(table_.rows())));
  constexpr dpf::Prg kPrgs[] = {dpf::Prg::kAes128, dpf::Prg::kChaCha8, dpf::Prg::kChaCha12,
                                dpf::Prg::kChaCha20, dpf::Prg::kSipHash};
  auto prgs = config.initPrgs(std::size(kPrgs));
  for (size_t i = 0; i < std::size(kPrgs); ++i) prgs.set(i, static_cast<uint8_t>(kPrgs[i]));
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
  return kj::READY_NOW;
}

kj::Promise<void> PirService::answer(AnswerContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), table_.rows());
  if (!ranges.ok()) Reject(ranges.status(), "answer");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, table_.rows(), /*pooled=*/false}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answer");
  size_t key_count = keys->size();
  context.releaseParams();
  return Submit(*std::move(keys), *std::move(ranges))
      .then([this, context, arrival,
             key_count](absl::StatusOr<BatchScheduler::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answer");
        auto results = context.getResults(
            capnp::MessageSize{shares->size() / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        auto list = results.initShares(shares->size());
        for (size_t i = 0; i < shares->size(); ++i) list.set(i, (*shares)[i]);
        FillTableId(results.initTable());
        stats_.RecordCall(key_count, absl::Now() - arrival);
      });
}

kj::Promise<void> PirService::answerPooled(AnswerPooledContext context) {
  absl::Time arrival = absl::Now();
  auto params = context.getParams();
  auto ranges = ParseRanges(params.getRanges(), params.getKeys().size(), table_.rows());
  if (!ranges.ok()) Reject(ranges.status(), "answerPooled");
  auto keys = ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                        KeyRules{party_, table_.rows(), /*pooled=*/true}, limits_, *ranges);
  if (!keys.ok()) Reject(keys.status(), "answerPooled");
  auto parsed_bags = ParseBagSizes(params.getBagSizes(), keys->size());
  if (!parsed_bags.ok()) Reject(parsed_bags.status(), "answerPooled");
  std::vector<uint32_t> bag_sizes = *std::move(parsed_bags);
  size_t key_count = keys->size();
  context.releaseParams();
  return Submit(*std::move(keys), *std::move(ranges))
      .then([this, context, arrival, key_count, bag_sizes = std::move(bag_sizes)](
                absl::StatusOr<BatchScheduler::Shares> shares) mutable {
        if (!shares.ok()) Reject(shares.status(), "answerPooled");
        const uint32_t row_words = table_.row_words();
        auto results = context.getResults(capnp::MessageSize{
            bag_sizes.size() * row_words / 2 + 16 + embedding::kTableDigestBytes / 8, 0});
        auto list = results.initShares(bag_sizes.size() * row_words);
        // Shares are linear: the sum of a bag's shares is a share of the (weighted) sum of its
        // rows, mod 2^32 like every additive share.
        size_t key = 0;
        for (size_t b = 0; b < bag_sizes.size(); ++b) {
          for (uint32_t j = 0; j < row_words; ++j) {
            uint32_t sum = 0;
            for (uint32_t k = 0; k < bag_sizes[b]; ++k) sum += (*shares)[(key + k) * row_words + j];
            list.set(b * row_words + j, sum);
          }
          key += bag_sizes[b];
        }
        FillTableId(results.initTable());
        stats_.RecordCall(key_count, absl::Now() - arrival);
      });
}

kj::Promise<void> PirService::stats(StatsContext context) {
  StatsSnapshot s = stats_.Snapshot();
  rpc::Stats::Builder out = context.getResults().initStats();
  out.setCalls(s.calls);
  out.setKeys(s.keys);
  out.setPasses(s.passes);
  out.setMeanBatchKeys(s.mean_batch_keys);
  out.setMaxBatchKeys(s.max_batch_keys);
  out.setLatencyP50Ms(s.latency_p50_ms);
  out.setLatencyP90Ms(s.latency_p90_ms);
  out.setLatencyP99Ms(s.latency_p99_ms);
  out.setQueuedKeys(s.queued_keys);
  out.setErrors(s.errors);
  out.setConnections(s.connections);
  out.setUptimeS(s.uptime_s);
  return kj::READY_NOW;
}

}  // namespace veil::server
