// The 32-bit multiply-add kernels for CPUs with AVX2 but no AVX-512 (compiled with -mavx2): the
// rows and lanes forms in 16-bit halves (vpmaddwd, on the split words of kernels.h), so that such
// a CPU neither answers nor computes a hint with the reference loop, and MultiplyWords (the
// client's products with A and the hint).
#include <immintrin.h>

#include "pir/lattice/kernels.h"
#include "pir/lattice/kernels_blocked.h"
#include "pir/lattice/roofline.h"

namespace veil::lattice::internal {
namespace {

// Rows form: 16 bytes of each of 4 rows sign-extended to 16 bits (vpmovsxbw) times the same 16
// query words, each word y split as y = h 2^16 + l with l and h signed 16-bit (the split form of
// kernels.h's PreparedQueries): vpmaddwd sums the pairs of byte x l (and byte x h) products in
// 32-bit lanes, and the row's sum is sum(x l) + 2^16 sum(x h) mod 2^32. On Zen 2 vpmaddwd issues
// once a cycle where vpmulld takes two: twice the multiply-adds of the words' form a cycle.
struct Int32RowsStep {
  using Acc = Lanes8;
  const PreparedQueries& q;
  uint64_t width;  // of the prepared query rows

  void operator()(const int8_t* const* rows, int b, uint64_t c0, uint64_t len, Lanes8* acc) const {
    const uint32_t* words = q.words + b * width + c0;
    __m256i low[kRowsBlock], high[kRowsBlock];
    for (int i = 0; i < kRowsBlock; ++i) low[i] = high[i] = _mm256_setzero_si256();
    for (uint64_t c = 0; c < len; c += 16) {
      if (c % 64 == 0) PrefetchRows(rows, c0 + c);
      const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + c));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + c + 8));
      for (int i = 0; i < kRowsBlock; ++i) {
        const __m256i x = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + c0 + c)));
        low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(x, l));
        high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(x, h));
      }
    }
    for (int i = 0; i < kRowsBlock; ++i) {
      acc[i].v =
          _mm256_add_epi32(acc[i].v, _mm256_add_epi32(low[i], _mm256_slli_epi32(high[i], 16)));
    }
  }
};

// Lanes form: each pair of a row's elements (columns c, c + 1, sign-extended to 16 bits) broadcast
// against 16 or 32 queries' halves of those columns (kernels.h's pair form; vpmaddwd sums the two
// columns' products for a query in its 32-bit lane): 4 or 8 accumulators, the query halves read
// from memory (the column chunk's 128 KiB stay in L2).
struct Int32LanesStep {
  static constexpr int kRows = 1;
  static constexpr uint64_t kChunkCols = 1024;  // 128 KiB of prepared queries (L2)
  const PreparedQueries& q;

  template <int QB>
  void Run(const int8_t* const* rows, uint64_t lane0, uint64_t c0, uint64_t c1,
           uint32_t* sums) const {
    constexpr int kVecs = 2 * QB;  // 8 queries each
    __m256i low[kVecs], high[kVecs];
    for (int j = 0; j < kVecs; ++j) low[j] = high[j] = _mm256_setzero_si256();
    const int8_t* row = rows[0];
    const uint32_t* group = q.words + (lane0 / 32) * q.group_stride;
    for (uint64_t c = c0; c < c1; c += 2) {
      const uint32_t pair = static_cast<uint16_t>(static_cast<int16_t>(row[c])) |
                            (static_cast<uint32_t>(static_cast<int32_t>(row[c + 1])) << 16);
      const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(pair));
      const __m256i* block = reinterpret_cast<const __m256i*>(group + c / 2 * q.col_stride);
      for (int j = 0; j < kVecs; ++j) {
        low[j] = _mm256_add_epi32(low[j], _mm256_madd_epi16(x, _mm256_loadu_si256(block + j)));
        high[j] =
            _mm256_add_epi32(high[j], _mm256_madd_epi16(x, _mm256_loadu_si256(block + 4 + j)));
      }
    }
    for (int j = 0; j < kVecs; ++j) {
      AddLanes(sums + 8 * j, _mm256_add_epi32(low[j], _mm256_slli_epi32(high[j], 16)));
    }
  }
};

}  // namespace

