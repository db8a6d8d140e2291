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

// K CUDA events on the current device, created by Create and destroyed with the object (on every
// path, errors included).
template <int K>
struct Events {
  cudaEvent_t e[K] = {};
  Events() = default;
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    for (cudaEvent_t x : e) {
      if (x != nullptr) cudaEventDestroy(x);
    }
  }
  absl::Status Create() {
    for (cudaEvent_t& x : e) VEIL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&x));
    return absl::OkStatus();
  }
  // The seconds from event `from` to event `to`, both completed.
  absl::Status Seconds(int from, int to, double& seconds) const {
    float ms = 0;
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e[from], e[to]));
    seconds = ms / 1e3;
    return absl::OkStatus();
  }
};

// The median of `reps` runs' device seconds: before() (untimed: uploads), then launch() between
// two events on `stream`. One untimed warm-up run first.
template <class Before, class Launch>
absl::StatusOr<double> MedianLaunchSeconds(cudaStream_t stream, int reps, Before&& before,
                                           Launch&& launch) {
  if (reps <= 0) return absl::InvalidArgumentError("reps must be positive");
  VEIL_RETURN_IF_ERROR(before());
  VEIL_RETURN_IF_ERROR(launch());
  Events<2> ev;
  VEIL_RETURN_IF_ERROR(ev.Create());
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    VEIL_RETURN_IF_ERROR(before());
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[0], stream));
    VEIL_RETURN_IF_ERROR(launch());
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[1], stream));
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev.e[1]));
    VEIL_RETURN_IF_ERROR(ev.Seconds(0, 1, seconds.emplace_back()));
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_CUDA_TIMING_H_
