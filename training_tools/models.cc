// The only file of training_tools that includes torch (about 20 s to compile).
#include "training_tools/models.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "training_tools/recommender.h"

namespace veil::training {
namespace {

// Area under the ROC curve by the rank-sum formula, ties sharing their average rank.
double Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double positive_rank_sum = 0, positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double rank = 0.5 * (i + 1 + j);  // average of ranks i+1 … j
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        positive_rank_sum += rank;
        ++positives;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

bool IsMissing(const std::vector<int32_t>& missing, int32_t row) {
  return std::binary_search(missing.begin(), missing.end(), row);
}

// 80k MovieLens examples against 9k × 32 embedding weights overfit when the rows are learned from
// the click loss (validation AUC below that of no rows at all). So the table is a matrix
// factorisation of the training ratings, kept fixed, and the MLP learns on top of it; training
// replaces each looked-up row by the default row with probability kRowDropout — the same
// substitution a layout's missing rows cause — and drops embedding features, so the model does
// not collapse when a row is not fetched.
constexpr double kRowDropout = 0.25;
constexpr double kWeightDecay = 1e-5;
constexpr int kFactorizationEpochs = 10;

struct LanguageModelImpl : torch::nn::Module {
  LanguageModelImpl(int32_t rows, int32_t dim, int hidden_size)
      : table(register_module("table", torch::nn::Embedding(rows, dim))),
        lstm(register_module(
            "lstm", torch::nn::LSTM(
                        torch::nn::LSTMOptions(dim, hidden_size).num_layers(2).batch_first(true)))),
        projection(register_module("projection", torch::nn::Linear(hidden_size, dim))),
        bias(register_parameter("bias", torch::zeros({rows}))) {
    torch::nn::init::normal_(table->weight, 0.0, 0.1);
  }

  // inputs [batch, length] over `weights` (possibly with the default row); logits over the
  // trained rows only (tied output layer).
  torch::Tensor Forward(const torch::Tensor& weights, const torch::Tensor& inputs) {
    auto x = torch::embedding(weights, inputs);
    auto h = std::get<0>(lstm->forward(x));
    return torch::matmul(projection->forward(h), table->weight.t()) + bias;
  }

  torch::nn::Embedding table;
  torch::nn::LSTM lstm;
  torch::nn::Linear projection;
  torch::Tensor bias;
};
TORCH_MODULE(LanguageModel);

class RecommendationModel : public WorkloadModel {
 public:
  RecommendationModel(const Workload& workload, const TrainOptions& options)
      : workload_(workload),
        options_(options),
        model_(workload.num_rows, workload.row_words),
        evaluated_(workload.validation_requests.begin(),
                   workload.validation_requests.begin() + EvaluatedCount(workload, options)) {}

  static size_t EvaluatedCount(const Workload& workload, const TrainOptions& options) {
    const size_t n = workload.validation_requests.size();
    return options.max_validation_examples ? std::min(n, options.max_validation_examples) : n;
  }

  void Train() {
    InitializeFromFactorization();
    const auto& samples = workload_.train_samples;
    size_t n = samples.size();
    if (options_.max_train_examples) n = std::min(n, options_.max_train_examples);
    torch::optim::Adam optimizer(
        model_->parameters(),
        torch::optim::AdamOptions(options_.learning_rate).weight_decay(kWeightDecay));
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(options_.seed), row_dropout(options_.seed + 1);
    for (int epoch = 0; epoch < options_.epochs; ++epoch) {
      std::shuffle(order.begin(), order.end(), shuffle);
      model_->train();
      double loss_sum = 0;
      int batches = 0;
      for (size_t start = 0; start < n; start += options_.batch_size) {
        const size_t end = std::min(n, start + options_.batch_size);
        std::vector<const RecommendationSample*> batch;
        for (size_t i = start; i < end; ++i) batch.push_back(&samples[order[i]]);
        const RecommendationBatch input =
            BatchRecommendations(batch, nullptr, workload_.num_rows, &row_dropout, kRowDropout);
        auto logits = model_->Forward(WithDefaultRow(model_->table->weight), input);
        auto loss = torch::binary_cross_entropy_with_logits(logits, input.labels);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>();
        ++batches;
      }
      std::fprintf(stderr, "epoch %d: training loss %.4f, validation AUC %.4f\n", epoch + 1,
                   loss_sum / std::max(batches, 1),
                   Evaluate(std::vector<std::vector<int32_t>>(evaluated_.size())));
    }
  }

  std::string metric() const override { return "auc"; }
  bool higher_is_better() const override { return true; }
  bool Preserved(double quality, double reference) const override {
    return quality >= reference - 0.005;
  }

