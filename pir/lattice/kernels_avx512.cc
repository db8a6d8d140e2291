// The 32-bit multiply-add kernels (compiled with -mavx512f -mavx512bw), rows and lanes forms
// (kernels.h).
#include <immintrin.h>

#include "pir/lattice/kernels.h"
#include "pir/lattice/kernels_blocked.h"
#include "pir/lattice/roofline.h"

namespace veil::lattice::internal {
namespace {

// Rows form: 16 bytes of each of 4 rows sign-extended (vpmovsxbd) times the same 16 query words.
struct Int32RowsStep {
  using Acc = Lanes;
  const PreparedQueries& q;
  uint64_t width;  // of the prepared query rows and planes

  void operator()(const int8_t* const* rows, int b, uint64_t c0, uint64_t len, Lanes* acc) const {
    const uint32_t* words = q.words + b * width + c0;
    __m512i sum[kRowsBlock];
    for (int i = 0; i < kRowsBlock; ++i) sum[i] = _mm512_setzero_si512();
    for (uint64_t c = 0; c < len; c += 16) {
      if (c % 64 == 0) PrefetchRows(rows, c0 + c);
      const __m512i qv = _mm512_loadu_si512(words + c);
      for (int i = 0; i < kRowsBlock; ++i) {
        const __m512i d = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + c0 + c)));
        sum[i] = _mm512_add_epi32(sum[i], _mm512_mullo_epi32(d, qv));
      }
    }
    for (int i = 0; i < kRowsBlock; ++i) acc[i].v = _mm512_add_epi32(acc[i].v, sum[i]);
  }
};

// Lanes form: 16 columns of 4 rows widened once into a small buffer, then each element broadcast
// against 16 or 32 queries' words of its column: 8 accumulators in registers (more measured no
// faster here and make GCC 12 spill).
struct Int32LanesStep {
  static constexpr int kRows = 4;
  static constexpr uint64_t kChunkCols = 1024;  // 128 KiB of transposed queries (L2)
  const PreparedQueries& q;

  template <int QB>
  void Run(const int8_t* const* rows, uint64_t lane0, uint64_t c0, uint64_t c1,
           uint32_t* sums) const {
    __m512i acc[kRows][QB];
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < QB; ++j) acc[i][j] = _mm512_setzero_si512();
    }
    alignas(64) int32_t widened[kRows][16];
    for (uint64_t c = c0; c < c1; c += 16) {
      for (int i = 0; i < kRows; ++i) {
        _mm512_store_si512(
            widened[i],
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + c))));
      }
      for (int cc = 0; cc < 16; ++cc) {
        const uint32_t* words = q.words + (lane0 / 32) * q.group_stride + (c + cc) * q.col_stride;
        __m512i qv[QB];
        for (int j = 0; j < QB; ++j) qv[j] = _mm512_loadu_si512(words + 16 * j);
        for (int i = 0; i < kRows; ++i) {
          const __m512i element = _mm512_set1_epi32(widened[i][cc]);
          for (int j = 0; j < QB; ++j) {
            acc[i][j] = _mm512_add_epi32(acc[i][j], _mm512_mullo_epi32(qv[j], element));
          }
        }
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < QB; ++j) AddLanes(sums + i * 32 + 16 * j, acc[i][j]);
    }
  }
};

}  // namespace

void Int32Rows(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
               uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  RowsProduct(db, q.batch, row_begin, row_end, out, out_stride,
              Int32RowsStep{q, AlignedStride(db.cols)});
}

void Int32Lanes(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  LanesProduct(db, q, row_begin, row_end, out, out_stride, Int32LanesStep{q});
}

void MultiplyWordsAvx512(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                         uint64_t nvectors, uint32_t* out, uint64_t out_stride) {
  for (uint64_t r = 0; r < count; ++r) {
    const uint32_t* row = rows + r * n;
    for (uint64_t j = 0; j < nvectors; ++j) {
      const uint32_t* v = vectors + j * n;
      __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
      uint64_t k = 0;
      for (; k + 64 <= n; k += 64) {
        for (int u = 0; u < 4; ++u) {
          acc[u] = _mm512_add_epi32(acc[u], _mm512_mullo_epi32(_mm512_loadu_si512(row + k + 16 * u),
                                                               _mm512_loadu_si512(v + k + 16 * u)));
        }
      }
      for (; k < n; k += 16) {
        acc[0] = _mm512_add_epi32(
            acc[0], _mm512_mullo_epi32(_mm512_loadu_si512(row + k), _mm512_loadu_si512(v + k)));
      }
      const __m512i sum =
          _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
      out[j * out_stride + r] = SumLanes(sum);
    }
  }
}

uint32_t Int32MacLoop(uint64_t iters) {
  // The operands are opaque to the compiler (no strength reduction of the products); 12
  // independent accumulators cover vpmulld's latency (24 would spill, with their operands).
  __m512i a = _mm512_set1_epi32(3), b0 = _mm512_set1_epi32(5);
  __asm__ volatile("" : "+v"(b0));
  __m512i acc[12], b[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) {
    acc[i] = _mm512_set1_epi32(i);
    b[i] = _mm512_xor_si512(b0, _mm512_set1_epi32(i));
  }
  for (uint64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_add_epi32(acc[i], _mm512_mullo_epi32(a, b[i]));
    __asm__ volatile("" : "+v"(a));  // a new operand every iteration: nothing is hoisted
  }
  __m512i sum = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) sum = _mm512_xor_si512(sum, acc[i]);
  return SumLanes(sum);
}

uint64_t ReadAvx512(const uint8_t* data, uint64_t bytes) {
  __m512i x[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                  _mm512_setzero_si512()};
  for (uint64_t i = 0; i < bytes; i += 256) {
    for (int u = 0; u < 4; ++u)
      x[u] = _mm512_xor_si512(x[u], _mm512_loadu_si512(data + i + 64 * u));
  }
  const __m512i all = _mm512_xor_si512(_mm512_xor_si512(x[0], x[1]), _mm512_xor_si512(x[2], x[3]));
  return XorWords(&all, 8);
}

}  // namespace veil::lattice::internal
