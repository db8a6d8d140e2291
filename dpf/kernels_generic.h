// Plain C++ kernels: the portable set, and the parts of the vector sets that need no intrinsics
// (compiled again in each instruction-set file so the compiler can vectorise them there).
// Everything is in an unnamed namespace: each file compiled with different -m flags keeps its
// own copy, so the linker never picks an AVX-512 body for the portable table.
#ifndef VEIL_DPF_KERNELS_GENERIC_H_
#define VEIL_DPF_KERNELS_GENERIC_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dpf/block.h"
#include "dpf/params.h"
#include "dpf/prg_portable.h"

namespace veil::dpf {
namespace {

[[maybe_unused]] void GenericExpandLevel(Prg prg, const Block* parents, size_t n, Block cw_left,
                                         bool cw_right, Block* children) {
  const AesKeys aes = HostAesKeys();
  for (size_t i = 0; i < n; ++i) {
    Block left, right;
    ExpandNode(prg, aes, parents[i], left, right);
    CorrectChildren(parents[i], cw_left, cw_right, left, right);
    children[2 * i] = left;
    children[2 * i + 1] = right;
  }
}

[[maybe_unused]] void GenericConvertLeaves(Prg prg, const Block* leaves, size_t n, int words,
                                           OutputType output, bool party1, const uint32_t* final_cw,
                                           uint32_t* values) {
  const AesKeys aes = HostAesKeys();
  for (size_t i = 0; i < n; ++i) {
    uint32_t* v = values + i * words;
    ConvertLeaf(prg, aes, leaves[i], words, v);
    FinishLeaf(output, party1, leaves[i].control_bit(), final_cw, words, v);
  }
}

// Eight words: GCC's vector type (one AVX2 register; two SSE ones in the portable build), loaded
// and stored at any word's alignment, aliasing the table's and the sums' words.
typedef uint32_t U32x8 __attribute__((vector_size(32), aligned(4), may_alias));

// Sums K keys x 8V words in locals over all rows, then adds them to acc[k * acc_stride + j]: the
// sums stay in registers (summed in memory, each row waited on the previous row's store) and each
// row is read once for K keys. Op's operator() is the accumulation, Combine the final add.
template <int K, int V, class Op>
inline void MacBlock(const uint32_t* const* y, const uint32_t* rows, uint64_t stride, size_t nrows,
                     uint32_t* acc, uint32_t acc_stride, Op op) {
  U32x8 a[K][V];
#pragma GCC unroll 16
  for (int k = 0; k < K; ++k) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[k][v] = U32x8{};
  }
  for (size_t r = 0; r < nrows; ++r) {
    const U32x8* words = reinterpret_cast<const U32x8*>(rows + r * stride);
#pragma GCC unroll 16
    for (int k = 0; k < K; ++k) {
      const uint32_t s = op.Scalar(y[k], r);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[k][v] = op(a[k][v], s, words[v]);
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < K; ++k) {
    U32x8* out = reinterpret_cast<U32x8*>(acc + size_t(k) * acc_stride);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) out[v] = op.Combine(out[v], a[k][v]);
  }
}

// The same for one column.
template <int K, class Op>
inline void MacColumn(const uint32_t* const* y, const uint32_t* rows, uint64_t stride, size_t nrows,
                      uint32_t* acc, uint32_t acc_stride, Op op) {
  uint32_t a[K] = {};
  for (size_t r = 0; r < nrows; ++r) {
    for (int k = 0; k < K; ++k) a[k] = op(a[k], op.Scalar(y[k], r), rows[r * stride]);
  }
  for (int k = 0; k < K; ++k)
    acc[size_t(k) * acc_stride] = op.Combine(acc[size_t(k) * acc_stride], a[k]);
}

// The columns of K keys: blocks of 16 and 8 words, then one word at a time.
template <int K, class Op>
inline void MacColumns(const uint32_t* const* y, const uint32_t* rows, uint64_t stride,
                       size_t nrows, uint32_t row_words, uint32_t* acc, Op op) {
  uint32_t c = 0;
  for (; c + 16 <= row_words; c += 16)
    MacBlock<K, 2>(y, rows + c, stride, nrows, acc + c, row_words, op);
  for (; c + 8 <= row_words; c += 8)
    MacBlock<K, 1>(y, rows + c, stride, nrows, acc + c, row_words, op);
  for (; c < row_words; ++c) MacColumn<K>(y, rows + c, stride, nrows, acc + c, row_words, op);
}

// Keys four at a time (8 AVX2 registers of sums at 16 words), the rest two and one at a time.
template <class Op>
inline void Mac(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                size_t nrows, uint32_t row_words, uint32_t* acc, Op op) {
  int k = 0;
  for (; k + 4 <= keys; k += 4)
    MacColumns<4>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words, op);
  for (; k + 2 <= keys; k += 2)
    MacColumns<2>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words, op);
  for (; k < keys; ++k)
    MacColumns<1>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words, op);
}

// sum + y * word, for scalars and vectors.
struct AddOp {
  static uint32_t Scalar(const uint32_t* yk, size_t r) { return yk[r]; }
  template <class T>
  T operator()(T sum, uint32_t v, T word) const {
    return sum + v * word;
  }
  template <class T>
  static T Combine(T acc, T sum) {
    return acc + sum;
  }
};

// sum ^ (word if bit r of y is set), for scalars and vectors.
struct XorOp {
  static uint32_t Scalar(const uint32_t* yk, size_t r) {
    return 0u - ((yk[r / 32] >> (r % 32)) & 1);
  }
  template <class T>
  T operator()(T sum, uint32_t mask, T word) const {
    return sum ^ (mask & word);
  }
  template <class T>
  static T Combine(T acc, T sum) {
    return acc ^ sum;
  }
};

[[maybe_unused]] void GenericMacAdd(const uint32_t* const* y, int keys, const uint32_t* rows,
                                    uint64_t stride, size_t nrows, uint32_t row_words,
                                    uint32_t* acc) {
  Mac(y, keys, rows, stride, nrows, row_words, acc, AddOp{});
}

[[maybe_unused]] void GenericMacXor(const uint32_t* const* y, int keys, const uint32_t* rows,
                                    uint64_t stride, size_t nrows, uint32_t row_words,
                                    uint32_t* acc) {
  Mac(y, keys, rows, stride, nrows, row_words, acc, XorOp{});
}

}  // namespace
}  // namespace veil::dpf

#endif  // VEIL_DPF_KERNELS_GENERIC_H_
