// Ring packing's sums on the GPU (pir/lattice/packing.h's PackAccumulator) as per-thread phases,
// written once for the device runner (gpu/packing.cu) and the host runner
// (gpu/packing_host_run.cc), as gpu/internal/phases.h does for the DPF kernels.
//
// For each group g of a PackingMatrix and each of its k x N NTT slots s (prime p = s / N):
//     sums[g][0][s] += sum_j A_{g, index[j]}[s] beta_j[s],
//     sums[g][1][s] += sum_j A_{g, index[j]}[s] alpha_j[s]          (mod q_p).
// In each slot this is a row of the GEMM (groups x n) . (n x 2) of VIPIR's packing, on INT32
// residues. A thread owns one slot of up to kPackGroupsPerThread groups and a chunk of the keys
// (grid: group blocks x slot blocks x key chunks) and walks them, each key's two residues loaded
// once for all its groups:
// products of residues below 2^32 accumulate lazily in 96 bits (a 64-bit sum and a count of its
// carries, at most the number of keys), reduced once at the end into the chunk's partial sums,
// which a second launch adds up (PackingFoldBlock). Consecutive threads take consecutive slots of
// one polynomial, so every load of the matrix and of the keys is coalesced.
// (One group per thread read the keys, 96 MiB at n = 1,024, once per group: more bytes than the
// matrix itself, at 0.15 to 0.29 of the HBM bandwidth on an H200.)
#ifndef VEIL_GPU_INTERNAL_PACKING_PHASES_H_
#define VEIL_GPU_INTERNAL_PACKING_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kPackThreads = 256;
inline constexpr uint32_t kPackGroupsPerThread = 8;

struct PackingArgs {
  const uint32_t* matrix = nullptr;  // A_{g,j}[s] at (g * lwe_n + j) * slots + s
  uint32_t groups = 0;
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
  // The keys in chunks of chunk_keys, one grid layer each (PackingKeyChunks): chunk c's sums,
  // reduced, at partial + (c * groups * 2 + g * 2 + h) * slots + s; PackingFoldBlock adds them.
  uint32_t chunk_keys = 0;
  uint64_t* partial = nullptr;
};

// (prior + hi 2^64 + lo) mod q for prior < q < 2^32 and hi < 2^32: hi two64 < 2^64.
VEIL_HD uint64_t FoldSum(uint64_t prior, uint64_t hi, uint64_t lo, uint64_t q, uint64_t two64) {
  return ((hi * two64) % q + lo % q + prior) % q;
}

// Block `block` of slots for groups [kPackGroupsPerThread group_block, + kPackGroupsPerThread)
// over the keys of chunk `chunk`.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PackingBlock(Runner& run, const PackingArgs& a, uint32_t block, uint32_t group_block,
                          uint32_t chunk) {
  run.Phase(kPackThreads, [&](uint32_t t) {
    const uint32_t s = block * kPackThreads + t;
    if (s >= a.slots) return;
    const uint32_t p = s >> a.log_n, g0 = group_block * kPackGroupsPerThread;
    const uint32_t groups =
        a.groups - g0 < kPackGroupsPerThread ? a.groups - g0 : kPackGroupsPerThread;
    const uint32_t first = chunk * a.chunk_keys;
    const uint32_t last = first >= a.count                 ? first
                          : a.count - first < a.chunk_keys ? a.count
                                                           : first + a.chunk_keys;
    const uint64_t group_stride = uint64_t{a.lwe_n} * a.slots;
    const uint32_t* column = a.matrix + g0 * group_stride + s;
    // Per group: the beta and alpha sums' low 64 bits and carries (register arrays: every index
    // below is a constant once the loops unroll).
    uint64_t lo0[kPackGroupsPerThread] = {}, lo1[kPackGroupsPerThread] = {};
    uint32_t hi0[kPackGroupsPerThread] = {}, hi1[kPackGroupsPerThread] = {};
    for (uint32_t j = first; j < last; ++j) {
      const uint64_t b = a.beta[uint64_t{j} * a.slots + s];
      const uint64_t al = a.alpha[uint64_t{j} * a.slots + s];
      const uint32_t* at = column + uint64_t{a.index[j]} * a.slots;
      for (uint32_t i = 0; i < kPackGroupsPerThread; ++i) {
        if (i >= groups) break;
        const uint64_t m = at[i * group_stride];
        const uint64_t p0 = m * b, p1 = m * al;
        lo0[i] += p0;
        hi0[i] += lo0[i] < p0;
        lo1[i] += p1;
        hi1[i] += lo1[i] < p1;
      }
    }
    uint64_t* out = a.partial + (uint64_t{chunk} * a.groups + g0) * 2 * a.slots + s;
    for (uint32_t i = 0; i < kPackGroupsPerThread; ++i) {
      if (i >= groups) break;
      out[2ull * i * a.slots] = FoldSum(0, hi0[i], lo0[i], a.moduli[p], a.two64[p]);
      out[(2ull * i + 1) * a.slots] = FoldSum(0, hi1[i], lo1[i], a.moduli[p], a.two64[p]);
    }
  });
}

// The chunks' partial sums added to the sums: item i of groups x 2 x slots (block `block`).
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PackingFoldBlock(Runner& run, const PackingArgs& a, uint32_t chunks, uint32_t block) {
  run.Phase(kPackThreads, [&](uint32_t t) {
    const uint64_t words = uint64_t{a.groups} * 2 * a.slots;
    const uint64_t i = uint64_t{block} * kPackThreads + t;
    if (i >= words) return;
    const uint64_t q = a.moduli[(i % a.slots) >> a.log_n];
    uint64_t sum = a.sums[i];  // chunks + 1 terms below 2^32
    for (uint32_t c = 0; c < chunks; ++c) sum += a.partial[c * words + i];
    a.sums[i] = sum % q;
  });
}

// Grid of a pass: group blocks x slot blocks x key chunks, the chunks enough for about
// kPackBlocks blocks (a device's worth; fewer, the few groups of a small table left most SMs
// idle) of at least kPackChunkMinKeys keys each. A pure function of the shape, so the host run
// cuts the keys as the device does.
inline constexpr uint32_t kPackBlocks = 512, kPackChunkMinKeys = 32;
inline uint32_t PackingSlotBlocks(uint32_t slots) {
  return (slots + kPackThreads - 1) / kPackThreads;
}
inline uint32_t PackingGroupBlocks(uint64_t groups) {
  return static_cast<uint32_t>((groups + kPackGroupsPerThread - 1) / kPackGroupsPerThread);
}
inline uint32_t PackingKeyChunks(uint64_t groups, uint32_t slots, uint32_t count) {
  const uint64_t blocks = uint64_t{PackingGroupBlocks(groups)} * PackingSlotBlocks(slots);
  const uint64_t want = (kPackBlocks + blocks - 1) / blocks;
  const uint64_t most = count / kPackChunkMinKeys > 1 ? count / kPackChunkMinKeys : 1;
  return static_cast<uint32_t>(want < most ? want : most);
}
// Keys per chunk for `chunks` chunks (the last may hold fewer, or none: its sums are zeros).
inline uint32_t PackingChunkKeys(uint32_t count, uint32_t chunks) {
  return (count + chunks - 1) / chunks;
}
inline uint32_t PackingFoldBlocks(uint64_t groups, uint32_t slots) {
  return static_cast<uint32_t>((groups * 2 * slots + kPackThreads - 1) / kPackThreads);
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
