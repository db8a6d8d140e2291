// Every CUDA (and NCCL) call's status becomes an absl::Status at the gpu/ boundary.
#ifndef VEIL_GPU_INTERNAL_CUDA_CHECK_H_
#define VEIL_GPU_INTERNAL_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::gpu::internal {

// `e` from `expr` as a Status. A failed runtime call also leaves `e` as the thread's last error,
// which the next launch's cudaGetLastError() check would take for its own: cleared here (a sticky
// error, after which the context is unusable, stays).
inline absl::Status CudaError(cudaError_t e, const char* expr, const char* file, int line) {
  cudaGetLastError();
  std::string msg = absl::StrCat(expr, " failed: ", cudaGetErrorName(e), " (",
                                 cudaGetErrorString(e), ") at ", file, ":", line);
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace veil::gpu::internal

#define VEIL_CUDA_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                       \
    cudaError_t veil_cuda_status_ = (expr);                                                  \
    if (veil_cuda_status_ != cudaSuccess) {                                                  \
      return ::veil::gpu::internal::CudaError(veil_cuda_status_, #expr, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)

#define VEIL_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status veil_status_ = (expr);        \
    if (!veil_status_.ok()) return veil_status_; \
  } while (0)

namespace veil::gpu::internal {

// UNAVAILABLE unless `device` is one of this machine's CUDA devices (the sticky error of a failed
// count cleared).
inline absl::Status CheckDevice(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("no CUDA device ", device));
  }
  return absl::OkStatus();
}

// Host-to-device cudaMemcpy from pageable memory may return once the data is staged, before it has
// landed, on the legacy default stream, which the kernels' non-blocking streams do not wait for:
// waits for the copy to land.
inline absl::Status CopyToDevice(void* to, const void* from, size_t bytes) {
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpy(to, from, bytes, cudaMemcpyHostToDevice));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy));
  return absl::OkStatus();
}

// A new buffer of `count` elements (at least one) on the current device, holding from[0, count)
// once this returns (CopyToDevice).
template <class T>
absl::Status UploadNew(T** to, const T* from, size_t count) {
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(to, (count > 0 ? count : 1) * sizeof(T)));
  if (count > 0) VEIL_RETURN_IF_ERROR(CopyToDevice(*to, from, count * sizeof(T)));
  return absl::OkStatus();
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_CUDA_CHECK_H_
