// ExpPack's expansion (pir/lattice/expansion.h) on the GPU as per-thread phases, written once for
// the device (gpu/expansion.cu) and the host (gpu/expansion_host_run.cc), as the other kernels.
//
// Level by level: one block per node of the level, and the block does the node's whole step, as
// the CPU's LevelStep: c1 to coefficients (k inverse NTTs), its RNS digits lifted centered to the
// k primes and P and transformed (k (k + 1) NTTs: decomposition and NTT fused per row), the key
// switch's inner products with the level's key, ModDown (P's row back to coefficients, lifted to
// each q_j and transformed, (acc - r) P^{-1}), + c0, the automorphism (a permutation of NTT slots)
// and the children c + g(c) and (c - g(c)) X^{-2^l}. Every transform runs in the block's shared
// memory (gpu/internal/ntt_phases.h); everything else is elementwise over global rows. Residues
// are below 2^32, so a product fits 64 bits and reduces with one %. Every value is reduced
// fully, so the leaves equal ExpandLweSecret's bit for bit.
//
// Top levels have few nodes (1, 2, 4, ...) and leave most of a device idle; the bottom levels,
// where the key switches are (512 of 1,023 at n = 1,024), fill it.
#ifndef VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_
#define VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kExpansionMaxPrimes = 4;  // k <= 3 primes of Q, then P

struct ExpansionArgs {
  uint32_t log_n = 0;
  uint32_t k = 0;                        // primes of Q
  NttArgs forward[kExpansionMaxPrimes];  // per prime (q_0 .. q_{k-1}, P); data set per row
  NttArgs inverse[kExpansionMaxPrimes];
  uint64_t moduli[kExpansionMaxPrimes] = {};
  uint64_t p_inv[kExpansionMaxPrimes] = {};  // P^{-1} mod q_j
  // This level: its key (row (d, j) of a half at (d (k + 1) + j) N), its Galois permutation of
  // NTT slots, and X^{-2^l} in NTT form (k rows).
  const uint64_t* key_b = nullptr;
  const uint64_t* key_a = nullptr;
  const uint32_t* perm = nullptr;
  const uint64_t* mono = nullptr;
  // Nodes: 2 k rows each (c0 then c1). Node i's children: left at out node i, right at node
  // i + nodes when below `children`.
  const uint64_t* in = nullptr;
  uint64_t* out = nullptr;
  uint32_t nodes = 0, children = 0;
  uint64_t* scratch = nullptr;  // ExpansionScratchRows(k) rows of N per node
};

VEIL_HD uint32_t ExpansionScratchRows(uint32_t k) {
  return k + k * (k + 1) + 2 * (k + 1) + 1 + 2 * k;  // c1, digits, acc, r, d
}

// x centered modulo m (in (-m/2, m/2]) and taken modulo q.
VEIL_HD uint64_t LiftCentered(uint64_t x, uint64_t m, uint64_t q) {
  if (x > m / 2) {
    const uint64_t neg = (m - x) % q;  // x - m = -(m - x)
    return neg == 0 ? 0 : q - neg;
  }
  return x % q;
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void ExpansionNodeBlock(Runner& run, const ExpansionArgs& a, uint32_t node, uint64_t* s) {
  const uint32_t n = 1u << a.log_n, k = a.k, rows = k + 1;
  const uint64_t words = uint64_t{k} * n;  // one half
  const uint64_t* c0 = a.in + uint64_t{node} * 2 * words;
  const uint64_t* c1 = c0 + words;
  uint64_t* c1_coeff = a.scratch + uint64_t{node} * ExpansionScratchRows(k) * n;
  uint64_t* digits = c1_coeff + words;              // row (d, j) at (d rows + j) n
  uint64_t* acc = digits + uint64_t{k} * rows * n;  // half h, prime j at (h rows + j) n
  uint64_t* r = acc + 2ull * rows * n;              // one row
  uint64_t* d = r + n;                              // half h, prime j at (h k + j) n
  const auto transform = [&](const NttArgs& t, uint64_t* row) {
    NttArgs one = t;
    one.data = row;
    one.batch = 1;
    NttBlock(run, one, 0, s);
  };
  // 1. c1 to coefficients.
  run.Phase(static_cast<uint32_t>(words), [&](uint32_t i) { c1_coeff[i] = c1[i]; });
  for (uint32_t p = 0; p < k; ++p) transform(a.inverse[p], c1_coeff + uint64_t{p} * n);
  // 2. Digit d (c1 modulo q_d) lifted centered to every prime of QP, then transformed.
  for (uint32_t dg = 0; dg < k; ++dg) {
    for (uint32_t j = 0; j < rows; ++j) {
      uint64_t* out = digits + (uint64_t{dg} * rows + j) * n;
      const uint64_t* from = c1_coeff + uint64_t{dg} * n;
      const uint64_t q_d = a.moduli[dg], m_j = a.moduli[j];
      run.Phase(n, [&](uint32_t c) { out[c] = LiftCentered(from[c], q_d, m_j); });
      transform(a.forward[j], out);
    }
  }
  // 3. The inner products with the key, both halves, every prime of QP.
  run.Phase(2 * rows * n, [&](uint32_t i) {
    const uint32_t h = i / (rows * n), j = (i / n) % rows, c = i % n;
    const uint64_t* key = h == 0 ? a.key_b : a.key_a;
    const uint64_t m = a.moduli[j];
    uint64_t sum = 0;
    for (uint32_t dg = 0; dg < k; ++dg) {
      const uint64_t at = (uint64_t{dg} * rows + j) * n + c;
      sum = (sum + (digits[at] * key[at]) % m) % m;
    }
    acc[i] = sum;
  });
  // 4. ModDown per half: P's row to coefficients, lifted centered to each q_j and transformed,
  // then (acc - r) P^{-1}; c0 added to the first half.
  for (uint32_t h = 0; h < 2; ++h) {
    uint64_t* last = acc + (uint64_t{h} * rows + k) * n;
    transform(a.inverse[k], last);
    for (uint32_t j = 0; j < k; ++j) {
      const uint64_t q = a.moduli[j], p = a.moduli[k];
      run.Phase(n, [&](uint32_t c) { r[c] = LiftCentered(last[c], p, q); });
      transform(a.forward[j], r);
      const uint64_t* row = acc + (uint64_t{h} * rows + j) * n;
      uint64_t* out = d + (uint64_t{h} * k + j) * n;
      const uint64_t* add = c0 + uint64_t{j} * n;
      run.Phase(n, [&](uint32_t c) {
        const uint64_t v = ((row[c] + q - r[c]) % q) * a.p_inv[j] % q;
        out[c] = h == 0 ? (v + add[c]) % q : v;
      });
    }
  }
  // 5. The automorphism (slot permutation) and the children.
  uint64_t* left = a.out + uint64_t{node} * 2 * words;
  const bool has_right = node + a.nodes < a.children;
  uint64_t* right = a.out + uint64_t{node + a.nodes} * 2 * words;
  run.Phase(static_cast<uint32_t>(2 * words), [&](uint32_t i) {
    const uint32_t h = static_cast<uint32_t>(i / words), j = (i / n) % k, c = i % n;
    const uint64_t q = a.moduli[j];
    const uint64_t x = (h == 0 ? c0 : c1)[uint64_t{j} * n + c];
    const uint64_t y = d[(uint64_t{h} * k + j) * n + a.perm[c]];
    left[i] = (x + y) % q;
    if (has_right) right[i] = ((x + q - y) % q) * a.mono[uint64_t{j} * n + c] % q;
  });
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_
