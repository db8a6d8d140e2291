// Writes a table file from a libtorch tensor (an nn.Embedding weight, say). In its own target,
// veil_embedding_torch, so that nothing else in embedding/ needs libtorch.
#ifndef VEIL_EMBEDDING_TORCH_TABLE_H_
#define VEIL_EMBEDDING_TORCH_TABLE_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/status.h"
#include "embedding/row_format.h"
#include "embedding/table_builder.h"

namespace veil::embedding {

// Writes `tensor` ([rows, dim], any floating dtype, any device and layout; converted to contiguous
// CPU float32 first) as WriteTable does.
// Returns INVALID_ARGUMENT if the tensor is not 2-D, not floating point, or has no rows or a dim
// outside [1, kMaxDim], and otherwise what WriteTable returns.
absl::Status WriteTableFromTensor(const torch::Tensor& tensor, const std::string& out_path,
                                  RowFormat format, const TableOptions& options);

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_TORCH_TABLE_H_
