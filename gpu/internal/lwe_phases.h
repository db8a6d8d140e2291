// The LWE product on the GPU (pir/lattice's DB * Q mod 2^32, DB signed bytes) as per-thread
// phases, written once for the device runner (gpu/lwe_kernels.cu) and the host runner
// (gpu/lwe_host_run.cc), as gpu/internal/phases.h does for the DPF kernels: a runner executes
// one phase for all threads of a block and then synchronises; items of one phase touch disjoint
// data, so the host's sequential order is one valid schedule of the device's threads.
//
// A block owns a tile of database rows and a chunk of kLweChunkCols columns (grid: row tiles x
// column chunks); its sums over the chunk are added into the answers with global atomics, so the
// answers must be zeroed first. Two bodies:
//   CUDA cores (any batch; the mat-vec of batch 1): each warp takes R rows; lane l reads 16 bytes
//     of each row at columns 16 l + 512 s (a warp reads 512 contiguous bytes per step) and
//     multiplies them with the staged query words, every query word serving R rows (kept in
//     registers: R x KB accumulators). Lane partial sums meet in shared memory.
//   Tensor cores (batches): VIPIR's byte planes. Each query word is four signed base-256 digits
//     (SignedDigits, as the DPF tensor path), so C[rows x 4 KB] = DB[rows x cols] . planes[cols x 4
//     KB] is an s8 x s8 GEMM with INT32 accumulation (wmma m16n16k16); then answer[b][r] += sum_p
//     2^(8p) C[r][p KB + b], wrapping mod 2^32. Within a chunk |C| <= 1024 * 2^14 = 2^24: no
//     overflow. Operands are staged 16 x 16-tiled (every fragment load 256-byte aligned); the
//     digit planes are made once per pass (LwePlaneItem) and only copied by the blocks.
#ifndef VEIL_GPU_INTERNAL_LWE_PHASES_H_
#define VEIL_GPU_INTERNAL_LWE_PHASES_H_

#include <cstdint>
#include <cstring>

#include "dpf/hd.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {

inline constexpr int kLweThreads = 256;  // 8 warps
inline constexpr int kLweWarps = kLweThreads / 32;
inline constexpr uint32_t kLweChunkCols = 1024;  // columns of one block
// CUDA cores: at most 16 queries per pass, R rows per warp (R * KB accumulators per thread).
inline constexpr int kLweCoreMaxQueries = 16;
VEIL_HD constexpr int LweCoreRowsPerWarp(int kb) { return kb <= 4 ? 4 : (kb <= 8 ? 2 : 1); }
// Tensor cores: 64 rows per block, at most 32 queries (N = 128 plane columns) per pass, columns
// staged 256 at a time.
inline constexpr int kLweTcRows = 64;
inline constexpr int kLweTcMaxQueries = 32;
inline constexpr uint32_t kLweTcStepCols = 256;

struct LweArgs {
  const int8_t* db = nullptr;  // rows x stride signed bytes (stride a multiple of 64)
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t stride = 0;
  const uint32_t* queries = nullptr;  // this pass's queries: queries[b * cols + c], b < kb
  int kb = 0;                         // queries in this pass
  uint32_t* out = nullptr;            // out[b * out_stride + r] += the block's sums
  uint64_t out_stride = 0;
  const int8_t* planes = nullptr;  // tensor passes: the queries' digit planes (LwePlaneItem)
};

// ---- CUDA cores ------------------------------------------------------------------------------

// Shared memory: the chunk's query words, [b][position] with column c at position
// ((c % 16) / 4) * (C / 4) + (c / 16) * 4 + c % 4 (lane l reads 16 contiguous bytes per group:
// no bank conflicts), then the lane partials [row][b][lane].
VEIL_HD uint32_t CoreQueryPos(uint32_t c) {
  return ((c % 16) / 4) * (kLweChunkCols / 4) + (c / 16) * 4 + c % 4;
}
VEIL_HD uint32_t LweCoreSharedBytes(int kb) {
  return 4u * kb * kLweChunkCols + 4u * kLweWarps * LweCoreRowsPerWarp(kb) * kb * 32;
}

