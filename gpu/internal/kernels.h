// Host entry points of the CUDA kernels (gpu/kernels.cu): dispatch and launch only; the math is
// in gpu/internal/phases.h. Internal: uses CUDA types.
#ifndef VEIL_GPU_INTERNAL_KERNELS_H_
#define VEIL_GPU_INTERNAL_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

// Lets the fused kernels of `body` use up to `shared_bytes` of dynamic shared memory (above the
// 48 KiB default) on the current device, and returns how many such blocks fit on one SM.
absl::StatusOr<int> ConfigureFusedKernel(Body body, uint32_t shared_bytes);

// Answers one key group: for level-by-level first the level launches (roots, then one launch
// per level), then the fused kernel with grid (grid_x, ceil(num_keys / K)). `a.out` must be
// zeroed. Asynchronous on `stream`; returns launch errors.
absl::Status LaunchAnswer(const LaunchArgs& a, Body body, uint32_t grid_x, uint32_t level_grid,
                          cudaStream_t stream);

// out[i] = sum (or XOR) over r < ranks of gathered[r * rank_stride + i], i < count: combines
// the partial answers of a row split after the NCCL all-gather.
absl::Status LaunchCombine(const uint32_t* gathered, int ranks, uint64_t rank_stride,
                           uint64_t count, bool xor_op, uint32_t* out, cudaStream_t stream);

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_KERNELS_H_
