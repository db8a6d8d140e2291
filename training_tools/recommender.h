// The recommendation model's libtorch module, shared by training and simulation (models.cc) and
// by private inference on the device (private_inference.cc), so that both run the same code, and
// the trained models' parameters for tests. Includes torch: include it only from those files and
// their tests (each costs ~20 s to compile).
#ifndef VEIL_TRAINING_TOOLS_RECOMMENDER_H_
#define VEIL_TRAINING_TOOLS_RECOMMENDER_H_

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "training_tools/data/interactions.h"
#include "training_tools/models.h"

namespace veil::training {

inline constexpr double kFeatureDropout = 0.2;

// A batch in EmbeddingBag's flat form: `rows` (bags delimited by `offsets`) with `row_weights`
// (the user's centred labels), the candidate `items`, the user's mean label and the labels.
struct RecommendationBatch {
  torch::Tensor rows, offsets, row_weights, items, mean_labels, labels;
};

// Flattens samples; rows in *missing[i] (sorted; missing empty or missing[i] null: none) become
// `default_row`. In training, `dropout` draws rows to replace with probability `dropout_rate`.
// Labels are ratings on MovieLens' 0.5–5 scale, centred on the user's mean and scaled to ±1.
RecommendationBatch BatchRecommendations(const std::vector<const RecommendationSample*>& batch,
                                         absl::Span<const std::vector<int32_t>* const> missing,
                                         int32_t default_row, std::mt19937_64* dropout = nullptr,
                                         double dropout_rate = 0);

// The table with the default row (mean of all rows) appended at index rows: missing rows are
// remapped there, so a lookup needs no branch.
inline torch::Tensor DefaultRow(const torch::Tensor& table) {
  return table.mean(0, /*keepdim=*/true);
}
inline torch::Tensor WithDefaultRow(const torch::Tensor& table) {
  return torch::cat({table, DefaultRow(table)}, 0);
}

struct RecommenderImpl : torch::nn::Module {
  // `dropout_seed` seeds the module's own generator of feature dropout: models trained side by
  // side (TrainModels) do not share torch's global generator.
  RecommenderImpl(int32_t rows, int32_t dim, uint64_t dropout_seed)
      : table(register_module("table", torch::nn::Embedding(rows, dim))),
        hidden(register_module("hidden", torch::nn::Linear(5 * dim + 1, 64))),
        out(register_module("out", torch::nn::Linear(64, 1))),
        dropout_generator(at::make_generator<at::CPUGeneratorImpl>(dropout_seed)) {
    torch::nn::init::normal_(table->weight, 0.0, 0.1);
  }

  // The user's bag twice — plain mean (what the user watched) and weighted by the user's
  // centred labels (what they liked) — the candidate, their products, and the user's mean label.
  // `weights` is the table to look up (the trained one, possibly with the default row appended).
  torch::Tensor Forward(const torch::Tensor& weights, const RecommendationBatch& batch) {
    auto bag = std::get<0>(torch::embedding_bag(weights, batch.rows, batch.offsets, false,
                                                /*mode=mean*/ 1));
    auto liked = std::get<0>(torch::embedding_bag(weights, batch.rows, batch.offsets, false,
                                                  /*mode=sum*/ 0, false, batch.row_weights));
    auto item = torch::embedding(weights, batch.items);
    return Head(bag, liked, item, batch.mean_labels);
  }

  // Everything after the lookups ([batch, dim] each; mean_labels [batch, 1]): the logits.
  torch::Tensor Head(const torch::Tensor& bag, const torch::Tensor& liked,
                     const torch::Tensor& item, const torch::Tensor& mean_labels) {
    auto embedded = FeatureDropout(torch::cat({bag, liked, item, bag * item, liked * item}, 1));
    auto x = torch::relu(hidden->forward(torch::cat({embedded, mean_labels}, 1)));
    return out->forward(x).squeeze(1);
  }

  // torch::dropout's inverted dropout, with the mask from dropout_generator; identity in eval.
  torch::Tensor FeatureDropout(const torch::Tensor& x) {
    if (!is_training()) return x;
    auto keep = torch::empty_like(x).bernoulli_(1 - kFeatureDropout, dropout_generator);
    return x * keep / (1 - kFeatureDropout);
  }

  torch::nn::Embedding table;
  torch::nn::Linear hidden, out;
  at::Generator dropout_generator;
};
TORCH_MODULE(Recommender);

// The module of a model TrainModel made for a recommendation workload; an empty holder for any
// other model.
Recommender TrainedRecommender(WorkloadModel& model);

// Every parameter of a model TrainModel made (either workload), by name: what the
// reproducibility tests compare bit for bit.
torch::OrderedDict<std::string, torch::Tensor> TrainedParameters(WorkloadModel& model);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_RECOMMENDER_H_
