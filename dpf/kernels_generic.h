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
// and stored at any word's alignment, aliasing the table's and the sums' words. Passed by
// reference only (by value, its ABI differs between builds with and without AVX), and only to
// locals: a template's deduced type drops the typedef's alignment.
typedef uint32_t U32x8 __attribute__((vector_size(32), aligned(4), may_alias));

// sum += y * word, for words and vectors of them.
struct AddOp {
  static uint32_t Scalar(const uint32_t* yk, size_t r) { return yk[r]; }
  template <class T>
  static void Step(T& sum, uint32_t v, const T& word) {
    sum += v * word;
  }
  template <class T>
  static void Combine(T& acc, const T& sum) {
    acc += sum;
  }
};

// sum ^= word if bit r of y is set (a mask of all ones or none), for words and vectors of them.
struct XorOp {
  static uint32_t Scalar(const uint32_t* yk, size_t r) {
    return 0u - ((yk[r / 32] >> (r % 32)) & 1);
  }
  template <class T>
  static void Step(T& sum, uint32_t mask, const T& word) {
    sum ^= mask & word;
  }
  template <class T>
  static void Combine(T& acc, const T& sum) {
    acc ^= sum;
  }
};

// Sums K keys x 8V words in locals over all rows, then adds them to acc[k * acc_stride + j]: the
// sums stay in registers (summed in memory, each row waited on the previous row's store) and each
// row is read once for K keys.
template <int K, int V, class Op>
inline void MacBlock(const uint32_t* const* y, const uint32_t* rows, uint64_t stride, size_t nrows,
                     uint32_t* acc, uint32_t acc_stride) {
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
      const uint32_t s = Op::Scalar(y[k], r);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const U32x8 word = words[v];  // loaded here: a reference would lose the word alignment
        Op::Step(a[k][v], s, word);
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < K; ++k) {
    U32x8* out = reinterpret_cast<U32x8*>(acc + size_t(k) * acc_stride);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      U32x8 sum = out[v];
      Op::Combine(sum, a[k][v]);
      out[v] = sum;
    }
  }
}

// The same for one column.
template <int K, class Op>
inline void MacColumn(const uint32_t* const* y, const uint32_t* rows, uint64_t stride, size_t nrows,
                      uint32_t* acc, uint32_t acc_stride) {
  uint32_t a[K] = {};
  for (size_t r = 0; r < nrows; ++r) {
    for (int k = 0; k < K; ++k) Op::Step(a[k], Op::Scalar(y[k], r), rows[r * stride]);
  }
  for (int k = 0; k < K; ++k) Op::Combine(acc[size_t(k) * acc_stride], a[k]);
}

// The columns of K keys: blocks of 16 and 8 words, then one word at a time.
template <int K, class Op>
inline void MacColumns(const uint32_t* const* y, const uint32_t* rows, uint64_t stride,
                       size_t nrows, uint32_t row_words, uint32_t* acc) {
  uint32_t c = 0;
  for (; c + 16 <= row_words; c += 16) {
    MacBlock<K, 2, Op>(y, rows + c, stride, nrows, acc + c, row_words);
  }
  for (; c + 8 <= row_words; c += 8) {
    MacBlock<K, 1, Op>(y, rows + c, stride, nrows, acc + c, row_words);
  }
  for (; c < row_words; ++c) MacColumn<K, Op>(y, rows + c, stride, nrows, acc + c, row_words);
}

// Keys four at a time (8 AVX2 registers of sums at 16 words), the rest two and one at a time.
template <class Op>
inline void Mac(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                size_t nrows, uint32_t row_words, uint32_t* acc) {
  int k = 0;
  for (; k + 4 <= keys; k += 4) {
    MacColumns<4, Op>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words);
  }
  for (; k + 2 <= keys; k += 2) {
    MacColumns<2, Op>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words);
  }
  for (; k < keys; ++k) {
    MacColumns<1, Op>(y + k, rows, stride, nrows, row_words, acc + size_t(k) * row_words);
  }
}

[[maybe_unused]] void GenericMacAdd(const uint32_t* const* y, int keys, const uint32_t* rows,
                                    uint64_t stride, size_t nrows, uint32_t row_words,
                                    uint32_t* acc) {
  Mac<AddOp>(y, keys, rows, stride, nrows, row_words, acc);
}

[[maybe_unused]] void GenericMacXor(const uint32_t* const* y, int keys, const uint32_t* rows,
                                    uint64_t stride, size_t nrows, uint32_t row_words,
                                    uint32_t* acc) {
  Mac<XorOp>(y, keys, rows, stride, nrows, row_words, acc);
}

}  // namespace
}  // namespace veil::dpf

#endif  // VEIL_DPF_KERNELS_GENERIC_H_
