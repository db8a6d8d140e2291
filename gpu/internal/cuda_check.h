// Every CUDA (and NCCL) call's status becomes an absl::Status at the gpu/ boundary.
#ifndef VEIL_GPU_INTERNAL_CUDA_CHECK_H_
#define VEIL_GPU_INTERNAL_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::gpu::internal {

inline absl::Status CudaError(cudaError_t e, const char* expr, const char* file, int line) {
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

#endif  // VEIL_GPU_INTERNAL_CUDA_CHECK_H_
