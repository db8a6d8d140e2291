// Per-thread tree steps of one packed key: the node expansion, child correction and leaf
// conversion of dpf/prg_portable.h, with AES computed by the T-table form (aes_tables.h) that
// gives the same bits. The kernels and their host-run simulation both use these.
#ifndef VEIL_GPU_INTERNAL_TREE_H_
#define VEIL_GPU_INTERNAL_TREE_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/prg_portable.h"
#include "gpu/internal/aes_tables.h"
#include "gpu/internal/device_key.h"

namespace veil::gpu::internal {

using dpf::Block;

// ChaCha and SipHash have no tables; dpf's functions ignore these.
VEIL_HD dpf::PrgTables NoPrgTables() { return {nullptr, nullptr, nullptr, nullptr}; }

// G(s): the raw children, as dpf::ExpandNode.
VEIL_HD void ExpandRaw(dpf::Prg prg, const AesTables& t, Block node, Block& left, Block& right) {
  if (prg == dpf::Prg::kAes128) {
    const Block seed = node.without_control_bit();
    left = MmoHashT(t, t.rk_left, seed);
    right = MmoHashT(t, t.rk_right, seed);
  } else {
    dpf::ExpandNode(prg, NoPrgTables(), node, left, right);
  }
}

// Both corrected children of `node` at tree level `level` (0 = the root's children).
VEIL_HD void ExpandCorrected(const PackedKey& key, const AesTables& t, Block node, int level,
                             Block& left, Block& right) {
  ExpandRaw(key.prg_id(), t, node, left, right);
  dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right);
}

// One corrected child of `node`: what a path walk needs. AES and SipHash compute only that side
// (half the PRG work of a full expansion); ChaCha's one block yields both sides anyway.
VEIL_HD Block CorrectedChild(const PackedKey& key, const AesTables& t, Block node, int level,
                             bool right) {
  const dpf::Prg prg = key.prg_id();
  const Block seed = node.without_control_bit();
  Block left, right_child;
  if (prg == dpf::Prg::kAes128) {
    right_child = MmoHashT(t, right ? t.rk_right : t.rk_left, seed);
    left = right_child;
  } else if (prg == dpf::Prg::kSipHash) {
    const uint64_t c = right ? 2 : 0;
    right_child = {dpf::SipHash24(seed.lo, seed.hi, c), dpf::SipHash24(seed.lo, seed.hi, c + 1)};
    left = right_child;
  } else {
    dpf::ExpandNode(prg, NoPrgTables(), node, left, right_child);
  }
  dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right_child);
  return right ? right_child : left;
}

// The leaf node of leaf `leaf` (0 .. 2^levels - 1), walking from the root.
VEIL_HD Block WalkToLeaf(const PackedKey& key, const AesTables& t, uint64_t leaf) {
  Block node = key.root;
  for (int level = 0; level < key.levels; ++level) {
    const bool right = ((leaf >> (key.levels - 1 - level)) & 1) != 0;
    node = CorrectedChild(key, t, node, level, right);
  }
  return node;
}

// A leaf's output words (leaf_words of them, at most 16): V(s) as dpf::ConvertLeaf, then the
// final correction (dpf::FinishLeaf). TODO(perf): their loops over a run-time word count put
// `values` in local memory (ptxas: 128-byte stack frame per fused kernel); a variant with the
// count as a template parameter would keep it in registers.
VEIL_HD void LeafOutput(const PackedKey& key, const AesTables& t, Block node, uint32_t values[16]) {
  if (key.prg_id() == dpf::Prg::kAes128) {
    const Block seed = node.without_control_bit();
    for (int i = 0; 4 * i < key.leaf_words; ++i) {
      const Block v = MmoHashT(t, t.rk_value, {seed.lo ^ uint64_t(i), seed.hi});
      const uint32_t w[4] = {uint32_t(v.lo), uint32_t(v.lo >> 32), uint32_t(v.hi),
                             uint32_t(v.hi >> 32)};
      for (int j = 0; j < 4 && 4 * i + j < key.leaf_words; ++j) values[4 * i + j] = w[j];
    }
  } else {
    dpf::ConvertLeaf(key.prg_id(), NoPrgTables(), node, key.leaf_words, values);
  }
  dpf::FinishLeaf(key.output_type(), key.party == 1, node.control_bit(), key.final_cw,
                  key.leaf_words, values);
}

// Share of point `i` (0 .. 2^leaf_points_log2 - 1) of a finished leaf, as a word the product
// phase multiplies with (additive) or ANDs with (XOR: all ones where the point's bit is set).
VEIL_HD uint32_t PointShare(const PackedKey& key, const uint32_t values[16], uint32_t i) {
  if (key.is_xor()) return 0u - ((values[i >> 5] >> (i & 31)) & 1u);
  return values[i];
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_TREE_H_