// The byte k of w as a signed value.
VEIL_HD int32_t SignedByte(uint32_t w, int k) {
  return static_cast<int32_t>(static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * k))));
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <int KB, class Runner>
VEIL_HD void LweCoreBlock(Runner& run, const LweArgs& a, uint8_t* smem, uint32_t bx, uint32_t by) {
  constexpr int R = LweCoreRowsPerWarp(KB);
  uint32_t* q = reinterpret_cast<uint32_t*>(smem);
  uint32_t* part = q + KB * kLweChunkCols;
  const uint64_t row0 = static_cast<uint64_t>(bx) * kLweWarps * R;
  const uint64_t c0 = static_cast<uint64_t>(by) * kLweChunkCols;
  // 1. The chunk's query words (zero beyond the matrix and beyond kb).
  run.Phase(KB * kLweChunkCols, [&](uint32_t i) {
    const uint32_t b = i / kLweChunkCols, c = i % kLweChunkCols;
    uint32_t w = 0;
    if (static_cast<int>(b) < a.kb && c0 + c < a.cols) w = a.queries[b * a.cols + c0 + c];
    q[b * kLweChunkCols + CoreQueryPos(c)] = w;
  });
  // 2. Each thread: R rows x KB queries over its 16-byte pieces of the chunk.
  run.Phase(kLweThreads, [&](uint32_t t) {
    const uint32_t warp = t / 32, lane = t % 32;
    // Every index of acc and d is a compile-time constant after unrolling: registers only.
    uint32_t acc[R][KB];
    VEIL_GPU_UNROLL
    for (int i = 0; i < R; ++i) {
      VEIL_GPU_UNROLL
      for (int b = 0; b < KB; ++b) acc[i][b] = 0;
    }
    VEIL_GPU_UNROLL
    for (uint32_t s = 0; s < kLweChunkCols / 512; ++s) {
      const uint64_t col = c0 + 16 * lane + 512 * s;
      uint32_t d[R][4];
      VEIL_GPU_UNROLL
      for (int i = 0; i < R; ++i) {
        const uint64_t row = row0 + warp * R + i;
        VEIL_GPU_UNROLL
        for (int k = 0; k < 4; ++k) d[i][k] = 0;
        if (row < a.rows && col < a.stride) {
          const uint32_t* p = reinterpret_cast<const uint32_t*>(a.db + row * a.stride + col);
          VEIL_GPU_UNROLL
          for (int k = 0; k < 4; ++k) d[i][k] = p[k];
        }
      }
      VEIL_GPU_UNROLL
      for (uint32_t g = 0; g < 4; ++g) {
        const uint32_t pos = g * (kLweChunkCols / 4) + (lane + 32 * s) * 4;
        VEIL_GPU_UNROLL
        for (int b = 0; b < KB; ++b) {
          const uint32_t* qw = q + b * kLweChunkCols + pos;
          VEIL_GPU_UNROLL
          for (int e = 0; e < 4; ++e) {
            VEIL_GPU_UNROLL
            for (int i = 0; i < R; ++i) {
              acc[i][b] += static_cast<uint32_t>(SignedByte(d[i][g], e)) * qw[e];
            }
          }
        }
      }
    }
    VEIL_GPU_UNROLL
    for (int i = 0; i < R; ++i) {
      VEIL_GPU_UNROLL
      for (int b = 0; b < KB; ++b) part[((warp * R + i) * KB + b) * 32 + lane] = acc[i][b];
    }
  });
  // 3. Per (row, query): the 32 lanes' partials into the answer.
  run.Phase(kLweWarps * R * KB, [&](uint32_t i) {
    const uint32_t row_in_tile = i / KB, b = i % KB;
    const uint64_t row = row0 + row_in_tile;
    if (row >= a.rows || static_cast<int>(b) >= a.kb) return;
    uint32_t sum = 0;
    for (int lane = 0; lane < 32; ++lane) sum += part[i * 32 + lane];
    run.GlobalAdd(&a.out[b * a.out_stride + row], sum);
  });
}

