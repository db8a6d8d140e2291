#include "embedding/torch_table.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace veil::embedding {

absl::Status WriteTableFromTensor(const torch::Tensor& tensor, const std::string& out_path,
                                  RowFormat format, const TableOptions& options) {
  if (!tensor.defined() || tensor.dim() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("the tensor must be 2-D [rows, dim], got ",
                                                   tensor.defined() ? tensor.dim() : 0, " dims"));
  }
  if (!tensor.is_floating_point()) {
    return absl::InvalidArgumentError(absl::StrCat("the tensor must be floating point, got ",
                                                   std::string(tensor.dtype().name())));
  }
  const int64_t rows = tensor.size(0);
  const int64_t dim = tensor.size(1);
  if (rows == 0 || dim == 0 || dim > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tensor is [", rows, ", ", dim, "]: needs rows >= 1 and dim in [1, ", kMaxDim, "]"));
  }
  // Detached so that a parameter with requires_grad converts without recording autograd history.
  const torch::Tensor values = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return WriteTable(
      out_path, format, static_cast<uint32_t>(dim),
      absl::MakeConstSpan(values.data_ptr<float>(), static_cast<size_t>(values.numel())), options);
}

}  // namespace veil::embedding