  double Evaluate(const std::vector<std::vector<int32_t>>& missing) override {
    std::vector<float> labels;
    const std::vector<float> scores = Scores(missing, &labels);
    return Auc(scores, labels);
  }

  // The logits of the first min(missing.size(), evaluated) validation requests.
  std::vector<float> Scores(const std::vector<std::vector<int32_t>>& missing,
                            std::vector<float>* labels = nullptr) {
    torch::NoGradGuard no_grad;
    model_->eval();
    const auto weights = WithDefaultRow(model_->table->weight);
    std::vector<float> scores;
    const size_t n = std::min(missing.size(), evaluated_.size());
    for (size_t start = 0; start < n; start += 4096) {
      const size_t end = std::min(n, start + 4096);
      std::vector<const RecommendationSample*> batch;
      for (size_t i = start; i < end; ++i) batch.push_back(&workload_.validation_samples[i]);
      const RecommendationBatch input =
          BatchRecommendations(batch, &missing[start], workload_.num_rows);
      auto logits = model_->Forward(weights, input).contiguous();
      scores.insert(scores.end(), logits.data_ptr<float>(),
                    logits.data_ptr<float>() + (end - start));
      if (labels) {
        labels->insert(labels->end(), input.labels.data_ptr<float>(),
                       input.labels.data_ptr<float>() + (end - start));
      }
    }
    return scores;
  }

  Recommender module() { return model_; }
  torch::OrderedDict<std::string, torch::Tensor> parameters() { return model_->named_parameters(); }

  std::vector<float> EmbeddingTable() const override {
    auto w = model_->table->weight.detach().contiguous();
    return std::vector<float>(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  }
  int32_t rows() const override { return workload_.num_rows; }
  int32_t dim() const override { return workload_.row_words; }
  const std::vector<RowRequest>& evaluated_requests() const override { return evaluated_; }

 private:
  // The table: item vectors of a matrix factorisation of the training labels, which encode
  // taste and quality and generalise to later ratings; fixed while the MLP trains.
  void InitializeFromFactorization() {
    std::vector<Rating> ratings;
    ratings.reserve(workload_.train_events.size());
    for (const Interaction& e : workload_.train_events) {
      ratings.push_back({e.user, e.item, e.label, e.timestamp});
    }
    std::vector<int32_t> rows(workload_.num_rows);
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> vectors =
        QuickFactorize(ratings, DenseIndex::FromIds(rows), workload_.row_words,
                       kFactorizationEpochs, options_.seed);
    torch::NoGradGuard no_grad;
    model_->table->weight.copy_(
        torch::from_blob(vectors.data(), {workload_.num_rows, workload_.row_words}));
    model_->table->weight.set_requires_grad(false);
  }

  const Workload& workload_;
  TrainOptions options_;
  Recommender model_;
  std::vector<RowRequest> evaluated_;
};

class WordModel : public WorkloadModel {
 public:
  WordModel(const Workload& workload, const TrainOptions& options)
      : workload_(workload),
        options_(options),
        model_(workload.num_rows, workload.row_words, options.hidden) {
    size_t n = workload.validation_windows.size();
    if (options.max_validation_examples) n = std::min(n, options.max_validation_examples);
    // Spread the evaluated windows over the whole validation split (every genre).
    const size_t stride =
        std::max<size_t>(1, workload.validation_windows.size() / std::max<size_t>(n, 1));
    for (size_t i = 0; i < workload.validation_windows.size() && evaluated_index_.size() < n;
         i += stride) {
      evaluated_index_.push_back(i);
      evaluated_.push_back(workload.validation_requests[i]);
    }
  }