void Int32RowsAvx2(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                   uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  RowsProduct(db, q.batch, row_begin, row_end, out, out_stride,
              Int32RowsStep{q, AlignedStride(db.cols)});
}

void Int32LanesAvx2(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                    uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  LanesProduct(db, q, row_begin, row_end, out, out_stride, Int32LanesStep{q});
}

void MultiplyWordsAvx2(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                       uint64_t nvectors, uint32_t* out, uint64_t out_stride) {
  for (uint64_t r = 0; r < count; ++r) {
    const uint32_t* row = rows + r * n;
    for (uint64_t j = 0; j < nvectors; ++j) {
      const uint32_t* v = vectors + j * n;
      __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
      uint64_t k = 0;
      for (; k + 32 <= n; k += 32) {
        for (int u = 0; u < 4; ++u) {
          acc[u] = _mm256_add_epi32(
              acc[u], _mm256_mullo_epi32(
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k + 8 * u)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + k + 8 * u))));
        }
      }
      for (; k < n; k += 8) {
        acc[0] = _mm256_add_epi32(
            acc[0],
            _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + k))));
      }
      const __m256i sum =
          _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
      out[j * out_stride + r] = SumLanes(sum);
    }
  }
}

uint64_t ReadAvx2(const uint8_t* data, uint64_t bytes) {
  // Four 64 KiB segments at a time, 64 bytes of each in turn with a software prefetch 2 KiB ahead
  // (the rows form's pattern): 38-41 GB/s on two Zen 2 vCPUs where one sequential stream of
  // 256-bit or 64-bit loads gave 22-35 (1 GiB on two threads, fastest of five).
  constexpr uint64_t kSegment = uint64_t{64} << 10, kGroup = 4 * kSegment;
  __m256i x[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                  _mm256_setzero_si256()};
  uint64_t i = 0;
  for (; i + kGroup <= bytes; i += kGroup) {
    for (uint64_t c = 0; c < kSegment; c += 64) {
      for (int s = 0; s < 4; ++s) {
        const uint8_t* p = data + i + s * kSegment + c;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_T0);
        x[s] = _mm256_xor_si256(x[s], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        x[s] = _mm256_xor_si256(x[s], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
      }
    }
  }
  for (; i < bytes; i += 32) {
    x[0] = _mm256_xor_si256(x[0], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i)));
  }
  const __m256i all = _mm256_xor_si256(_mm256_xor_si256(x[0], x[1]), _mm256_xor_si256(x[2], x[3]));
  return XorWords(&all, 4);
}

uint32_t Int32MacLoopAvx2(uint64_t iters) {
  // The rows form's operation: vpmaddwd (16 byte x half-word products, 8 words' multiply-adds of
  // the two that a word takes) and vpaddd, 6 independent accumulators; their operands and the
  // shared one hold 13 of the 16 registers (the chains wait only on vpaddd). vpmulld does half as
  // many a cycle on Zen 2.
  __m256i a = _mm256_set1_epi32(3), b0 = _mm256_set1_epi32(5);
  __asm__ volatile("" : "+x"(b0));
  __m256i acc[6], b[6];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i] = _mm256_set1_epi32(i);
    b[i] = _mm256_xor_si256(b0, _mm256_set1_epi32(i));
  }
  for (uint64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(a, b[i]));
    __asm__ volatile("" : "+x"(a));  // a new operand every iteration: nothing is hoisted
  }
  __m256i sum = acc[0];
#pragma GCC unroll 6
  for (int i = 1; i < 6; ++i) sum = _mm256_xor_si256(sum, acc[i]);
  return SumLanes(sum);
}

}  // namespace veil::lattice::internal
