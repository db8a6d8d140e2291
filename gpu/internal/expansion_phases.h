// ExpPack's expansion (pir/lattice/expansion.h) on the GPU as per-thread phases, written once for
// the device (gpu/expansion.cu) and the host (gpu/expansion_host_run.cc), as the other kernels.
//
// Level by level, the CPU's LevelStep in five launches (ExpansionStage), each of several blocks per
// node: c1 to coefficients (k inverse NTTs), its RNS digits lifted centered to the
// k primes and P and transformed (k^2 NTTs: decomposition and NTT fused per row; a digit modulo
// its own prime is c1's row, whose transform is at hand), the key
// switch's inner products with the level's key, ModDown (P's row back to coefficients, lifted to
// each q_j and transformed, (acc - r) P^{-1}), + c0, the automorphism (a permutation of NTT slots)
// and the children c + g(c) and (c - g(c)) X^{-2^l}. Every transform runs in the block's shared
// memory (gpu/internal/ntt_phases.h); everything else is elementwise over global rows. Residues
// are below 2^32, so a product fits 64 bits and reduces with one Barrett reduction. Every value
// is reduced fully, so the leaves equal ExpandLweSecret's bit for bit.
//
// Top levels have few nodes (1, 2, 4, ...): one block per node doing the whole step left most of
// a device idle and made each level as slow as one block's 23 transforms in a row (9.8 ms for
// n = 1,024 on an H200); split, a level takes four transforms in a row, its blocks side by side.
// Several queries (each with its own session's keys) expand side by side too: every launch takes
// the level's nodes of up to kExpansionMaxQueries queries, so a batch's top levels fill the device
// as one query's cannot.
#ifndef VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_
#define VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/phases.h"
#include "pir/he/modarith_hd.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kExpansionMaxPrimes = 4;  // k <= 3 primes of Q, then P
inline constexpr uint32_t kExpansionMaxQueries = 8;

// What a key switch over QP needs of its primes (the expansion's and the deferred switches',
// gpu/internal/deferred_phases.h).
struct QpArgs {
  uint32_t log_n = 0;
  uint32_t k = 0;                          // primes of Q
  Ntt32Args forward[kExpansionMaxPrimes];  // per prime (q_0 .. q_{k-1}, P), 32-bit lanes
  Ntt32Args inverse[kExpansionMaxPrimes];
  uint64_t moduli[kExpansionMaxPrimes] = {};
  uint64_t barrett[kExpansionMaxPrimes] = {};  // floor(2^64 / m) of each modulus (ExpansionReduce)
  uint64_t p_inv[kExpansionMaxPrimes] = {};    // P^{-1} mod q_j
  uint64_t p_mod_q[kExpansionMaxPrimes] = {};  // P mod q_j
};

struct ExpansionArgs : QpArgs {
  // Queries expanded side by side (1 to kExpansionMaxQueries); query q's nodes, children and
  // scratch start query_stride and scratch_stride words after query q - 1's.
  uint32_t queries = 1;
  uint64_t query_stride = 0, scratch_stride = 0;
  // This level: query q's key (row (d, j) of a half at (d (k + 1) + j) N), the Galois
  // permutation of NTT slots, and X^{-2^l} in NTT form (k rows).
  const uint64_t* key_b[kExpansionMaxQueries] = {};
  const uint64_t* key_a[kExpansionMaxQueries] = {};
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
  return k + k * (k + 1) + 2 * (k + 1) + 2 * k;  // c1, digits, acc, d
}

// A level runs as five launches, each of many blocks, so that the top levels' few nodes still
// give the device k to k (k + 1) times as many blocks: the step's transforms of one node run side
// by side, not one after the other in one block.
enum class ExpansionStage : uint32_t {
  kC1ToCoefficients,  // node x prime p: c1's row p, inverse NTT
  kDigits,            // node x digit d x prime j of QP: the digit lifted to m_j, forward NTT
  kInnerProducts,     // node x half h: the key's inner products over QP, then P's row inverse
  kModDown,           // node x half h x prime j: P's row lifted to q_j, forward NTT, (acc - r) / P
  kChildren,          // node x half h x prime j: the automorphism and the two children's rows
};
inline constexpr uint32_t kExpansionStages = 5;