  void Train() {
    const auto& windows = workload_.train_windows;
    size_t n = windows.size();
    if (options_.max_train_examples) n = std::min(n, options_.max_train_examples);
    torch::optim::Adam optimizer(model_->parameters(),
                                 torch::optim::AdamOptions(options_.learning_rate));
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(options_.seed);
    for (int epoch = 0; epoch < options_.epochs; ++epoch) {
      std::shuffle(order.begin(), order.end(), shuffle);
      model_->train();
      double loss_sum = 0;
      int batches = 0;
      for (size_t start = 0; start < n; start += options_.batch_size) {
        const size_t end = std::min(n, start + options_.batch_size);
        std::vector<const std::vector<int32_t>*> batch;
        for (size_t i = start; i < end; ++i) batch.push_back(&windows[order[i]]);
        auto [inputs, targets] = Batch(batch, {}, workload_.num_rows);
        auto logits = model_->Forward(model_->table->weight, inputs);
        auto loss = torch::cross_entropy_loss(logits.reshape({-1, workload_.num_rows}),
                                              targets.reshape({-1}));
        optimizer.zero_grad();
        loss.backward();
        torch::nn::utils::clip_grad_norm_(model_->parameters(), 1.0);
        optimizer.step();
        loss_sum += loss.item<double>();
        if (++batches % 50 == 0) {
          std::fprintf(stderr, "\repoch %d: %zu/%zu windows, training perplexity %.1f", epoch + 1,
                       end, n, std::exp(loss_sum / batches));
        }
      }
      std::fprintf(stderr, "\repoch %d: training perplexity %.2f, validation perplexity %.2f\n",
                   epoch + 1, std::exp(loss_sum / std::max(batches, 1)),
                   Evaluate(std::vector<std::vector<int32_t>>(evaluated_.size())));
    }
  }

  std::string metric() const override { return "perplexity"; }
  bool higher_is_better() const override { return false; }
  bool Preserved(double quality, double reference) const override {
    return quality <= reference * 1.02;
  }

  double Evaluate(const std::vector<std::vector<int32_t>>& missing) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    const auto weights = WithDefaultRow(model_->table->weight);
    double nll = 0;
    int64_t tokens = 0;
    const size_t n = std::min(missing.size(), evaluated_index_.size());
    for (size_t start = 0; start < n; start += 256) {
      const size_t end = std::min(n, start + 256);
      std::vector<const std::vector<int32_t>*> batch;
      for (size_t i = start; i < end; ++i) {
        batch.push_back(&workload_.validation_windows[evaluated_index_[i]]);
      }
      auto [inputs, targets] = Batch(
          batch, std::vector<std::vector<int32_t>>(missing.begin() + start, missing.begin() + end),
          workload_.num_rows);
      auto logits = model_->Forward(weights, inputs);
      nll += torch::cross_entropy_loss(logits.reshape({-1, workload_.num_rows}),
                                       targets.reshape({-1}), {}, torch::Reduction::Sum)
                 .item<double>();
      tokens += targets.numel();
    }
    return std::exp(nll / std::max<int64_t>(tokens, 1));
  }

  std::vector<float> EmbeddingTable() const override {
    auto w = model_->table->weight.detach().contiguous();
    return std::vector<float>(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  }
  int32_t rows() const override { return workload_.num_rows; }
  int32_t dim() const override { return workload_.row_words; }
  const std::vector<RowRequest>& evaluated_requests() const override { return evaluated_; }

  torch::OrderedDict<std::string, torch::Tensor> parameters() { return model_->named_parameters(); }

 private:
  // Windows → inputs (all but the last token; missing rows → the default row) and targets.
  static std::pair<torch::Tensor, torch::Tensor> Batch(
      const std::vector<const std::vector<int32_t>*>& batch,
      const std::vector<std::vector<int32_t>>& missing, int32_t default_row) {
    const int64_t length = static_cast<int64_t>(batch[0]->size()) - 1;
    std::vector<int64_t> inputs, targets;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& w = *batch[i];
      for (int64_t t = 0; t < length; ++t) {
        const bool gone = !missing.empty() && IsMissing(missing[i], w[t]);
        inputs.push_back(gone ? default_row : w[t]);
        targets.push_back(w[t + 1]);
      }
    }
    const int64_t b = static_cast<int64_t>(batch.size());
    return {torch::from_blob(inputs.data(), {b, length}, torch::kInt64).clone(),
            torch::from_blob(targets.data(), {b, length}, torch::kInt64).clone()};
  }

  const Workload& workload_;
  TrainOptions options_;
  LanguageModel model_;
  std::vector<size_t> evaluated_index_;
  std::vector<RowRequest> evaluated_;
};

// While it lives, torch throws (c10::Error) on any operation that has no deterministic
// implementation, instead of running it. Every operation training uses on the CPU is
// deterministic; this keeps a later change from silently losing that.
class DeterministicAlgorithmsGuard {
 public:
  DeterministicAlgorithmsGuard()
      : enabled_(at::globalContext().deterministicAlgorithms()),
        warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  ~DeterministicAlgorithmsGuard() {
    at::globalContext().setDeterministicAlgorithms(enabled_, warn_only_);
  }
  DeterministicAlgorithmsGuard(const DeterministicAlgorithmsGuard&) = delete;
  DeterministicAlgorithmsGuard& operator=(const DeterministicAlgorithmsGuard&) = delete;

