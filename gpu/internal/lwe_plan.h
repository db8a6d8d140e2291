// How the LWE product is cut into kernel launches, shared by the device (gpu/lwe_product.cu) and
// the host run: queries go in passes of at most 16 (CUDA cores) or 32 (tensor cores), each pass
// compiled for a power-of-two query count KB >= its queries (the unused ones read as zero).
// Host-only, no CUDA.
#ifndef VEIL_GPU_INTERNAL_LWE_PLAN_H_
#define VEIL_GPU_INTERNAL_LWE_PLAN_H_

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/internal/lwe_phases.h"
#include "gpu/lwe.h"

namespace veil::gpu::internal {

struct LwePass {
  int first = 0;    // the pass's first query
  int queries = 0;  // how many
  int kb = 0;       // the compiled query count: 1 .. 16 (CUDA cores), 4 .. 32 (tensor cores)
};

inline bool UsesTensorCores(LweGpuMethod method, int batch, int tensor_min_batch) {
  return method == LweGpuMethod::kTensorCores ||
         (method == LweGpuMethod::kAuto && batch >= tensor_min_batch);
}

inline std::vector<LwePass> PlanLwePasses(int batch, bool tensor) {
  const int most = tensor ? kLweTcMaxQueries : kLweCoreMaxQueries;
  std::vector<LwePass> passes;
  for (int first = 0; first < batch; first += most) {
    LwePass p;
    p.first = first;
    p.queries = std::min(most, batch - first);
    p.kb = tensor ? 4 : 1;
    while (p.kb < p.queries) p.kb *= 2;
    passes.push_back(p);
  }
  return passes;
}

// The argument checks of every LWE product call.
inline absl::Status CheckLweCall(const lattice::ByteMatrixView& db,
                                 absl::Span<const uint32_t> queries, int batch,
                                 absl::Span<uint32_t> out) {
  if (db.data == nullptr || db.rows == 0 || db.cols == 0 || db.stride % 64 != 0 ||
      db.stride < db.cols) {
    return absl::InvalidArgumentError(
        "the GPU product needs a non-empty matrix whose stride is a multiple of 64");
  }
  if (batch < 1 || queries.size() != static_cast<uint64_t>(batch) * db.cols ||
      out.size() != static_cast<uint64_t>(batch) * db.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", batch, " needs ", batch, " x ", db.cols, " query words and ", batch, " x ",
        db.rows, " answer words, got ", queries.size(), " and ", out.size()));
  }
  return absl::OkStatus();
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_LWE_PLAN_H_
