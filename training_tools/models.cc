// The only file of training_tools that includes torch (about 20 s to compile).
#include "training_tools/models.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "training_tools/language_scorer.h"
#include "training_tools/recommender.h"

namespace veil::training {
namespace {

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
        model_(workload.num_rows, workload.row_words, options.seed) {
    const size_t n = workload.validation_requests.size();
    const size_t count =
        options.max_validation_examples ? std::min(n, options.max_validation_examples) : n;
    for (size_t i = 0; i < count; ++i) {
      evaluated_index_.push_back(i);
      evaluated_.push_back(workload.validation_requests[i]);
    }
  }

  // `progress`: print each epoch's loss and validation AUC.
  void Train(bool progress) {
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
            BatchRecommendations(batch, {}, workload_.num_rows, &row_dropout, kRowDropout);
        auto logits = model_->Forward(WithDefaultRow(model_->table->weight), input);
        auto loss = torch::binary_cross_entropy_with_logits(logits, input.labels);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>();
        ++batches;
      }
      model_->eval();
      weights_ = WithDefaultRow(model_->table->weight).detach();
      if (progress) {
        std::fprintf(stderr, "seed %llu, epoch %d: training loss %.4f, validation AUC %.4f\n",
                     static_cast<unsigned long long>(options_.seed), epoch + 1,
                     loss_sum / std::max(batches, 1),
                     Evaluate(std::vector<std::vector<int32_t>>(evaluated_.size())));
      }
    }
    model_->eval();
    weights_ = WithDefaultRow(model_->table->weight).detach();
  }

  Metric metric() const override { return Metric::kAuc; }

  std::vector<double> Targets() const override {
    std::vector<double> labels;
    for (size_t i : evaluated_index_) labels.push_back(workload_.validation_samples[i].label);
    return labels;
  }

  // The logits.
  Outcomes Score(absl::Span<const ExampleQuery> queries) const override {
    torch::NoGradGuard no_grad;
    Outcomes scores;
    scores.reserve(queries.size());
    for (size_t start = 0; start < queries.size(); start += 4096) {
      const size_t end = std::min(queries.size(), start + 4096);
      std::vector<const RecommendationSample*> batch;
      std::vector<const std::vector<int32_t>*> missing;
      for (size_t i = start; i < end; ++i) {
        batch.push_back(&workload_.validation_samples[evaluated_index_[queries[i].example]]);
        missing.push_back(queries[i].missing);
      }
      const RecommendationBatch input = BatchRecommendations(batch, missing, workload_.num_rows);
      auto logits = model_->Forward(weights_, input).contiguous();
      scores.insert(scores.end(), logits.data_ptr<float>(),
                    logits.data_ptr<float>() + (end - start));
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
  const std::vector<size_t>& evaluated_examples() const override { return evaluated_index_; }
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
  // Score runs the module's forward (non-const in libtorch) in eval mode without gradients: it
  // changes nothing, and several threads may run it at once.
  mutable Recommender model_;
  torch::Tensor weights_;  // the table and the default row, after training
  std::vector<size_t> evaluated_index_;
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

  // `progress`: print the training perplexity as it goes and each epoch's validation perplexity.
  void Train(bool progress) {
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
        if (progress && ++batches % 50 == 0) {
          std::fprintf(stderr, "\rseed %llu, epoch %d: %zu/%zu windows, training perplexity %.1f",
                       static_cast<unsigned long long>(options_.seed), epoch + 1, end, n,
                       std::exp(loss_sum / batches));
        } else if (!progress) {
          ++batches;
        }
      }
      model_->eval();
      weights_ = WithDefaultRow(model_->table->weight).detach();
      std::fprintf(stderr, "%sseed %llu, epoch %d: training perplexity %.2f%s",
                   progress ? "\r" : "", static_cast<unsigned long long>(options_.seed), epoch + 1,
                   std::exp(loss_sum / std::max(batches, 1)), progress ? "" : "\n");
      if (progress) {
        fast_weights_ = ExtractWeights();
        std::fprintf(stderr, ", validation perplexity %.2f\n",
                     Evaluate(std::vector<std::vector<int32_t>>(evaluated_.size())));
      }
    }
    model_->eval();
    weights_ = WithDefaultRow(model_->table->weight).detach();
    fast_weights_ = ExtractWeights();
  }

  Metric metric() const override { return Metric::kPerplexity; }

  std::vector<double> Targets() const override {
    std::vector<double> tokens;
    for (size_t i : evaluated_index_) {
      tokens.push_back(static_cast<double>(workload_.validation_windows[i].size()) - 1);
    }
    return tokens;
  }

  // Per window, the summed negative log-likelihood of its next-token targets (the plain C++
  // forward of language_scorer.h).
  Outcomes Score(absl::Span<const ExampleQuery> queries) const override {
    Outcomes nll;
    nll.reserve(queries.size());
    for (const ExampleQuery& q : queries) {
      nll.push_back(WindowNll(
          fast_weights_, workload_.validation_windows[evaluated_index_[q.example]], *q.missing));
    }
    return nll;
  }

  // Score computed by torch's forward: the reference of the plain C++ scorer.
  Outcomes ScoreWithTorch(absl::Span<const ExampleQuery> queries) const {
    torch::NoGradGuard no_grad;
    Outcomes nll;
    nll.reserve(queries.size());
    for (size_t start = 0; start < queries.size(); start += 256) {
      const size_t end = std::min(queries.size(), start + 256);
      std::vector<const std::vector<int32_t>*> batch;
      std::vector<const std::vector<int32_t>*> missing;
      for (size_t i = start; i < end; ++i) {
        batch.push_back(&workload_.validation_windows[evaluated_index_[queries[i].example]]);
        missing.push_back(queries[i].missing);
      }
      auto [inputs, targets] = Batch(batch, missing, workload_.num_rows);
      auto logits = model_->Forward(weights_, inputs);
      auto token_nll = torch::cross_entropy_loss(logits.reshape({-1, workload_.num_rows}),
                                                 targets.reshape({-1}), {}, torch::Reduction::None)
                           .contiguous();
      const float* values = token_nll.data_ptr<float>();
      const int64_t length = targets.size(1);
      for (size_t i = 0; i < end - start; ++i) {
        double sum = 0;  // in token order, in double: the same whatever the batch
        for (int64_t t = 0; t < length; ++t) sum += values[i * length + t];
        nll.push_back(sum);
      }
    }
    return nll;
  }

  std::vector<float> EmbeddingTable() const override {
    auto w = model_->table->weight.detach().contiguous();
    return std::vector<float>(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  }
  int32_t rows() const override { return workload_.num_rows; }
  int32_t dim() const override { return workload_.row_words; }
  const std::vector<size_t>& evaluated_examples() const override { return evaluated_index_; }
  const std::vector<RowRequest>& evaluated_requests() const override { return evaluated_; }

  torch::OrderedDict<std::string, torch::Tensor> parameters() { return model_->named_parameters(); }

 private:
  // The trained parameters, laid out for language_scorer.h.
  LanguageModelWeights ExtractWeights() const {
    torch::NoGradGuard no_grad;
    auto floats = [](const torch::Tensor& t) {
      const auto c = t.detach().contiguous();
      return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    };
    LanguageModelWeights w;
    w.rows = workload_.num_rows;
    w.dim = workload_.row_words;
    w.table = floats(WithDefaultRow(model_->table->weight));
    const auto parameters = model_->lstm->named_parameters();
    for (int l = 0; l < 2; ++l) {
      const std::string suffix = "_l" + std::to_string(l);
      const auto& input = parameters["weight_ih" + suffix];
      w.layers[l].input = static_cast<int>(input.size(1));
      w.layers[l].hidden = options_.hidden;
      w.layers[l].input_weights = floats(input.t());
      w.layers[l].hidden_weights = floats(parameters["weight_hh" + suffix].t());
      w.layers[l].bias = floats(parameters["bias_ih" + suffix] + parameters["bias_hh" + suffix]);
    }
    w.projection = floats(model_->projection->weight.t());
    w.projection_bias = floats(model_->projection->bias);
    w.output = floats(model_->table->weight.t());
    w.output_bias = floats(model_->bias);
    return w;
  }

  // Windows → inputs (all but the last token; rows in *missing[i] → the default row) and targets.
  static std::pair<torch::Tensor, torch::Tensor> Batch(
      const std::vector<const std::vector<int32_t>*>& batch,
      const std::vector<const std::vector<int32_t>*>& missing, int32_t default_row) {
    const int64_t length = static_cast<int64_t>(batch[0]->size()) - 1;
    std::vector<int64_t> inputs, targets;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& w = *batch[i];
      for (int64_t t = 0; t < length; ++t) {
        const bool gone = !missing.empty() && missing[i] && IsMissing(*missing[i], w[t]);
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
  mutable LanguageModel model_;        // as RecommendationModel::model_
  torch::Tensor weights_;              // the table and the default row, after training
  LanguageModelWeights fast_weights_;  // the same model for language_scorer.h
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

absl::Status CheckTrainable(const Workload& workload) {
  if (workload.kind == WorkloadKind::kLanguage) {
    if (workload.train_windows.empty() || workload.validation_windows.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "language model: ", workload.train_windows.size(), " training and ",
          workload.validation_windows.size(),
          " validation windows; the corpus needs at least 5 documents (a file is split by the "
          "rule of --text_split) with more tokens than --window"));
    }
    return absl::OkStatus();
  }
  if (!workload.has_labels) {
    return absl::InvalidArgumentError(
        "recommendation model: the log has no label; give --label_column=NAME (the rating or "
        "click column) and, unless a click is a label of at least 4, --positive_threshold");
  }
  bool positive = false, negative = false;
  for (const auto& s : workload.train_samples) (s.label > 0.5f ? positive : negative) = true;
  if (!positive || !negative) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recommendation model: the training split has ", positive ? "only" : "no",
        " clicks (label >= --positive_threshold); it needs both clicks and non-clicks"));
  }
  return absl::OkStatus();
}

}  // namespace

