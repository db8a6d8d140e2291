#include "training_tools/language_scorer.h"

#include <algorithm>
#include <cmath>

namespace veil::training {
namespace {

// out[j] += Σ_k x[k] · weights[k·n + j] for j < n: along contiguous rows of the transposed
// weights, so that the inner loop vectorises.
void AddProduct(const float* weights, const float* x, int k_count, int n, float* out) {
  for (int k = 0; k < k_count; ++k) {
    const float xk = x[k];
    const float* row = weights + static_cast<size_t>(k) * n;
    for (int j = 0; j < n; ++j) out[j] += xk * row[j];
  }
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// One LSTM step: h, c (hidden each) from input x.
void LstmStep(const LstmLayerWeights& layer, const float* x, float* h, float* c, float* gates) {
  const int hidden = layer.hidden;
  std::copy(layer.bias.begin(), layer.bias.end(), gates);
  AddProduct(layer.input_weights.data(), x, layer.input, 4 * hidden, gates);
  AddProduct(layer.hidden_weights.data(), h, hidden, 4 * hidden, gates);
  for (int j = 0; j < hidden; ++j) {
    const float input = Sigmoid(gates[j]);
    const float forget = Sigmoid(gates[hidden + j]);
    const float cell = std::tanh(gates[2 * hidden + j]);
    const float output = Sigmoid(gates[3 * hidden + j]);
    c[j] = forget * c[j] + input * cell;
    h[j] = output * std::tanh(c[j]);
  }
}

}  // namespace

double WindowNll(const LanguageModelWeights& weights, const std::vector<int32_t>& window,
                 const std::vector<int32_t>& missing) {
  const int hidden = weights.layers[0].hidden, dim = weights.dim;
  const int32_t rows = weights.rows;
  std::vector<float> h0(hidden, 0), c0(hidden, 0), h1(hidden, 0), c1(hidden, 0);
  std::vector<float> gates(4 * hidden), projected(dim), logits(rows);
  double nll = 0;
  for (size_t t = 0; t + 1 < window.size(); ++t) {
    const int32_t row =
        std::binary_search(missing.begin(), missing.end(), window[t]) ? rows : window[t];
    LstmStep(weights.layers[0], &weights.table[static_cast<size_t>(row) * dim], h0.data(),
             c0.data(), gates.data());
    LstmStep(weights.layers[1], h0.data(), h1.data(), c1.data(), gates.data());
    std::copy(weights.projection_bias.begin(), weights.projection_bias.end(), projected.begin());
    AddProduct(weights.projection.data(), h1.data(), hidden, dim, projected.data());
    std::copy(weights.output_bias.begin(), weights.output_bias.end(), logits.begin());
    AddProduct(weights.output.data(), projected.data(), dim, rows, logits.data());
    const float top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float logit : logits) sum += std::exp(logit - top);
    nll += std::log(sum) + top - logits[window[t + 1]];
  }
  return nll;
}

}  // namespace veil::training
