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
//
// Several queries at once (PackingBlock<Q>, Q <= kPackMaxQueries): each matrix word read serves
// the Q queries' keys, as the CPU's DeferredPacking::SumsBatch streams its folded matrix once for
// several queries. The matrix, the pass's main traffic, is read once per Q queries instead of
// once per query; each thread keeps 4 Q 64-bit accumulators in registers.
#ifndef VEIL_GPU_INTERNAL_PACKING_PHASES_H_
#define VEIL_GPU_INTERNAL_PACKING_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kPackThreads = 256;
inline constexpr uint32_t kPackMaxQueries = 8;

struct PackingArgs {
  const uint32_t* matrix = nullptr;  // A_{g,j}[s] at (g * lwe_n + j) * slots + s
  uint32_t lwe_n = 0;
  uint32_t slots = 0;  // k x N
  uint32_t log_n = 0;
  uint32_t count = 0;               // keys this call, per query
  const uint32_t* index = nullptr;  // their indices j (< lwe_n), the same for every query
  const uint32_t* beta = nullptr;   // query q's key t, slot s at q * key_stride + t * slots + s
  const uint32_t* alpha = nullptr;
  uint64_t key_stride = 0;           // words from one query's keys to the next's (Q > 1)
  const uint64_t* moduli = nullptr;  // q_p, below 2^32
  const uint64_t* two64 = nullptr;   // 2^64 mod q_p
  uint64_t* sums = nullptr;  // query q's at q * sum_stride + (g * 2 + h) * slots + s, below q_p
  uint64_t sum_stride = 0;   // words from one query's sums to the next's (Q > 1)
};

// (prior + hi 2^64 + lo) mod q for prior < q < 2^32 and hi < 2^32: hi two64 < 2^64.
VEIL_HD uint64_t FoldSum(uint64_t prior, uint64_t hi, uint64_t lo, uint64_t q, uint64_t two64) {
  return ((hi * two64) % q + lo % q + prior) % q;
}

// The sums of Q queries' keys (Q = 1: one query; key_stride and sum_stride unused).
VEIL_GPU_EXEC_CHECK_DISABLE
template <uint32_t Q, class Runner>
VEIL_HD void PackingBlock(Runner& run, const PackingArgs& a, uint32_t block, uint32_t group) {
  static_assert(Q >= 1 && Q <= kPackMaxQueries);
  run.Phase(kPackThreads, [&](uint32_t t) {
    const uint32_t s = block * kPackThreads + t;
    if (s >= a.slots) return;
    const uint32_t p = s >> a.log_n;
    const uint32_t* column = a.matrix + uint64_t{group} * a.lwe_n * a.slots + s;
    uint64_t lo[2 * Q], hi[2 * Q];
    VEIL_GPU_UNROLL
    for (uint32_t i = 0; i < 2 * Q; ++i) lo[i] = hi[i] = 0;
    for (uint32_t j = 0; j < a.count; ++j) {
      const uint64_t m = column[uint64_t{a.index[j]} * a.slots];
      const uint64_t key = uint64_t{j} * a.slots + s;
      VEIL_GPU_UNROLL
      for (uint32_t q = 0; q < Q; ++q) {
        const uint64_t p0 = m * a.beta[q * a.key_stride + key];
        const uint64_t p1 = m * a.alpha[q * a.key_stride + key];
        lo[2 * q] += p0;
        hi[2 * q] += lo[2 * q] < p0;
        lo[2 * q + 1] += p1;
        hi[2 * q + 1] += lo[2 * q + 1] < p1;
      }
    }
    VEIL_GPU_UNROLL
    for (uint32_t q = 0; q < Q; ++q) {
      uint64_t* out = a.sums + q * a.sum_stride + uint64_t{group} * 2 * a.slots + s;
      out[0] = FoldSum(out[0], hi[2 * q], lo[2 * q], a.moduli[p], a.two64[p]);
      out[a.slots] = FoldSum(out[a.slots], hi[2 * q + 1], lo[2 * q + 1], a.moduli[p], a.two64[p]);
    }
  });
}

// f.operator()<queries>() for queries in [1, kPackMaxQueries] (more: 8), on the host: the
// launches' dispatch to PackingBlock<Q>.
template <class F>
void WithPackQueries(uint32_t queries, F&& f) {
  switch (queries) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 5:
      return f.template operator()<5>();
    case 6:
      return f.template operator()<6>();
    case 7:
      return f.template operator()<7>();
    default:
      return f.template operator()<8>();
  }
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
