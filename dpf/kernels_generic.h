// Plain C++ kernels: the portable set, and the parts of the vector sets that need no intrinsics
// (compiled again in each instruction-set file so the compiler can vectorise them there).
// Everything is in an unnamed namespace: each file compiled with different -m flags keeps its
// own copy, so the linker never picks an AVX-512 body for the portable table.
#ifndef VEIL_DPF_KERNELS_GENERIC_H_
#define VEIL_DPF_KERNELS_GENERIC_H_

#include <cstddef>
#include <cstdint>

#include "dpf/block.h"
#include "dpf/params.h"
#include "dpf/prg_portable.h"

namespace veil::dpf {
namespace {

[[maybe_unused]] void GenericExpandLevel(Prg prg, const Block* parents, size_t n, Block cw_left, bool cw_right,
                        Block* children) {
  const AesKeys aes = HostAesKeys();
  for (size_t i = 0; i < n; ++i) {
    Block left, right;
    ExpandNode(prg, aes, parents[i], left, right);
    CorrectChildren(parents[i], cw_left, cw_right, left, right);
    children[2 * i] = left;
    children[2 * i + 1] = right;
  }
}

[[maybe_unused]] void GenericConvertLeaves(Prg prg, const Block* leaves, size_t n, int words, OutputType output,
                          bool party1, const uint32_t* final_cw, uint32_t* values) {
  const AesKeys aes = HostAesKeys();
  for (size_t i = 0; i < n; ++i) {
    uint32_t* v = values + i * words;
    ConvertLeaf(prg, aes, leaves[i], words, v);
    FinishLeaf(output, party1, leaves[i].control_bit(), final_cw, words, v);
  }
}

[[maybe_unused]] void GenericMacAdd(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                   size_t nrows, uint32_t row_words, uint32_t* acc) {
  for (int k = 0; k < keys; ++k) {
    const uint32_t* __restrict yk = y[k];
    uint32_t* __restrict a = acc + size_t(k) * row_words;
    for (size_t r = 0; r < nrows; ++r) {
      const uint32_t* __restrict row = rows + r * stride;
      const uint32_t v = yk[r];
      for (uint32_t j = 0; j < row_words; ++j) a[j] += v * row[j];
    }
  }
}

[[maybe_unused]] void GenericMacXor(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                   size_t nrows, uint32_t row_words, uint32_t* acc) {
  for (int k = 0; k < keys; ++k) {
    const uint32_t* __restrict yk = y[k];
    uint32_t* __restrict a = acc + size_t(k) * row_words;
    for (size_t r = 0; r < nrows; ++r) {
      const uint32_t* __restrict row = rows + r * stride;
      const uint32_t mask = 0u - ((yk[r / 32] >> (r % 32)) & 1);
      for (uint32_t j = 0; j < row_words; ++j) a[j] ^= mask & row[j];
    }
  }
}

}  // namespace
}  // namespace veil::dpf

#endif  // VEIL_DPF_KERNELS_GENERIC_H_