RecommendationBatch BatchRecommendations(const std::vector<const RecommendationSample*>& batch,
                                         absl::Span<const std::vector<int32_t>* const> missing,
                                         int32_t default_row, std::mt19937_64* dropout,
                                         double dropout_rate) {
  std::bernoulli_distribution drop(dropout_rate);
  std::vector<int64_t> rows, offsets, items;
  std::vector<float> row_weights, mean_labels, labels;
  for (size_t i = 0; i < batch.size(); ++i) {
    const RecommendationSample& sample = *batch[i];
    offsets.push_back(static_cast<int64_t>(rows.size()));
    auto lookup = [&](int32_t row) -> int64_t {
      if (dropout && drop(*dropout)) return default_row;
      return !missing.empty() && missing[i] && IsMissing(*missing[i], row) ? default_row : row;
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
  if (!dynamic_cast<RecommendationModel*>(&model)) {
    return absl::InvalidArgumentError("PredictRecommendations: not a recommendation model");
  }
  if (missing.size() > model.evaluated_requests().size()) {
    return absl::InvalidArgumentError(absl::StrCat("PredictRecommendations: ", missing.size(),
                                                   " requests, the model evaluates ",
                                                   model.evaluated_requests().size()));
  }
  std::vector<ExampleQuery> queries;
  for (size_t i = 0; i < missing.size(); ++i) {
    queries.push_back({static_cast<int32_t>(i), &missing[i]});
  }
  const Outcomes logits = model.Score(queries);
  return std::vector<float>(logits.begin(), logits.end());
}

absl::StatusOr<Outcomes> LanguageOutcomesWithTorch(const WorkloadModel& model,
                                                   absl::Span<const ExampleQuery> queries) {
  const auto* language = dynamic_cast<const WordModel*>(&model);
  if (!language) return absl::InvalidArgumentError("not a language model");
  return language->ScoreWithTorch(queries);
}

absl::StatusOr<std::unique_ptr<WorkloadModel>> TrainModel(const Workload& workload,
                                                          const TrainOptions& options) {
  auto models = TrainModels(workload, options, {options.seed});
  if (!models.ok()) return models.status();
  return std::move(models->front());
}

absl::StatusOr<std::vector<std::unique_ptr<WorkloadModel>>> TrainModels(
    const Workload& workload, const TrainOptions& options, const std::vector<uint64_t>& seeds) {
  if (auto trainable = CheckTrainable(workload); !trainable.ok()) return trainable;
  if (seeds.empty()) return absl::InvalidArgumentError("training: no seeds");
  // The thread count changes the speed, not the model: each output of every reduction training
  // runs is computed by one thread in a fixed order (embedding bags, softmax rows, column sums,
  // each tensor's norm; Debian's reference BLAS is single-threaded). A torch reduction of a
  // large tensor to one scalar (`sum()`) is not — it adds per-thread partial sums — and
  // ModelsTest.SameModelForAnyThreadCount fails if one enters training. Models train side by
  // side, each in its own thread with its share of torch's (OpenMP) threads, which stays set;
  // up to twice as many models as threads, so that no core idles while the last one trains.
  const int parallel =
      std::clamp<int>(static_cast<int>(seeds.size()), 1, 2 * std::max(options.threads, 1));
  const int torch_threads = std::max(1, options.threads / parallel);
  torch::set_num_threads(torch_threads);
  DeterministicAlgorithmsGuard deterministic;
  std::vector<std::unique_ptr<WorkloadModel>> models(seeds.size());
  std::vector<absl::Status> statuses(seeds.size());
  std::mutex global_generator;
  std::atomic<size_t> next{0};
  auto train = [&] {
    torch::set_num_threads(torch_threads);
    for (size_t i; (i = next++) < seeds.size();) {
      TrainOptions seeded = options;
      seeded.seed = seeds[i];
      try {
        std::unique_ptr<RecommendationModel> recommendation;
        std::unique_ptr<WordModel> language;
        {
          // A model's initial parameters come from torch's global generator: seeded before the
          // model is built (unseeded, it starts from a random seed in every process), one model
          // at a time. Training draws from the model's own generators only.
          std::lock_guard<std::mutex> lock(global_generator);
          torch::manual_seed(seeded.seed);
          if (workload.kind == WorkloadKind::kRecommendation) {
            recommendation = std::make_unique<RecommendationModel>(workload, seeded);
          } else {
            language = std::make_unique<WordModel>(workload, seeded);
          }
        }
        if (recommendation) {
          recommendation->Train(parallel == 1);
          models[i] = std::move(recommendation);
        } else {
          language->Train(parallel == 1);
          models[i] = std::move(language);
        }
      } catch (const c10::Error& e) {
        statuses[i] = absl::InternalError(absl::StrCat("training: ", e.what_without_backtrace()));
      }
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < parallel; ++t) workers.emplace_back(train);
  train();
  for (std::thread& worker : workers) worker.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return models;
}

}  // namespace veil::training
