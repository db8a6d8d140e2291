// The loop structures the vector kernels share (included by kernels_avx512.cc, kernels_vnni.cc
// and kernels_avx2.cc, each compiled for its own instruction set; the helpers of a vector width
// exist only where the file's instruction set has it). A kernel supplies only its inner step and
// its partial sum's type (Step::Acc); rows past the end of a range are read as copies of its last
// row (their sums are computed and dropped), so every step runs at its full block size.
#ifndef VEIL_PIR_LATTICE_KERNELS_BLOCKED_H_
#define VEIL_PIR_LATTICE_KERNELS_BLOCKED_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pir/lattice/kernels.h"

namespace veil::lattice::internal {
// Everything here in an anonymous namespace: each instruction-set file gets its own copies, so
// that no function compiled for one set can be the copy another file links to.
namespace {

// The sum of `n` 32-bit lanes mod 2^32 (GCC's _mm512_reduce_add_epi32 adds in signed int, which
// overflows: undefined behaviour that UBSan reports).
inline uint32_t SumWords(const void* lanes, int n) {
  uint32_t w[16];
  std::memcpy(w, lanes, 4 * n);
  uint32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += w[i];
  return sum;
}

// The XOR of the `n` 64-bit words at `lanes` (the bandwidth reads' result: roofline.h).
inline uint64_t XorWords(const void* lanes, int n) {
  uint64_t w[8];
  std::memcpy(w, lanes, 8 * n);
  uint64_t x = 0;
  for (int i = 0; i < n; ++i) x ^= w[i];
  return x;
}

// One vector partial sum (a struct, so that a std::vector of them keeps the type's alignment),
// its lanes' sum and sums[l] += its lanes: 16 lanes on AVX-512, 8 on AVX2.
#ifdef __AVX512F__
struct alignas(64) Lanes {
  __m512i v;
};
inline uint32_t SumLanes(__m512i v) { return SumWords(&v, 16); }
inline void AddLanes(uint32_t* sums, __m512i v) {
  _mm512_storeu_si512(sums, _mm512_add_epi32(_mm512_loadu_si512(sums), v));
}
#endif

#ifdef __AVX2__
struct alignas(32) Lanes8 {
  __m256i v;
};
inline uint32_t SumLanes(__m256i v) { return SumWords(&v, 8); }
inline void AddLanes(uint32_t* sums, __m256i v) {
  __m256i* at = reinterpret_cast<__m256i*>(sums);
  _mm256_storeu_si256(at, _mm256_add_epi32(_mm256_loadu_si256(at), v));
}
#endif

// Pointers to rows r0 .. r0 + count - 1, repeating the last row of [.., row_end).
template <int kCount>
void RowPointers(const ByteMatrixView& db, uint64_t r0, uint64_t row_end,
                 const int8_t* (&rows)[kCount]) {
  for (int i = 0; i < kCount; ++i) rows[i] = db.row(std::min<uint64_t>(r0 + i, row_end - 1));
}

// Rows form (small batches): rows in blocks of 4, columns in chunks of 2 KiB so that a block's
// 8 KiB of database bytes stays in L1 while every query of the batch passes over it; one vector
// partial sum (Step::Acc) per (query, row) carried across chunks and reduced once at the end. The
// database is read from memory once per batch.
// step(rows, b, c0, len, acc) adds to acc[i] (i < 4) the partial sums of rows[i][c0, c0 + len)
// against query b; len is a multiple of 64.
inline constexpr int kRowsBlock = 4;
inline constexpr uint64_t kRowsChunkBytes = 2048;
// Software prefetch distance of the rows form: with four row streams and the queries' at once the
// hardware prefetcher alone left batch 1 at ~60% of the read bandwidth on this machine (Zen 5);
// 2 KiB ahead per row (the row's next chunk) brings it to ~0.9 of it (measured 512 B to 4 KiB).
inline constexpr uint64_t kPrefetchAhead = 2048;

// Prefetches the 64-byte line kPrefetchAhead past `at` in each row of the block.
inline void PrefetchRows(const int8_t* const* rows, uint64_t at) {
  for (int i = 0; i < kRowsBlock; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(rows[i] + at + kPrefetchAhead), _MM_HINT_T0);
  }
}

template <class Step>
void RowsProduct(const ByteMatrixView& db, int batch, uint64_t row_begin, uint64_t row_end,
                 uint32_t* out, uint64_t out_stride, const Step& step) {
  using Acc = typename Step::Acc;
  std::vector<Acc> partial(static_cast<size_t>(batch) * kRowsBlock);
  const uint64_t width = AlignedStride(db.cols);
  for (uint64_t r0 = row_begin; r0 < row_end; r0 += kRowsBlock) {
    const int8_t* rows[kRowsBlock];
    RowPointers(db, r0, row_end, rows);
    std::fill(partial.begin(), partial.end(), Acc{});
    for (uint64_t c0 = 0; c0 < width; c0 += kRowsChunkBytes) {
      const uint64_t len = std::min(kRowsChunkBytes, width - c0);
      for (int b = 0; b < batch; ++b) step(rows, b, c0, len, partial.data() + b * kRowsBlock);
    }
    const int valid = static_cast<int>(std::min<uint64_t>(kRowsBlock, row_end - r0));
    for (int b = 0; b < batch; ++b) {
      for (int i = 0; i < valid; ++i) {
        out[b * out_stride + r0 + i] = SumLanes(partial[b * kRowsBlock + i].v);
      }
    }
  }
}

// Lanes form (large batches): the queries sit across vector lanes, 32 at a time (two vectors).
// For each group of 32 queries, rows go in blocks of kLanesBlockRows whose sums live in a small
// buffer, and columns in chunks of Step::kChunkCols so that the chunk of prepared queries stays
// in cache while the block's rows pass over it, Step::kRows rows per step.
// step.Run<QB>(rows, lane0, c0, c1, sums) adds to sums[i * 32 + l] (i < kRows, l < 16 * QB) the
// sums over columns [c0, c1) of row i against query lane0 + l.
inline constexpr int kLanesBlockRows = 48;

template <class Step>
void LanesProduct(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                  uint64_t row_end, uint32_t* out, uint64_t out_stride, const Step& step) {
  static_assert(kLanesBlockRows % Step::kRows == 0);
  alignas(64) uint32_t sums[kLanesBlockRows * 32];
  const uint64_t width = AlignedStride(db.cols);
  for (uint64_t lane0 = 0; lane0 < q.lanes; lane0 += 32) {
    const bool two = q.lanes - lane0 >= 32;
    const int lanes = static_cast<int>(std::min<uint64_t>(32, q.batch - lane0));
    for (uint64_t block = row_begin; block < row_end; block += kLanesBlockRows) {
      std::fill(std::begin(sums), std::end(sums), 0u);
      const uint64_t block_end = std::min<uint64_t>(block + kLanesBlockRows, row_end);
      for (uint64_t c0 = 0; c0 < width; c0 += Step::kChunkCols) {
        const uint64_t c1 = std::min(width, c0 + Step::kChunkCols);
        for (uint64_t r0 = block; r0 < block_end; r0 += Step::kRows) {
          const int8_t* rows[Step::kRows];
          RowPointers(db, r0, block_end, rows);
          uint32_t* at = sums + (r0 - block) * 32;
          if (two) {
            step.template Run<2>(rows, lane0, c0, c1, at);
          } else {
            step.template Run<1>(rows, lane0, c0, c1, at);
          }
        }
      }
      for (uint64_t r = block; r < block_end; ++r) {
        for (int l = 0; l < lanes; ++l) {
          out[(lane0 + l) * out_stride + r] = sums[(r - block) * 32 + l];
        }
      }
    }
  }
}

}  // namespace
}  // namespace veil::lattice::internal

#endif  // VEIL_PIR_LATTICE_KERNELS_BLOCKED_H_
