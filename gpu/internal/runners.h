// The runners of the kernels whose phases need nothing but Phase (the NTT, ExpPack's expansion,
// the packing sums, the switch to q'): the device's, where every thread of the block takes the
// items threadIdx.x, threadIdx.x + blockDim.x, ... and then waits at the barrier, and the host's,
// which takes them one after the other (items of one phase touch disjoint data, so that order is
// one valid schedule of the device's threads). The DPF and LWE kernels have runners of their own
// (atomics, tensor-core tiles).
#ifndef VEIL_GPU_INTERNAL_RUNNERS_H_
#define VEIL_GPU_INTERNAL_RUNNERS_H_

#include <cstdint>

namespace veil::gpu::internal {

struct SequentialRunner {
  template <class F>
  void Phase(uint32_t items, F&& f) {
    for (uint32_t i = 0; i < items; ++i) f(i);
  }
};

#if defined(__CUDACC__)
struct BlockRunner {
  template <class F>
  __device__ void Phase(uint32_t items, F&& f) {
    for (uint32_t i = threadIdx.x; i < items; i += blockDim.x) f(i);
    __syncthreads();
  }
};
#endif

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_RUNNERS_H_
