// The workloads' models (libtorch, CPU), behind a torch-free interface so that only models.cc
// pays torch's compile time:
//   - recommendation: the user's history through an EmbeddingBag (dim D; mean, and weighted by
//     the user's own centred ratings) and the candidate item through the same table (a fixed
//     matrix factorisation of the training ratings), an MLP predicting a click (label ≥
//     threshold); metric AUC;
//   - language: a 2-layer LSTM over the word embeddings, projected back to D and scored against
//     the same (tied) embedding table; metric perplexity.
// A missing row (not fetched under a layout) is replaced by the default row: the mean of the
// trained table, the least informative stand-in the device can hold without a private fetch.
#ifndef VEIL_TRAINING_TOOLS_MODELS_H_
#define VEIL_TRAINING_TOOLS_MODELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training_tools/quality.h"
#include "training_tools/workload.h"

namespace veil::training {

struct TrainOptions {
  int epochs = 4;
  int batch_size = 256;
  double learning_rate = 3e-3;
  uint64_t seed = 1;                   // the same seed gives the same model, bit for bit
  int hidden = 128;                    // LSTM width
  size_t max_train_examples = 0;       // 0 = all
  size_t max_validation_examples = 0;  // examples the model scores (0 = all): bounds sweep time
  int threads = 2;                     // threads in all: speed only, same models
};

class WorkloadModel : public QualityModel {
 public:
  // The trained embedding table, rows × dim floats, row-major.
  virtual std::vector<float> EmbeddingTable() const = 0;
  virtual int32_t rows() const = 0;
  virtual int32_t dim() const = 0;
  // The validation examples the model scores, as indices into the workload's validation
  // requests (recommendation: the first max_validation_examples; language: spread over the
  // split, every genre), and their requests.
  virtual const std::vector<size_t>& evaluated_examples() const = 0;
  virtual const std::vector<RowRequest>& evaluated_requests() const = 0;
};

// Trains the workload's model, printing per-epoch loss to stderr. The model (every parameter) and
// its metric are the same bit for bit in every run with the same workload and options, whatever
// `threads` (on the same libtorch and BLAS). Sets torch's thread count and reseeds its global
// generator. Returns UNIMPLEMENTED when veil was built without libtorch, INVALID_ARGUMENT for a
// workload without training examples (or, for recommendation, without a label or without both
// labels present), INTERNAL if training ran a torch operation that has no deterministic
// implementation.
absl::StatusOr<std::unique_ptr<WorkloadModel>> TrainModel(const Workload& workload,
                                                          const TrainOptions& options);

// TrainModel once per seed (options.seed is ignored), up to 2 × options.threads models at a
// time; each model is the one TrainModel gives for its seed, bit for bit. Leaves torch's thread
// count at options.threads / (models at a time), at least 1. Same errors.
absl::StatusOr<std::vector<std::unique_ptr<WorkloadModel>>> TrainModels(
    const Workload& workload, const TrainOptions& options, const std::vector<uint64_t>& seeds);

// The recommendation model's logits (before the sigmoid) on the first missing.size() evaluated
// validation requests, with missing[i] (sorted rows) replaced by the default row: what the
// simulation predicts per request. Returns INVALID_ARGUMENT for a language model or more requests
// than the model evaluates, UNIMPLEMENTED without libtorch.
absl::StatusOr<std::vector<float>> PredictRecommendations(
    WorkloadModel& model, const std::vector<std::vector<int32_t>>& missing);

// The language model's outcomes (summed negative log-likelihood per window) computed by torch's
// forward: the reference of the plain C++ scorer its Score uses (language_scorer.h). Returns
// INVALID_ARGUMENT for another model, UNIMPLEMENTED without libtorch.
absl::StatusOr<Outcomes> LanguageOutcomesWithTorch(const WorkloadModel& model,
                                                   absl::Span<const ExampleQuery> queries);

// Writes `table` as raw little-endian float32 rows (`path`) and a JSON sidecar (`path`.json:
// rows, dim, dtype, workload) — the input of `veil table build --f32=FILE --dim=D`.
absl::Status ExportTable(const std::vector<float>& table, int32_t rows, int32_t dim,
                         const std::string& workload, const std::string& path);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_MODELS_H_
