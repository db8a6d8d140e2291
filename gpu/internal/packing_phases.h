// Ring packing's sums on the GPU (pir/lattice/packing.h's PackAccumulator) as per-thread phases,
// written once for the device runner (gpu/packing.cu) and the host runner
// (gpu/packing_host_run.cc), as gpu/internal/phases.h does for the DPF kernels.
//
// For each group g of a PackingMatrix and each of its k x N NTT slots s (prime p = s / N):
//     sums[g][0][s] += sum_j A_{g, index[j]}[s] beta_j[s],
//     sums[g][1][s] += sum_j A_{g, index[j]}[s] alpha_j[s]          (mod q_p).
// In each slot this is a row of the GEMM (groups x n) . (n x 2) of VIPIR's packing, on INT32
// residues. A thread owns one slot of one group (grid: groups x slot blocks) and walks the keys:
// products of residues below 2^32 accumulate lazily in 96 bits (a 64-bit sum and a count of its
// carries, at most the number of keys), reduced once at the end. Consecutive threads take
// consecutive slots of one polynomial, so every load of the matrix and of the keys is coalesced;
// the blocks of one slot range (one per group) run side by side, so the keys come from HBM once
// and from L2 for the other groups.
#ifndef VEIL_GPU_INTERNAL_PACKING_PHASES_H_
#define VEIL_GPU_INTERNAL_PACKING_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kPackThreads = 256;

struct PackingArgs {
  const uint32_t* matrix = nullptr;  // A_{g,j}[s] at (g * lwe_n + j) * slots + s
  uint32_t lwe_n = 0;
  uint32_t slots = 0;  // k x N
  uint32_t log_n = 0;
  uint32_t count = 0;               // keys this call
  const uint32_t* index = nullptr;  // their indices j (< lwe_n)
  const uint32_t* beta = nullptr;   // key t's slot s at t * slots + s
  const uint32_t* alpha = nullptr;
  const uint64_t* moduli = nullptr;  // q_p, below 2^32
  const uint64_t* two64 = nullptr;   // 2^64 mod q_p
  uint64_t* sums = nullptr;          // (g * 2 + h) * slots + s, each below its q_p
};

// (prior + hi 2^64 + lo) mod q for prior < q < 2^32 and hi < 2^32: hi two64 < 2^64.
VEIL_HD uint64_t FoldSum(uint64_t prior, uint64_t hi, uint64_t lo, uint64_t q, uint64_t two64) {
  return ((hi * two64) % q + lo % q + prior) % q;
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PackingBlock(Runner& run, const PackingArgs& a, uint32_t block, uint32_t group) {
  run.Phase(kPackThreads, [&](uint32_t t) {
    const uint32_t s = block * kPackThreads + t;
    if (s >= a.slots) return;
    const uint32_t p = s >> a.log_n;
    const uint32_t* column = a.matrix + uint64_t{group} * a.lwe_n * a.slots + s;
    uint64_t lo0 = 0, lo1 = 0, hi0 = 0, hi1 = 0;
    for (uint32_t j = 0; j < a.count; ++j) {
      const uint64_t m = column[uint64_t{a.index[j]} * a.slots];
      const uint64_t p0 = m * a.beta[uint64_t{j} * a.slots + s];
      const uint64_t p1 = m * a.alpha[uint64_t{j} * a.slots + s];
      lo0 += p0;
      hi0 += lo0 < p0;
      lo1 += p1;
      hi1 += lo1 < p1;
    }
    uint64_t* out = a.sums + uint64_t{group} * 2 * a.slots + s;
    out[0] = FoldSum(out[0], hi0, lo0, a.moduli[p], a.two64[p]);
    out[a.slots] = FoldSum(out[a.slots], hi1, lo1, a.moduli[p], a.two64[p]);
  });
}

// The expansion's leaves (gpu/expansion.h: leaf j's beta at 2 j slots, its alpha from
// (2 j + 1) slots, residues below 2^32) as the packing reads its keys: beta_j at j slots and
// alpha_j at (lwe_n + j) slots of `keys`, with index[j] = j. One thread per (leaf, slot).
struct NarrowArgs {
  const uint64_t* leaves = nullptr;
  uint32_t* keys = nullptr;
  uint32_t lwe_n = 0;
  uint32_t slots = 0;
};

VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void NarrowLeavesBlock(Runner& run, const NarrowArgs& a, uint32_t block) {
  run.Phase(kPackThreads, [&](uint32_t t) {
    const uint64_t i = uint64_t{block} * kPackThreads + t;
    if (i >= uint64_t{a.lwe_n} * a.slots) return;
    const uint64_t j = i / a.slots, s = i % a.slots;
    a.keys[i] = static_cast<uint32_t>(a.leaves[2 * j * a.slots + s]);
    a.keys[uint64_t{a.lwe_n} * a.slots + i] =
        static_cast<uint32_t>(a.leaves[(2 * j + 1) * a.slots + s]);
  });
}

inline uint32_t NarrowBlocks(uint32_t lwe_n, uint32_t slots) {
  return static_cast<uint32_t>((uint64_t{lwe_n} * slots + kPackThreads - 1) / kPackThreads);
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_PACKING_PHASES_H_