 private:
  const bool enabled_, warn_only_;
};

}  // namespace

RecommendationBatch BatchRecommendations(const std::vector<const RecommendationSample*>& batch,
                                         const std::vector<int32_t>* missing, int32_t default_row,
                                         std::mt19937_64* dropout, double dropout_rate) {
  std::bernoulli_distribution drop(dropout_rate);
  std::vector<int64_t> rows, offsets, items;
  std::vector<float> row_weights, mean_labels, labels;
  for (size_t i = 0; i < batch.size(); ++i) {
    const RecommendationSample& sample = *batch[i];
    offsets.push_back(static_cast<int64_t>(rows.size()));
    auto lookup = [&](int32_t row) -> int64_t {
      if (dropout && drop(*dropout)) return default_row;
      return missing && IsMissing(missing[i], row) ? default_row : row;
    };
    float mean = 0;
    for (float label : sample.history_labels) mean += label;
    mean = sample.history.empty() ? 0.0f : mean / sample.history.size();
    const float n = static_cast<float>(std::max<size_t>(sample.history.size(), 1));
    for (size_t k = 0; k < sample.history.size(); ++k) {
      rows.push_back(lookup(sample.history[k]));
      row_weights.push_back((sample.history_labels[k] - mean) / (2.0f * n));
    }
    items.push_back(lookup(sample.item));
    mean_labels.push_back(mean / 5.0f);
    labels.push_back(sample.label);
  }
  auto ints = [](std::vector<int64_t>& v) {
    return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kInt64).clone();
  };
  auto floats = [](std::vector<float>& v) {
    return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}).clone();
  };
  return {ints(rows),
          ints(offsets),
          floats(row_weights),
          ints(items),
          floats(mean_labels).unsqueeze(1),
          floats(labels)};
}

Recommender TrainedRecommender(WorkloadModel& model) {
  auto* recommendation = dynamic_cast<RecommendationModel*>(&model);
  return recommendation ? recommendation->module() : Recommender(nullptr);
}

torch::OrderedDict<std::string, torch::Tensor> TrainedParameters(WorkloadModel& model) {
  if (auto* recommendation = dynamic_cast<RecommendationModel*>(&model)) {
    return recommendation->parameters();
  }
  return dynamic_cast<WordModel&>(model).parameters();
}

absl::StatusOr<std::vector<float>> PredictRecommendations(
    WorkloadModel& model, const std::vector<std::vector<int32_t>>& missing) {
  auto* recommendation = dynamic_cast<RecommendationModel*>(&model);
  if (!recommendation) {
    return absl::InvalidArgumentError("PredictRecommendations: not a recommendation model");
  }
  if (missing.size() > model.evaluated_requests().size()) {
    return absl::InvalidArgumentError(absl::StrCat("PredictRecommendations: ", missing.size(),
                                                   " requests, the model evaluates ",
                                                   model.evaluated_requests().size()));
  }
  return recommendation->Scores(missing);
}

absl::StatusOr<std::unique_ptr<WorkloadModel>> TrainModel(const Workload& workload,
                                                          const TrainOptions& options) {
  if (workload.kind == WorkloadKind::kRecommendation) {
    bool positive = false, negative = false;
    for (const auto& s : workload.train_samples) (s.label > 0.5f ? positive : negative) = true;
    if (!positive || !negative) {
      return absl::InvalidArgumentError(
          "recommendation model: the training split needs both clicks and non-clicks (give "
          "--label_column and --positive_threshold)");
    }
  } else if (workload.train_windows.empty() || workload.validation_windows.empty()) {
    return absl::InvalidArgumentError("language model: no training or validation windows");
  }
  // The thread count changes the speed, not the model: each output of every reduction training
  // runs is computed by one thread in a fixed order (embedding bags, softmax rows, column sums,
  // each tensor's norm; Debian's reference BLAS is single-threaded). A torch reduction of a
  // large tensor to one scalar (`sum()`) is not — it adds per-thread partial sums — and
  // ModelsTest.SameModelForAnyThreadCount fails if one enters training.
  torch::set_num_threads(options.threads);
  // Seeded before the model is built, whose initial parameters come from this generator:
  // unseeded, it starts from a random seed in every process.
  torch::manual_seed(options.seed);
  DeterministicAlgorithmsGuard deterministic;
  try {
    if (workload.kind == WorkloadKind::kRecommendation) {
      auto model = std::make_unique<RecommendationModel>(workload, options);
      model->Train();
      return model;
    }
    auto model = std::make_unique<WordModel>(workload, options);
    model->Train();
    return model;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("training: ", e.what_without_backtrace()));
  }
}

}  // namespace veil::training
