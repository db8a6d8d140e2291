// Per-thread tree steps of one packed key, built only from dpf/prg_portable.h so that the kernels
// and their host-run simulation produce the CPU evaluator's bits.
#ifndef VEIL_GPU_INTERNAL_TREE_H_
#define VEIL_GPU_INTERNAL_TREE_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/prg_portable.h"
#include "gpu/internal/device_key.h"

namespace veil::gpu::internal {

using dpf::Block;

// Both corrected children of `node` at tree level `level` (0 = the root's children).
VEIL_HD void ExpandCorrected(const PackedKey& key, const dpf::PrgTables& tables, Block node,
                             int level, Block& left, Block& right) {
  dpf::ExpandNode(key.prg_id(), tables, node, left, right);
  dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right);
}

// One corrected child of `node`: what a path walk needs. AES and SipHash compute only that side
// (half the PRG work of ExpandNode); ChaCha's one block yields both sides anyway.
VEIL_HD Block CorrectedChild(const PackedKey& key, const dpf::PrgTables& tables, Block node,
                             int level, bool right) {
  const dpf::Prg prg = key.prg_id();
  Block seed = node.without_control_bit();
  Block left, right_child;
  if (prg == dpf::Prg::kAes128) {
    Block child =
        dpf::MmoHash(tables.sbox, right ? tables.round_keys_right : tables.round_keys_left, seed);
    left = child;
    right_child = child;
  } else if (prg == dpf::Prg::kSipHash) {
    uint64_t c = right ? 2 : 0;
    Block child = {dpf::SipHash24(seed.lo, seed.hi, c), dpf::SipHash24(seed.lo, seed.hi, c + 1)};
    left = child;
    right_child = child;
  } else {
    dpf::ExpandNode(prg, tables, node, left, right_child);
  }
  dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right_child);
  return right ? right_child : left;
}

// The leaf node of leaf `leaf` (0 .. 2^levels - 1), walking from the root.
VEIL_HD Block WalkToLeaf(const PackedKey& key, const dpf::PrgTables& tables, uint64_t leaf) {
  Block node = key.root;
  for (int level = 0; level < key.levels; ++level) {
    bool right = ((leaf >> (key.levels - 1 - level)) & 1) != 0;
    node = CorrectedChild(key, tables, node, level, right);
  }
  return node;
}

// A leaf's output words (leaf_words of them, at most 16): V(s), then the final correction.
VEIL_HD void LeafOutput(const PackedKey& key, const dpf::PrgTables& tables, Block node,
                        uint32_t values[16]) {
  dpf::ConvertLeaf(key.prg_id(), tables, node, key.leaf_words, values);
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