// ---- Tensor cores ----------------------------------------------------------------------------

// Shared memory: A (kLweTcRows x step, the database), B (step x 4 KB, the digit planes; plane
// column p * KB + b, copied from LwePlaneItem's), both 16 x 16-tiled, and C (kLweTcRows x 4 KB
// int32, accumulated over the chunk's steps).
struct LweTcLayout {
  uint32_t a = 0, b = 0, c = 0, bytes = 0;
};
VEIL_HD LweTcLayout MakeLweTcLayout(int kb) {
  LweTcLayout l;
  l.b = kLweTcRows * kLweTcStepCols;
  l.c = l.b + kLweTcStepCols * 4u * kb;
  l.bytes = l.c + 4u * kLweTcRows * 4u * kb;
  return l;
}

// 16 bytes moved at once (one 128-bit access on the device; both addresses 16-byte aligned).
struct alignas(16) LweBytes16 {
  uint32_t w[4];
};
VEIL_HD LweBytes16 LoadBytes16(const void* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const LweBytes16*>(p);
#else
  LweBytes16 v;  // the host's buffers need not be 16-byte aligned
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}
VEIL_HD void StoreBytes16(void* p, const LweBytes16& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<LweBytes16*>(p) = v;
#else
  std::memcpy(p, &v, sizeof(v));
#endif
}

