// The byte-plane kernels (compiled with -mavx512f -mavx512bw -mavx512vnni), rows and lanes forms
// (kernels.h): vpdpbusd multiplies the unsigned digit bytes of the queries with the signed
// database bytes, four adjacent columns per 32-bit lane; the four planes are recombined as
// p0 + (p1 << 8) + (p2 << 16) + (p3 << 24) once per chunk.
#include <immintrin.h>

#include "pir/lattice/kernels.h"
#include "pir/lattice/kernels_blocked.h"
#include "pir/lattice/roofline.h"

namespace veil::lattice::internal {
namespace {

__m512i CombinePlanes(const __m512i (&sum)[4]) {
  return _mm512_add_epi32(
      _mm512_add_epi32(sum[0], _mm512_slli_epi32(sum[1], 8)),
      _mm512_add_epi32(_mm512_slli_epi32(sum[2], 16), _mm512_slli_epi32(sum[3], 24)));
}

// Rows form: 64 columns of 4 rows against the 4 digit planes of one query, 16 accumulators.
struct PlanesRowsStep {
  using Acc = Lanes;
  const PreparedQueries& q;
  uint64_t width;  // of the prepared query rows and planes

  void operator()(const int8_t* const* rows, int b, uint64_t c0, uint64_t len, Lanes* acc) const {
    const uint8_t* plane = q.planes + 4 * b * width + c0;
    __m512i sum[kRowsBlock][4];
    for (int i = 0; i < kRowsBlock; ++i) {
      for (int p = 0; p < 4; ++p) sum[i][p] = _mm512_setzero_si512();
    }
    for (uint64_t c = 0; c < len; c += 64) {
      PrefetchRows(rows, c0 + c);
      __m512i digits[4];
      for (int p = 0; p < 4; ++p) digits[p] = _mm512_loadu_si512(plane + p * width + c);
      for (int i = 0; i < kRowsBlock; ++i) {
        const __m512i d = _mm512_loadu_si512(rows[i] + c0 + c);
        for (int p = 0; p < 4; ++p) sum[i][p] = _mm512_dpbusd_epi32(sum[i][p], digits[p], d);
      }
    }
    for (int i = 0; i < kRowsBlock; ++i) {
      acc[i].v = _mm512_add_epi32(acc[i].v, CombinePlanes(sum[i]));
    }
  }
};

// Lanes form: 4 bytes (columns) of each of 2 rows broadcast against the digit planes of 16 or 32
// queries (4 bytes each per lane): 16 accumulators. The plane chunk (256 columns x 32 queries x
// 4 planes = 32 KiB) stays in L1 while a block's rows pass over it.
struct PlanesLanesStep {
  static constexpr int kRows = 2;
  static constexpr uint64_t kChunkCols = 256;
  const PreparedQueries& q;
  uint64_t width;  // of the prepared query rows and planes

  template <int QB>
  void Run(const int8_t* const* rows, uint64_t lane0, uint64_t c0, uint64_t c1,
           uint32_t* sums) const {
    __m512i acc[kRows][QB][4];
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < QB; ++j) {
        for (int p = 0; p < 4; ++p) acc[i][j][p] = _mm512_setzero_si512();
      }
    }
    for (uint64_t c = c0; c < c1; c += 4) {
      __m512i digits[4][QB];
      for (int p = 0; p < 4; ++p) {
        const uint8_t* at = q.planes + (((lane0 / 32) * 4 + p) * (width / 4) + c / 4) * 128;
        for (int j = 0; j < QB; ++j) digits[p][j] = _mm512_loadu_si512(at + 64 * j);
      }
      for (int i = 0; i < kRows; ++i) {
        int32_t four;
        __builtin_memcpy(&four, rows[i] + c, 4);
        const __m512i element = _mm512_set1_epi32(four);
        for (int j = 0; j < QB; ++j) {
          for (int p = 0; p < 4; ++p) {
            acc[i][j][p] = _mm512_dpbusd_epi32(acc[i][j][p], digits[p][j], element);
          }
        }
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < QB; ++j) AddLanes(sums + i * 32 + 16 * j, CombinePlanes(acc[i][j]));
    }
  }
};

}  // namespace

void PlanesRows(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  RowsProduct(db, q.batch, row_begin, row_end, out, out_stride,
              PlanesRowsStep{q, AlignedStride(db.cols)});
}

void PlanesLanes(const ByteMatrixView& db, const PreparedQueries& q, uint64_t row_begin,
                 uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  LanesProduct(db, q, row_begin, row_end, out, out_stride,
               PlanesLanesStep{q, AlignedStride(db.cols)});
}

uint32_t VnniLoop(uint64_t iters) {
  __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
  __asm__ volatile("" : "+v"(b));
  __m512i acc[24];
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_epi32(i);
  for (uint64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));
  }
  __m512i sum = acc[0];
#pragma GCC unroll 24
  for (int i = 1; i < 24; ++i) sum = _mm512_xor_si512(sum, acc[i]);
  return SumLanes(sum);
}

}  // namespace veil::lattice::internal