// A stage's blocks for one query.
VEIL_HD uint32_t ExpansionQueryBlocks(const ExpansionArgs& a, ExpansionStage stage) {
  const uint32_t k = a.k;
  switch (stage) {
    case ExpansionStage::kC1ToCoefficients:
      return a.nodes * k;
    case ExpansionStage::kDigits:
      return a.nodes * k * (k + 1);
    case ExpansionStage::kInnerProducts:
      return a.nodes * 2;
    case ExpansionStage::kModDown:
    case ExpansionStage::kChildren:
      return a.nodes * 2 * k;
  }
  return 0;
}

// A stage's blocks: every query's, query-major.
VEIL_HD uint32_t ExpansionStageBlocks(const ExpansionArgs& a, ExpansionStage stage) {
  return a.queries * ExpansionQueryBlocks(a, stage);
}

// x mod q for any 64-bit x, mu = floor(2^64 / q) (Barrett): the quotient estimate
// floor(x mu / 2^64) is at most 1 short, so one subtraction finishes (a 64-bit % is far dearer
// on a GPU).
VEIL_HD uint64_t ExpansionReduce(uint64_t x, uint64_t q, uint64_t mu) {
  const uint64_t r = x - he::MulHi64(x, mu) * q;
  return r >= q ? r - q : r;
}

// x centered modulo m (in (-m/2, m/2]) and taken modulo q (mu: q's Barrett constant).
VEIL_HD uint64_t LiftCentered(uint64_t x, uint64_t m, uint64_t q, uint64_t mu) {
  if (x > m / 2) {
    const uint64_t neg = ExpansionReduce(m - x, q, mu);  // x - m = -(m - x)
    return neg == 0 ? 0 : q - neg;
  }
  return ExpansionReduce(x, q, mu);
}

