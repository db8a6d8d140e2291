// The second libtorch file of training_tools (with models.cc): the recommendation model on the
// device, its rows fetched through PrivateEmbeddingBag.
#include "training_tools/private_inference.h"

#include <torch/torch.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "embedding/layout_table.h"
#include "embedding/table_builder.h"
#include "mobile_client/private_embedding_bag.h"
#include "training_tools/recommender.h"

namespace veil::training {
namespace {

using client::PrivateEmbeddingBag;
using client::PrivateEmbeddingBagOptions;
using client::PrivateRows;
using client::TableInfo;

// The client's model: the trained head (shared with the trained module, not copied) and a
// PrivateEmbeddingBag in place of the embedding table, which stays on the servers.
struct DeviceRecommenderImpl : torch::nn::Module {
  DeviceRecommenderImpl(Recommender trained, PrivateEmbeddingBag bag)
      : head(register_module("head", std::move(trained))),
        bag(register_module("bag", std::move(bag))) {}

  // One inference: a batch of one sample, rows fetched under one plan.
  torch::Tensor forward(const RecommendationSample& sample, int32_t num_rows) {
    // Global row ids (nothing marked missing: the fetch decides), weights and mean label.
    const RecommendationBatch batch = BatchRecommendations({&sample}, {}, num_rows);
    const std::vector<int32_t> wanted = WantedRows(sample);
    auto fetched = bag->Fetch(std::vector<int64_t>(wanted.begin(), wanted.end()));
    if (!fetched.ok()) error = fetched.status();
    TORCH_CHECK(fetched.ok(), fetched.status().ToString());
    auto watched = bag->Pool(*fetched, batch.rows, batch.offsets, {}, torch::kMean);
    auto liked = bag->Pool(*fetched, batch.rows, batch.offsets, batch.row_weights, torch::kSum);
    auto item = bag->Embed(*fetched, batch.items);
    last = std::move(*fetched);
    return head->Head(watched, liked, item, batch.mean_labels);
  }

  Recommender head;
  PrivateEmbeddingBag bag;
  PrivateRows last;
  absl::Status error;  // of the last failed fetch
};
TORCH_MODULE(DeviceRecommender);

}  // namespace

absl::Status WriteLayoutTable(const WorkloadModel& model, const embedding::Layout& layout,
                              const std::string& path, uint64_t epoch) {
  if (layout.num_rows() != model.rows() || layout.params().row_words != model.dim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout table: the layout has ", layout.num_rows(), " x ", layout.params().row_words,
        " rows, the model's table ", model.rows(), " x ", model.dim()));
  }
  const std::vector<float> table = model.EmbeddingTable();
  auto physical = embedding::ArrangeRows(layout, table);
  if (!physical.ok()) return physical.status();
  embedding::TableOptions options;
  options.epoch = epoch;
  return embedding::WriteTable(path, embedding::RowFormat::kFp32,
                               static_cast<uint32_t>(layout.entry_words()), *physical, options);
}

