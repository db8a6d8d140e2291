// Device time of kernel launches for the benchmarks: CUDA events around each run on a stream.
// CUDA code only (the .cu files).
#ifndef VEIL_GPU_INTERNAL_CUDA_TIMING_H_
#define VEIL_GPU_INTERNAL_CUDA_TIMING_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/internal/cuda_check.h"

namespace veil::gpu::internal {

// The median of `reps` runs' device seconds: before() (untimed: uploads), then launch() between
// two events on `stream`. One untimed warm-up run first.
template <class Before, class Launch>
absl::StatusOr<double> MedianLaunchSeconds(cudaStream_t stream, int reps, Before&& before,
                                           Launch&& launch) {
  if (reps <= 0) return absl::InvalidArgumentError("reps must be positive");
  VEIL_RETURN_IF_ERROR(before());
  VEIL_RETURN_IF_ERROR(launch());
  cudaEvent_t start, stop;
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  if (cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    return CudaError(e, "cudaEventCreate(&stop)", __FILE__, __LINE__);
  }
  std::vector<double> seconds;
  const auto timed = [&]() -> absl::Status {
    for (int r = 0; r < reps; ++r) {
      VEIL_RETURN_IF_ERROR(before());
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
      VEIL_RETURN_IF_ERROR(launch());
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
      float ms = 0;
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
      seconds.push_back(ms / 1e3);
    }
    return absl::OkStatus();
  };
  const absl::Status status = timed();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_CUDA_TIMING_H_