// Block `b` of a level's stage (ExpansionStageBlocks of them); `s`: N 32-bit words of shared
// memory.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void ExpansionStageBlock(Runner& run, const ExpansionArgs& a, ExpansionStage stage,
                                 uint32_t block, uint32_t* s) {
  // Block `b` of the query's stage, on its nodes, scratch and keys.
  const uint32_t per_query = ExpansionQueryBlocks(a, stage), query = block / per_query,
                 b = block % per_query;
  const uint64_t* const in = a.in + query * a.query_stride;
  uint64_t* const out_nodes = a.out + query * a.query_stride;
  uint64_t* const query_scratch = a.scratch + query * a.scratch_stride;
  const uint32_t n = 1u << a.log_n, k = a.k, rows = k + 1;
  const uint64_t words = uint64_t{k} * n;  // one half
  const int log_n = static_cast<int>(a.log_n);
  const auto forward = [&](uint32_t prime, uint64_t* row) {
    Ntt32Block(run, a.forward[prime], log_n, false, row, s);
  };
  const auto inverse = [&](uint32_t prime, uint64_t* row) {
    Ntt32Block(run, a.inverse[prime], log_n, true, row, s);
  };
  const auto node_of = [&](uint32_t per_node) { return b / per_node; };
  const auto scratch = [&](uint32_t node) {
    return query_scratch + uint64_t{node} * ExpansionScratchRows(k) * n;
  };
  // Node i's scratch: c1 in coefficients (k rows), digits (row (d, j) at (d rows + j) n), acc
  // (half h, prime j of QP at (h rows + j) n), d (half h, prime j at (h k + j) n).
  const auto digits = [&](uint32_t node) { return scratch(node) + words; };
  const auto acc = [&](uint32_t node) { return digits(node) + uint64_t{k} * rows * n; };
  const auto d = [&](uint32_t node) { return acc(node) + 2ull * rows * n; };
  switch (stage) {
    case ExpansionStage::kC1ToCoefficients: {
      // 1. c1 to coefficients.
      const uint32_t node = node_of(k), p = b % k;
      const uint64_t* c1 = in + uint64_t{node} * 2 * words + words + uint64_t{p} * n;
      uint64_t* row = scratch(node) + uint64_t{p} * n;
      run.Phase(n, [&](uint32_t i) { row[i] = c1[i]; });
      inverse(p, row);
      return;
    }
    case ExpansionStage::kDigits: {
      // 2. Digit dg (c1 modulo q_dg) lifted centered to prime j of QP, then transformed.
      // Modulo its own prime the digit is c1's row: its transform is the node's (as the CPU's
      // DecomposeForKeySwitch takes it), a copy instead of a transform.
      const uint32_t node = node_of(k * rows), dg = (b / rows) % k, j = b % rows;
      uint64_t* out = digits(node) + (uint64_t{dg} * rows + j) * n;
      if (j == dg) {
        const uint64_t* c1 = in + uint64_t{node} * 2 * words + words + uint64_t{dg} * n;
        run.Phase(n, [&](uint32_t c) { out[c] = c1[c]; });
        return;
      }
      const uint64_t* from = scratch(node) + uint64_t{dg} * n;
      const uint64_t q_d = a.moduli[dg], m_j = a.moduli[j], mu = a.barrett[j];
      run.Phase(n, [&](uint32_t c) { out[c] = LiftCentered(from[c], q_d, m_j, mu); });
      forward(j, out);
      return;
    }
    case ExpansionStage::kInnerProducts: {
      // 3. Half h's inner products with the key over every prime of QP; P's row to coefficients.
      const uint32_t node = node_of(2), h = b % 2;
      const uint64_t* dig = digits(node);
      uint64_t* out = acc(node) + uint64_t{h} * rows * n;
      const uint64_t* key = h == 0 ? a.key_b[query] : a.key_a[query];
      run.Phase(rows * n, [&](uint32_t i) {
        const uint32_t j = i / n, c = i % n;
        const uint64_t m = a.moduli[j], mu = a.barrett[j];
        uint64_t sum = 0;  // below k m < 2^34
        for (uint32_t dg = 0; dg < k; ++dg) {
          const uint64_t at = (uint64_t{dg} * rows + j) * n + c;
          sum += ExpansionReduce(dig[at] * key[at], m, mu);
        }
        out[i] = ExpansionReduce(sum, m, mu);
      });
      inverse(k, out + uint64_t{k} * n);
      return;
    }
    case ExpansionStage::kModDown: {
      // 4. ModDown of half h at q_j: P's row lifted centered and transformed, (acc - r) P^{-1};
      // c0 added to the first half.
      const uint32_t node = node_of(2 * k), h = (b / k) % 2, j = b % k;
      const uint64_t* half = acc(node) + uint64_t{h} * rows * n;
      const uint64_t* last = half + uint64_t{k} * n;
      const uint64_t* row = half + uint64_t{j} * n;
      uint64_t* out = d(node) + (uint64_t{h} * k + j) * n;
      const uint64_t* add = in + uint64_t{node} * 2 * words + uint64_t{j} * n;  // c0's row j
      const uint64_t q = a.moduli[j], p = a.moduli[k], mu = a.barrett[j];
      run.Phase(n, [&](uint32_t c) { out[c] = LiftCentered(last[c], p, q, mu); });
      forward(j, out);
      run.Phase(n, [&](uint32_t c) {
        const uint64_t v = ExpansionReduce(he::SubMod(row[c], out[c], q) * a.p_inv[j], q, mu);
        out[c] = h == 0 ? he::AddMod(v, add[c], q) : v;
      });
      return;
    }
    case ExpansionStage::kChildren: {
      // 5. The automorphism (slot permutation) and the children's row (h, j).
      const uint32_t node = node_of(2 * k), h = (b / k) % 2, j = b % k;
      const uint64_t row = uint64_t{h} * words + uint64_t{j} * n;
      const uint64_t* x = in + uint64_t{node} * 2 * words + row;
      const uint64_t* y = d(node) + (uint64_t{h} * k + j) * n;
      uint64_t* left = out_nodes + uint64_t{node} * 2 * words + row;
      const bool has_right = node + a.nodes < a.children;
      uint64_t* right = out_nodes + uint64_t{node + a.nodes} * 2 * words + row;
      const uint64_t q = a.moduli[j], mu = a.barrett[j];
      const uint64_t* mono = a.mono + uint64_t{j} * n;
      run.Phase(n, [&](uint32_t c) {
        const uint64_t yc = y[a.perm[c]];
        left[c] = he::AddMod(x[c], yc, q);
        if (has_right) right[c] = ExpansionReduce(he::SubMod(x[c], yc, q) * mono[c], q, mu);
      });
      return;
    }
  }
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_EXPANSION_PHASES_H_
