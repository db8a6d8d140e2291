// What the device runners of the QP key-switching kernels share (the expansion's, gpu/expansion.cu,
// and the deferred switches', gpu/deferred.cu): one __global__ instantiation per stage of a phased
// kernel, a device object's start, and the QP tables' transform roots on a device. CUDA code only
// (the .cu files).
#ifndef VEIL_GPU_INTERNAL_QP_DEVICE_H_
#define VEIL_GPU_INTERNAL_QP_DEVICE_H_

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/expansion.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/runners.h"
#include "pir/lattice/rlwe.h"

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

// The start the device objects of a lattice ring share (GpuExpansion, GpuDeferredSwitches,
// GpuResponseSwitch): `device` checked and made current, a new Impl made from a copy of the ring
// with its device, plan and a non-blocking stream set. UNAVAILABLE without the device, INTERNAL
// for CUDA failures.
template <class Impl, class Plan>
absl::StatusOr<std::unique_ptr<Impl>> StartOnDevice(const lattice::RingContext& ctx, Plan plan,
                                                    int device) {
  VEIL_RETURN_IF_ERROR(CheckDevice(device));
  absl::StatusOr<lattice::RingContext> ring = lattice::RingContext::Create(ctx.params());
  if (!ring.ok()) return ring.status();
  auto impl = std::make_unique<Impl>(*std::move(ring));
  impl->device = device;
  impl->plan = std::move(plan);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  return impl;
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
