// The deferred levels' key switches of ExpPack's packing (pir/lattice/deferred_packing.h) on the
// GPU as per-thread phases, written once for the device (gpu/deferred.cu) and the host
// (gpu/deferred_host_run.cc), as the expansion's (gpu/internal/expansion_phases.h), whose
// arithmetic they share.
//
// In: the sums of the G 2^D virtual groups (v = g 2^D + s) against the folded matrix. For each
// group g and element s >= 1, virtual group v's sum is rotated by sigma_s and key-switched back,
// left over QP (he::internal::RotateBeforeModDown: P c0 added to the first half's Q rows, the
// permutation applied to every row); a group's 2^D - 1 results are summed over QP, ModDown'ed
// once and added to its s = 0 sum: lattice::DeferredPacking::Sums' result, bit for bit. Five
// launches (DeferredStage), each of many blocks, the transforms in shared memory; the blocks of
// up to kExpansionMaxQueries queries (each with its own session's keys) side by side.
#ifndef VEIL_GPU_INTERNAL_DEFERRED_PHASES_H_
#define VEIL_GPU_INTERNAL_DEFERRED_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/phases.h"
#include "pir/he/modarith_hd.h"

namespace veil::gpu::internal {

struct DeferredArgs : QpArgs {
  uint32_t groups = 0;    // G
  uint32_t elements = 0;  // 2^D
  // Queries side by side (1 to kExpansionMaxQueries); query q's arrays at index q, its scratch
  // q scratch_stride words into `scratch`.
  uint32_t queries = 1;
  uint64_t scratch_stride = 0;
  // Element s's key (s >= 1; row (d, j) of a half at (d (k + 1) + j) N) at (s - 1) k (k + 1) N,
  // and its Galois permutation of NTT slots at (s - 1) N.
  const uint64_t* key_b[kExpansionMaxQueries] = {};
  const uint64_t* key_a[kExpansionMaxQueries] = {};
  const uint32_t* perms = nullptr;
  const uint64_t* sums[kExpansionMaxQueries] = {};  // virtual group v's halves at v 2 k N
  uint64_t* out[kExpansionMaxQueries] = {};         // group g's halves at g 2 k N
  uint64_t* scratch = nullptr;                      // DeferredScratchWords per query
};

// Per switch (g, s >= 1): c1 in coefficients (k rows), digits (k (k + 1)), the rotated halves
// over QP (2 (k + 1)); per group: the halves' sums over QP (2 (k + 1)) and the lifted P rows
// (2 k). In rows of N.
VEIL_HD uint32_t DeferredSwitchRows(uint32_t k) { return k + k * (k + 1) + 2 * (k + 1); }
VEIL_HD uint32_t DeferredGroupRows(uint32_t k) { return 2 * (k + 1) + 2 * k; }
VEIL_HD uint64_t DeferredScratchWords(uint32_t k, uint32_t log_n, uint32_t groups,
                                      uint32_t elements) {
  const uint64_t switches = uint64_t{groups} * (elements - 1);
  return (switches * DeferredSwitchRows(k) + uint64_t{groups} * DeferredGroupRows(k)) << log_n;
}

enum class DeferredStage : uint32_t {
  kC1ToCoefficients,  // switch x prime p: c1's row p, inverse NTT
  kDigits,            // switch x digit d x prime j of QP: the digit lifted to m_j, forward NTT
  kRotate,            // switch x half h: the inner products over QP (+ P c0), permuted
  kSum,               // group x half h x prime j of QP: the switches' sum; P's row inverse NTT
  kModDown,           // group x half h x prime j: P's row lifted to q_j, forward NTT,
                      // (acc - r) / P + the s = 0 sum
};
inline constexpr uint32_t kDeferredStages = 5;

// A stage's blocks for one query.
VEIL_HD uint32_t DeferredQueryBlocks(const DeferredArgs& a, DeferredStage stage) {
  const uint32_t k = a.k, switches = a.groups * (a.elements - 1);
  switch (stage) {
    case DeferredStage::kC1ToCoefficients:
      return switches * k;
    case DeferredStage::kDigits:
      return switches * k * (k + 1);
    case DeferredStage::kRotate:
      return switches * 2;
    case DeferredStage::kSum:
      return a.groups * 2 * (k + 1);
    case DeferredStage::kModDown:
      return a.groups * 2 * k;
  }
  return 0;
}

// A stage's blocks: every query's, query-major.
VEIL_HD uint32_t DeferredStageBlocks(const DeferredArgs& a, DeferredStage stage) {
  return a.queries * DeferredQueryBlocks(a, stage);
}

// Block `block` of a stage (DeferredStageBlocks of them); `s`: N 32-bit words of shared memory.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void DeferredStageBlock(Runner& run, const DeferredArgs& a, DeferredStage stage,
                                uint32_t block, uint32_t* s) {
  // Block `b` of the query's stage, on its sums, scratch, keys and output.
  const uint32_t per_query = DeferredQueryBlocks(a, stage), query = block / per_query,
                 b = block % per_query;
  const uint64_t* const sums = a.sums[query];
  uint64_t* const out_sums = a.out[query];
  uint64_t* const scratch = a.scratch + query * a.scratch_stride;
  const uint32_t n = 1u << a.log_n, k = a.k, rows = k + 1, switched = a.elements - 1;
  const uint64_t words = uint64_t{k} * n;  // one half over Q
  const int log_n = static_cast<int>(a.log_n);
  const uint64_t switches = uint64_t{a.groups} * switched;
  // Switch w = g (2^D - 1) + s - 1: its scratch, and its virtual group's sum.
  const auto switch_rows = [&](uint64_t w) { return scratch + w * DeferredSwitchRows(k) * n; };
  const auto digits = [&](uint64_t w) { return switch_rows(w) + words; };
  const auto rotated = [&](uint64_t w) { return digits(w) + uint64_t{k} * rows * n; };
  const auto virtual_sum = [&](uint64_t w) {
    const uint64_t g = w / switched, v = g * a.elements + w % switched + 1;
    return sums + v * 2 * words;
  };
  const auto group_rows = [&](uint64_t g) {
    return scratch + (switches * DeferredSwitchRows(k) + g * DeferredGroupRows(k)) * n;
  };
  switch (stage) {
    case DeferredStage::kC1ToCoefficients: {
      const uint64_t w = b / k;
      const uint32_t p = b % k;
      const uint64_t* c1 = virtual_sum(w) + words + uint64_t{p} * n;
      uint64_t* row = switch_rows(w) + uint64_t{p} * n;
      run.Phase(n, [&](uint32_t c) { row[c] = c1[c]; });
      Ntt32Block(run, a.inverse[p], log_n, true, row, s);
      return;
    }
    case DeferredStage::kDigits: {
      const uint64_t w = b / (k * rows);
      const uint32_t dg = (b / rows) % k, j = b % rows;
      uint64_t* out = digits(w) + (uint64_t{dg} * rows + j) * n;
      if (j == dg) {  // c1's row, transformed already (the expansion's digits do the same)
        const uint64_t* c1 = virtual_sum(w) + words + uint64_t{dg} * n;
        run.Phase(n, [&](uint32_t c) { out[c] = c1[c]; });
        return;
      }
      const uint64_t* from = switch_rows(w) + uint64_t{dg} * n;
      const uint64_t q_d = a.moduli[dg], m_j = a.moduli[j], mu = a.barrett[j];
      run.Phase(n, [&](uint32_t c) { out[c] = LiftCentered(from[c], q_d, m_j, mu); });
      Ntt32Block(run, a.forward[j], log_n, false, out, s);
      return;
    }
    case DeferredStage::kRotate: {
      // Half h of sigma_s's switch over QP at slot perm[c], written at c; P c0 on the first
      // half's Q rows.
      const uint64_t w = b / 2;
      const uint32_t h = b % 2, e = static_cast<uint32_t>(w % switched);  // element e + 1
      const uint64_t key_words = uint64_t{k} * rows * n;
      const uint64_t* key = (h == 0 ? a.key_b[query] : a.key_a[query]) + e * key_words;
      const uint32_t* perm = a.perms + uint64_t{e} * n;
      const uint64_t* dig = digits(w);
      const uint64_t* c0 = virtual_sum(w);
      uint64_t* out = rotated(w) + uint64_t{h} * rows * n;
      run.Phase(rows * n, [&](uint32_t i) {
        const uint32_t j = i / n, c = i % n, from = perm[c];
        const uint64_t m = a.moduli[j], mu = a.barrett[j];
        uint64_t sum = 0;  // below k m < 2^34
        for (uint32_t dg = 0; dg < k; ++dg) {
          const uint64_t at = (uint64_t{dg} * rows + j) * n + from;
          sum += ExpansionReduce(dig[at] * key[at], m, mu);
        }
        uint64_t v = ExpansionReduce(sum, m, mu);
        if (h == 0 && j < k) {
          v = he::AddMod(v, ExpansionReduce(c0[uint64_t{j} * n + from] * a.p_mod_q[j], m, mu), m);
        }
        out[i] = v;
      });
      return;
    }
    case DeferredStage::kSum: {
      // Row j of half h summed over the group's switches; P's row back to coefficients.
      const uint64_t g = b / (2 * rows);
      const uint32_t h = (b / rows) % 2, j = b % rows;
      const uint64_t m = a.moduli[j], mu = a.barrett[j];
      uint64_t* out = group_rows(g) + (uint64_t{h} * rows + j) * n;
      const uint64_t first = g * switched, at = (uint64_t{h} * rows + j) * n;
      run.Phase(n, [&](uint32_t c) {
        uint64_t sum = 0;  // below 2^D m < 2^36
        for (uint32_t e = 0; e < switched; ++e) sum += rotated(first + e)[at + c];
        out[c] = ExpansionReduce(sum, m, mu);
      });
      if (j == k) Ntt32Block(run, a.inverse[k], log_n, true, out, s);
      return;
    }
    case DeferredStage::kModDown: {
      const uint64_t g = b / (2 * k);
      const uint32_t h = (b / k) % 2, j = b % k;
      const uint64_t* half = group_rows(g) + uint64_t{h} * rows * n;
      const uint64_t* last = half + uint64_t{k} * n;
      const uint64_t* row = half + uint64_t{j} * n;
      uint64_t* r = group_rows(g) + (2ull * rows + uint64_t{h} * k + j) * n;
      const uint64_t* identity = sums + (g * a.elements * 2 + h) * words + uint64_t{j} * n;
      uint64_t* out = out_sums + (g * 2 + h) * words + uint64_t{j} * n;
      const uint64_t q = a.moduli[j], p = a.moduli[k], mu = a.barrett[j];
      run.Phase(n, [&](uint32_t c) { r[c] = LiftCentered(last[c], p, q, mu); });
      Ntt32Block(run, a.forward[j], log_n, false, r, s);
      run.Phase(n, [&](uint32_t c) {
        const uint64_t v = ExpansionReduce(he::SubMod(row[c], r[c], q) * a.p_inv[j], q, mu);
        out[c] = he::AddMod(v, identity[c], q);
      });
      return;
    }
  }
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_DEFERRED_PHASES_H_
