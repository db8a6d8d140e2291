// The runners of the kernels whose phases need nothing but Phase (the NTT, ExpPack's expansion,
// the packing sums, the switch to q'): the device's, where every thread of the block takes the
// items threadIdx.x, threadIdx.x + blockDim.x, ... and then waits at the barrier, and the host's,
// which takes them one after the other (items of one phase touch disjoint data, so that order is
// one valid schedule of the device's threads). The DPF and LWE kernels have runners of their own
// (atomics, tensor-core tiles), which take their items and blocks in the same host order.
//
// The host order: first to last, or last to first with VEIL_HOST_RUN_ORDER=reverse in the
// environment, for a launch's blocks and a phase's items alike. Both are valid schedules of the
// device when every item (and every block) writes what no other item of its phase reads or
// writes, so a result that differs between the two is a race on the device (a missing barrier,
// overlapping writes, a read of another block's output): CI runs every host-run test in both
// orders (tests/gpu/CMakeLists.txt). Only the order changes: launches, and phases within a block,
// stay in sequence.
#ifndef VEIL_GPU_INTERNAL_RUNNERS_H_
#define VEIL_GPU_INTERNAL_RUNNERS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace veil::gpu::internal {

enum class HostOrder { kForward, kReverse };

// VEIL_HOST_RUN_ORDER: unset, empty or "forward", or "reverse"; read once. Any other value stops
// the process (a test that meant to reverse must not pass in the forward order).
inline HostOrder HostRunOrder() {
  static const HostOrder order = [] {
    const char* value = std::getenv("VEIL_HOST_RUN_ORDER");
    if (value == nullptr || *value == '\0' || std::strcmp(value, "forward") == 0) {
      return HostOrder::kForward;
    }
    if (std::strcmp(value, "reverse") == 0) return HostOrder::kReverse;
    std::fprintf(stderr, "VEIL_HOST_RUN_ORDER=%s: expected forward or reverse\n", value);
    std::abort();
  }();
  return order;
}

// Shared memory as a block finds it on the device: undefined. The host runs fill it with this
// byte before every block, so that a phase reading shared memory that no earlier phase of its
// block wrote gets garbage (and fails the comparison with the CPU) rather than zeros or the
// previous block's values.
inline constexpr uint8_t kSharedPoison = 0xa5;
template <class T>
void PoisonShared(std::vector<T>& shared) {
  std::memset(static_cast<void*>(shared.data()), kSharedPoison, shared.size() * sizeof(T));
}

// f(0), ..., f(count - 1) in `order`: a launch's blocks, or the items of a kernel that has no
// blocks.
template <class F>
void HostLoop(uint64_t count, F&& f, HostOrder order = HostRunOrder()) {
  if (order == HostOrder::kForward) {
    for (uint64_t i = 0; i < count; ++i) f(i);
  } else {
    for (uint64_t i = count; i-- > 0;) f(i);
  }
}

struct SequentialRunner {
  HostOrder order = HostRunOrder();
  template <class F>
  void Phase(uint32_t items, F&& f) {
    HostLoop(
        items, [&](uint64_t i) { f(static_cast<uint32_t>(i)); }, order);
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