absl::StatusOr<PooledLookup> PrivateEmbeddingBagForward(
    std::shared_ptr<Client> client, const embedding::Layout& layout,
    const std::vector<float>& default_row, const std::vector<int64_t>& input,
    const std::vector<int64_t>& offsets, const std::vector<float>& per_sample_weights,
    const std::string& mode) {
  const int64_t dim = layout.params().row_words;
  if (!client || static_cast<int64_t>(default_row.size()) != dim) {
    return absl::InvalidArgumentError(
        "PrivateEmbeddingBagForward: no client or a default row of "
        "another size than the layout's rows");
  }
  if (!per_sample_weights.empty() && per_sample_weights.size() != input.size()) {
    return absl::InvalidArgumentError("PrivateEmbeddingBagForward: one weight per input element");
  }
  PrivateEmbeddingBagOptions options(layout.num_rows(), dim);
  if (mode == "sum") {
    options.mode(torch::kSum);
  } else if (mode == "mean") {
    options.mode(torch::kMean);
  } else if (mode == "max") {
    options.mode(torch::kMax);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("PrivateEmbeddingBagForward: mode \"", mode, "\" (sum, mean or max)"));
  }
  const auto shape = [](const auto& v) { return std::vector<int64_t>{int64_t(v.size())}; };
  try {
    torch::NoGradGuard no_grad;
    PrivateEmbeddingBag bag(options, std::move(client), std::make_shared<embedding::Layout>(layout),
                            torch::tensor(default_row));
    auto in = torch::tensor(input, torch::kInt64).reshape(shape(input));
    auto off = torch::tensor(offsets, torch::kInt64).reshape(shape(offsets));
    torch::Tensor weights;
    if (!per_sample_weights.empty()) weights = torch::tensor(per_sample_weights);
    auto pooled = bag->forward(in, off, weights).contiguous();
    PooledLookup result;
    result.pooled.assign(pooled.data_ptr<float>(), pooled.data_ptr<float>() + pooled.numel());
    auto mask = bag->last_missing_mask().to(torch::kUInt8).contiguous();
    result.missing_mask.assign(mask.data_ptr<uint8_t>(), mask.data_ptr<uint8_t>() + mask.numel());
    result.missing_rows = bag->last_missing_rows();
    result.call = bag->last_call();
    return result;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(e.what_without_backtrace());
  }
}

absl::StatusOr<PrivateInferenceResult> RunPrivateInference(WorkloadModel& model,
                                                           const Workload& workload,
                                                           const embedding::Layout& layout,
                                                           std::shared_ptr<Client> client,
                                                           size_t count) {
  Recommender trained = TrainedRecommender(model);
  if (trained.is_empty() || workload.kind != WorkloadKind::kRecommendation) {
    return absl::InvalidArgumentError("private inference: not a recommendation model");
  }
  if (count > model.evaluated_requests().size() || count > workload.validation_samples.size()) {
    return absl::InvalidArgumentError(absl::StrCat("private inference: ", count,
                                                   " requests, the model evaluates ",
                                                   model.evaluated_requests().size()));
  }
  if (!client) return absl::InvalidArgumentError("private inference: no client");
  const TableInfo& table = client->table();
  if (table.format != embedding::RowFormat::kFp32 ||
      table.rows != static_cast<uint64_t>(embedding::PhysicalRows(layout)) ||
      table.dim != static_cast<uint32_t>(layout.entry_words())) {
    return absl::FailedPreconditionError(
        absl::StrCat("private inference: the servers serve a ", table.rows, " x ", table.dim,
                     " table, the layout's physical fp32 table is ",
                     embedding::PhysicalRows(layout), " x ", layout.entry_words()));
  }
  DeviceRecommender device(nullptr);
  try {
    torch::NoGradGuard no_grad;
    // The default row, computed as the simulation computes it (models.cc: WithDefaultRow).
    const torch::Tensor default_row = DefaultRow(trained->table->weight).reshape(-1);
    std::shared_ptr<const embedding::Layout> shared_layout =
        std::make_shared<embedding::Layout>(layout);
    PrivateEmbeddingBag bag(torch::nn::EmbeddingBagOptions(workload.num_rows, workload.row_words),
                            std::move(client), shared_layout, default_row);
    device = DeviceRecommender(trained, bag);
    device->eval();
    PrivateInferenceResult result;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < count; ++i) {
      auto logit = device->forward(workload.validation_samples[i], workload.num_rows);
      result.predictions.push_back(logit.item<float>());
      result.missing.push_back(device->last.missing_rows);
      result.keys.push_back(device->last.call.keys);
      result.bytes_up += device->last.call.bytes_up;
      result.bytes_down += device->last.call.bytes_down;
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  } catch (const c10::Error& e) {
    if (!device.is_empty() && !device->error.ok()) return device->error;
    return absl::InternalError(absl::StrCat("private inference: ", e.what_without_backtrace()));
  }
}

}  // namespace veil::training
