// What the device runners of the QP key-switching kernels share (the expansion's, gpu/expansion.cu,
// and the deferred switches', gpu/deferred.cu): one __global__ instantiation per stage of a phased
// kernel, and the QP tables' transform roots on a device. CUDA code only (the .cu files).
#ifndef VEIL_GPU_INTERNAL_QP_DEVICE_H_
#define VEIL_GPU_INTERNAL_QP_DEVICE_H_

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpu/expansion.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/runners.h"

namespace veil::gpu::internal {

// Block b of stage kStage of a phased kernel: Block(run, args, stage, b, shared).
template <class Args, class Stage,
          void (*Block)(BlockRunner&, const Args&, Stage, uint32_t, uint32_t*), Stage kStage>
__global__ void __launch_bounds__(kNttBlockThreads) StageKernel(const Args a) {
  extern __shared__ uint32_t shared[];
  BlockRunner run;
  Block(run, a, kStage, blockIdx.x, shared);
}

// The kernels of stages 0 .. kStages - 1, by stage (one instantiation each: a stage's registers
// are its own).
template <class Args, class Stage,
          void (*Block)(BlockRunner&, const Args&, Stage, uint32_t, uint32_t*), uint32_t... kI>
std::array<void (*)(const Args), sizeof...(kI)> StageKernels(
    std::integer_sequence<uint32_t, kI...>) {
  return {&StageKernel<Args, Stage, Block, static_cast<Stage>(kI)>...};
}

// The 32-bit forward and inverse roots of each prime of QP on the current device, freed with the
// object.
struct DeviceQpRoots {
  std::vector<uint32_t*> roots, iroots;

  DeviceQpRoots() = default;
  DeviceQpRoots(const DeviceQpRoots&) = delete;
  DeviceQpRoots& operator=(const DeviceQpRoots&) = delete;
  ~DeviceQpRoots() {
    for (uint32_t* p : roots) cudaFree(p);
    for (uint32_t* p : iroots) cudaFree(p);
  }

  absl::Status Upload(const QpTables& t) {
    for (const MontgomeryNttTables& table : t.tables) {
      roots.push_back(nullptr);
      iroots.push_back(nullptr);
      VEIL_RETURN_IF_ERROR(UploadNew(&roots.back(), table.roots32.data(), table.roots32.size()));
      VEIL_RETURN_IF_ERROR(
          UploadNew(&iroots.back(), table.inverse_roots32.data(), table.inverse_roots32.size()));
    }
    return absl::OkStatus();
  }
};

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_QP_DEVICE_H_
