// Private inference on the device: the recommendation model of models.h run by a client whose
// embedding rows come from two veil servers through PrivateEmbeddingBag (mobile_client/), one
// planned batch-PIR request per inference. Torch-free interface; private_inference.cc holds the
// libtorch code.
#ifndef VEIL_TRAINING_TOOLS_PRIVATE_INFERENCE_H_
#define VEIL_TRAINING_TOOLS_PRIVATE_INFERENCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "embedding/layout.h"
#include "mobile_client/client.h"
#include "training_tools/models.h"
#include "training_tools/workload.h"

namespace veil::training {

using client::CallStats;
using client::Client;

// Writes the table the servers of `layout` serve: the model's embedding table arranged into the
// layout's bins and co-located entries (embedding/layout_table.h), fp32 rows (bit-exact).
// Returns INVALID_ARGUMENT if the layout's rows or dimension are not the model's, and the table
// writer's errors.
absl::Status WriteLayoutTable(const WorkloadModel& model, const embedding::Layout& layout,
                              const std::string& path, uint64_t epoch = 1);

// One PrivateEmbeddingBag::forward (EmbeddingBag's call: 1-D `input` with `offsets`, optional
// `per_sample_weights` for "sum"; mode "sum", "mean" or "max") for callers without libtorch:
// the pooled bags (offsets.size() × dim floats) and, per element of `input`, whether its row was
// missing (replaced by `default_row`). Returns INVALID_ARGUMENT for a bad mode or shapes, and
// the fetch's errors.
struct PooledLookup {
  std::vector<float> pooled;
  std::vector<uint8_t> missing_mask;
  std::vector<int32_t> missing_rows;
  CallStats call;
};
absl::StatusOr<PooledLookup> PrivateEmbeddingBagForward(
    std::shared_ptr<Client> client, const embedding::Layout& layout,
    const std::vector<float>& default_row, const std::vector<int64_t>& input,
    const std::vector<int64_t>& offsets, const std::vector<float>& per_sample_weights,
    const std::string& mode);

struct PrivateInferenceResult {
  std::vector<float> predictions;             // logits, one per request
  std::vector<std::vector<int32_t>> missing;  // per request: rows the planner could not fetch
  std::vector<int64_t> keys;                  // per request: keys sent to each server
  uint64_t bytes_up = 0, bytes_down = 0;      // all requests, both servers, on the sockets
  double seconds = 0;                         // wall time of all requests
};

// Runs the trained recommendation model (TrainModel on a recommendation workload) on the device
// for the first `count` evaluated validation requests of `workload`, one inference at a time:
// the request's rows (history and candidate) are fetched privately with PrivateEmbeddingBag
// under `layout` through `client` (connected to servers of WriteLayoutTable's table), missing
// rows are replaced by the table's mean row, and the model's head scores the candidate.
// Returns INVALID_ARGUMENT for a language model or more requests than the model evaluates,
// FAILED_PRECONDITION if the servers' table is not the layout's, and the client's errors.
absl::StatusOr<PrivateInferenceResult> RunPrivateInference(WorkloadModel& model,
                                                           const Workload& workload,
                                                           const embedding::Layout& layout,
                                                           std::shared_ptr<Client> client,
                                                           size_t count);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_PRIVATE_INFERENCE_H_
