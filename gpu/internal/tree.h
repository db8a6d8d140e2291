// Per-thread tree steps of one packed key: the node expansion, child correction and leaf
// conversion of dpf/prg_portable.h (the same functions, so the same bits; AES is dpf's constant-
// time bitsliced AES). The kernels and their host-run simulation both use these.
#ifndef VEIL_GPU_INTERNAL_TREE_H_
#define VEIL_GPU_INTERNAL_TREE_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/prg_portable.h"
#include "gpu/internal/device_key.h"

#if defined(__CUDACC__)
#define VEIL_GPU_UNROLL _Pragma("unroll")
#else
#define VEIL_GPU_UNROLL _Pragma("GCC unroll 16")
#endif

namespace veil::gpu::internal {

using dpf::Block;

// Both corrected children of `node` at tree level `level` (0 = the root's children).
VEIL_HD void ExpandCorrected(const PackedKey& key, const dpf::AesKeys& aes, Block node, int level,
                             Block& left, Block& right) {
  dpf::ExpandNode(key.prg_id(), aes, node, left, right);
  dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right);
}

// One corrected child of `node`: what a path walk needs. SipHash computes only that side (half
// its PRG work); AES (both children in one bitsliced pass) and ChaCha (one block) yield both
// sides for the price of one.
VEIL_HD Block CorrectedChild(const PackedKey& key, const dpf::AesKeys& aes, Block node, int level,
                             bool right) {
  Block left, right_child;
  if (key.prg_id() == dpf::Prg::kSipHash) {
    const Block seed = node.without_control_bit();
    const uint64_t c = right ? 2 : 0;
    right_child = {dpf::SipHash24(seed.lo, seed.hi, c), dpf::SipHash24(seed.lo, seed.hi, c + 1)};
    left = right_child;
    dpf::CorrectChildren(node, key.cw_seed[level], key.cw_right(level), left, right_child);
  } else {
    ExpandCorrected(key, aes, node, level, left, right_child);
  }
  return right ? right_child : left;
}

// The leaf node of leaf `leaf` (0 .. 2^levels - 1), walking from the root.
VEIL_HD Block WalkToLeaf(const PackedKey& key, const dpf::AesKeys& aes, uint64_t leaf) {
  Block node = key.root;
  for (int level = 0; level < key.levels; ++level) {
    const bool right = ((leaf >> (key.levels - 1 - level)) & 1) != 0;
    node = CorrectedChild(key, aes, node, level, right);
  }
  return node;
}

// The shares of the points of one leaf, written to dst[i * stride] for point i: additive keys
// have kWords points (one word each); XOR keys 128 (one bit each, widened to all ones where set,
// so that the product phase can AND with it). The word count is a compile-time constant so that
// the leaf's words stay in registers (a run-time count would index them from local memory).
template <int kWords, bool kXor>
VEIL_HD void StoreLeafPoints(const PackedKey& key, const dpf::AesKeys& aes, Block node,
                             uint32_t* dst, uint32_t stride) {
  uint32_t values[kWords];
  dpf::ConvertLeaf(key.prg_id(), aes, node, kWords, values);
  dpf::FinishLeaf(key.output_type(), key.party == 1, node.control_bit(), key.final_cw, kWords,
                  values);
  if (kXor) {
    VEIL_GPU_UNROLL
    for (int w = 0; w < kWords; ++w) {
      for (uint32_t b = 0; b < 32; ++b) dst[(32 * w + b) * stride] = 0u - ((values[w] >> b) & 1u);
    }
  } else {
    VEIL_GPU_UNROLL
    for (int i = 0; i < kWords; ++i) dst[i * stride] = values[i];
  }
}

// StoreLeafPoints for the key's leaf layout (W in {1, 2, 4, 8, 16}, checked when keys are
// parsed; XOR leaves are 4 words).
VEIL_HD void StoreLeaf(const PackedKey& key, const dpf::AesKeys& aes, Block node, uint32_t* dst,
                       uint32_t stride) {
  if (key.is_xor()) return StoreLeafPoints<4, true>(key, aes, node, dst, stride);
  switch (key.leaf_words) {
    case 1:
      return StoreLeafPoints<1, false>(key, aes, node, dst, stride);
    case 2:
      return StoreLeafPoints<2, false>(key, aes, node, dst, stride);
    case 4:
      return StoreLeafPoints<4, false>(key, aes, node, dst, stride);
    case 8:
      return StoreLeafPoints<8, false>(key, aes, node, dst, stride);
    default:
      return StoreLeafPoints<16, false>(key, aes, node, dst, stride);
  }
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_TREE_H_
