// The language model's forward pass (models.cc's LanguageModelImpl: word embeddings → 2-layer
// LSTM → projection → output layer tied to the embeddings) in plain C++, for scoring the many
// (window, missing rows) pairs of a sweep: with Debian's reference BLAS, torch spends most of
// that time in small matrix products, which loops over transposed weights (vectorised by the
// compiler) do several times faster. torch's forward stays the reference: the results agree up
// to float rounding (ModelsTest.FastLanguageScoresMatchTorch).
#ifndef VEIL_TRAINING_TOOLS_LANGUAGE_SCORER_H_
#define VEIL_TRAINING_TOOLS_LANGUAGE_SCORER_H_

#include <array>
#include <cstdint>
#include <vector>

namespace veil::training {

// One LSTM layer, gates in torch's order (input, forget, cell, output), weights transposed so
// that the products run along contiguous gate rows.
struct LstmLayerWeights {
  int input = 0, hidden = 0;
  std::vector<float> input_weights;   // input × 4·hidden (torch's weight_ih, transposed)
  std::vector<float> hidden_weights;  // hidden × 4·hidden (weight_hh, transposed)
  std::vector<float> bias;            // 4·hidden: bias_ih + bias_hh
};

struct LanguageModelWeights {
  int32_t rows = 0;  // vocabulary
  int dim = 0;
  std::vector<float> table;  // (rows + 1) × dim: the trained rows, then the default row
  std::array<LstmLayerWeights, 2> layers;
  std::vector<float> projection;       // hidden × dim (transposed)
  std::vector<float> projection_bias;  // dim
  std::vector<float> output;           // dim × rows: the tied output layer (the table, transposed)
  std::vector<float> output_bias;      // rows
};

// The summed negative log-likelihood of window[t + 1] after window[0..t], over t < size − 1,
// with the input rows in `missing` (sorted) replaced by the default row. Thread-safe.
double WindowNll(const LanguageModelWeights& weights, const std::vector<int32_t>& window,
                 const std::vector<int32_t>& missing);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_LANGUAGE_SCORER_H_