// The digit planes of a tensor pass, made once per pass rather than by every block: per step of
// kLweTcStepCols columns, that step's B operand [step columns x 4 KB] 16 x 16-tiled, contiguous
// (plane column p * KB + b; zero beyond the columns and the pass's queries).
VEIL_HD uint64_t LwePlaneSteps(uint64_t stride) {
  return (stride + kLweTcStepCols - 1) / kLweTcStepCols;
}
VEIL_HD uint64_t LwePlaneItems(uint64_t stride, int kb) {
  return LwePlaneSteps(stride) * kLweTcStepCols * kb;
}
VEIL_HD uint64_t LwePlaneBytes(uint64_t stride, int kb) { return 4 * LwePlaneItems(stride, kb); }
// Item i of LwePlaneItems: query b = i / (steps x step columns), column c = the rest (consecutive
// items read consecutive words of one query).
template <int KB>
VEIL_HD void LwePlaneItem(const LweArgs& a, int8_t* planes, uint64_t i) {
  constexpr uint32_t kN = 4 * KB;
  const uint64_t cols = LwePlaneSteps(a.stride) * kLweTcStepCols;
  const uint32_t b = static_cast<uint32_t>(i / cols);
  const uint64_t c = i % cols;
  int8_t d[4] = {0, 0, 0, 0};
  if (static_cast<int>(b) < a.kb && c < a.cols) SignedDigits(a.queries[b * a.cols + c], d);
  int8_t* tile = planes + (c / kLweTcStepCols) * kLweTcStepCols * kN;
  for (int p = 0; p < 4; ++p) {
    tile[Tiled16(static_cast<uint32_t>(c % kLweTcStepCols), p * KB + b, kN)] = d[p];
  }
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <int KB, class Runner>
VEIL_HD void LweTensorBlock(Runner& run, const LweArgs& a, uint8_t* smem, uint32_t bx,
                            uint32_t by) {
  constexpr uint32_t kN = 4 * KB;  // plane columns, a multiple of 16
  const LweTcLayout layout = MakeLweTcLayout(KB);
  int8_t* tile_a = reinterpret_cast<int8_t*>(smem + layout.a);
  int8_t* tile_b = reinterpret_cast<int8_t*>(smem + layout.b);
  int32_t* tile_c = reinterpret_cast<int32_t*>(smem + layout.c);
  const uint64_t row0 = static_cast<uint64_t>(bx) * kLweTcRows;
  const uint64_t c0 = static_cast<uint64_t>(by) * kLweChunkCols;
  run.Phase(kLweTcRows * kN, [&](uint32_t i) { tile_c[i] = 0; });
  for (uint32_t step = 0; step < kLweChunkCols / kLweTcStepCols; ++step) {
    const uint64_t s0 = c0 + step * kLweTcStepCols;
    if (s0 >= a.stride) break;  // uniform across the block
    // A: 16 bytes per item (rows beyond the matrix read as zero). A warp's items: 8 rows x 64
    // contiguous bytes (whole sectors), each quarter warp 8 rows of one 16-column tile (128
    // contiguous bytes of shared memory: no bank conflict).
    run.Phase(kLweTcRows * kLweTcStepCols / 16, [&](uint32_t i) {
      const uint32_t lane = i % 32, group = i / 32;
      const uint32_t r = (group % 8) * 8 + lane % 8, k = ((group / 8) * 4 + lane / 8) * 16;
      const uint64_t row = row0 + r;
      LweBytes16 v = {{0, 0, 0, 0}};
      if (row < a.rows && s0 + k < a.stride) {
        v = LoadBytes16(a.db + row * a.stride + s0 + k);
      }
      StoreBytes16(tile_a + Tiled16(r, k, kLweTcStepCols), v);
    });
    // B: this step's digit planes, copied.
    const int8_t* step_planes = a.planes + (s0 / kLweTcStepCols) * kLweTcStepCols * kN;
    run.Phase(kLweTcStepCols * kN / 16, [&](uint32_t i) {
      StoreBytes16(tile_b + 16 * i, LoadBytes16(step_planes + 16 * i));
    });
    run.template TensorTiles<kN>(tile_a, tile_b, tile_c);
  }
  // answer[b][r] += sum_p 2^(8p) C[r][p * KB + b], wrapping mod 2^32.
  run.Phase(kLweTcRows * KB, [&](uint32_t i) {
    const uint32_t r = i / KB, b = i % KB;
    const uint64_t row = row0 + r;
    if (row >= a.rows || static_cast<int>(b) >= a.kb) return;
    uint32_t sum = 0;
    for (int p = 0; p < 4; ++p)
      sum += static_cast<uint32_t>(tile_c[r * kN + p * KB + b]) << (8 * p);
    run.GlobalAdd(&a.out[b * a.out_stride + row], sum);
  });
}

// C += A . B on one step's tiles, the scalar definition of what the device does with wmma
// (item = one element of C).
template <uint32_t kN>
VEIL_HD void LweTensorTileItem(const int8_t* tile_a, const int8_t* tile_b, int32_t* tile_c,
                               uint32_t item) {
  const uint32_t m = item / kN, n = item % kN;
  int32_t sum = 0;
  for (uint32_t k = 0; k < kLweTcStepCols; ++k) {
    sum += static_cast<int32_t>(tile_a[Tiled16(m, k, kLweTcStepCols)]) *
           static_cast<int32_t>(tile_b[Tiled16(k, n, kN)]);
  }
  tile_c[m * kN + n] += sum;
}

// Grid of a pass: row tiles x column chunks.
VEIL_HD uint64_t LweRowTiles(uint64_t rows, bool tensor, int kb) {
  const uint64_t tile = tensor ? kLweTcRows : uint64_t{kLweWarps} * LweCoreRowsPerWarp(kb);
  return (rows + tile - 1) / tile;
}
VEIL_HD uint64_t LweColumnChunks(uint64_t stride) {
  return (stride + kLweChunkCols - 1) / kLweChunkCols;
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_LWE_PHASES_H_
