// The CUDA kernels of the GPU backend: __global__ wrappers over the phase bodies of
// gpu/internal/phases.h (the same code CI runs on the host), their launch, and the tensor-core
// tile product.
//
// AES is dpf's bitsliced AES (constant time: no table lookups); its round keys sit in constant
// memory, read by all threads of a warp at the same address (a broadcast).
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/kernels.h"
#include "gpu/internal/phases.h"

namespace veil::gpu::internal {
namespace {

// The bitsliced AES round keys: node expansion (left/right) and leaf conversion (value). Public.
__constant__ dpf::AesSlicedKeys c_aes_keys[2] = {dpf::kAesSlicedLeftRight, dpf::kAesSlicedValue};

class DeviceRunner {
 public:
  __device__ uint32_t threads() const { return blockDim.x; }
  // Taken in device code, so that after inlining the loads are constant-space loads (ld.const).
  __device__ dpf::AesKeys aes() const { return {&c_aes_keys[0], &c_aes_keys[1]}; }

  template <class F>
  __device__ void Phase(uint32_t items, F&& f) {
    for (uint32_t i = threadIdx.x; i < items; i += blockDim.x) f(i);
    __syncthreads();
  }
  __device__ void AtomicAdd(uint32_t* p, uint32_t v) { atomicAdd(p, v); }
  __device__ void AtomicXor(uint32_t* p, uint32_t v) { atomicXor(p, v); }

  // C = A . B on the tensor cores (wmma m16n16k16, signed INT8, INT32 accumulators), one 16x16
  // output tile per warp at a time. The operands were staged 16x16-tiled, so every fragment is
  // 256 contiguous, 256-byte aligned bytes (ldm = 16). Sums stay below 2^24 within a tile.
  // TODO(perf): wgmma (sm_90a) with the table tile fed by the bulk copy engine.
  __device__ void Int8TileProduct(const LaunchArgs& a, const BlockShared& s) {
    using namespace nvcuda;
    const uint32_t m_tiles = Int8MPad(a.keys_per_block) / 16;
    const uint32_t n = RoundUp16(a.row_words), n_tiles = n / 16;
    const uint32_t k_tiles = RoundUp16(a.geo.rows_per_tile()) / 16;
    const uint32_t warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (uint32_t t = warp; t < m_tiles * n_tiles; t += warps) {
      const uint32_t mt = t / n_tiles, nt = t % n_tiles;
      wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
      wmma::fill_fragment(c, 0);
      for (uint32_t kt = 0; kt < k_tiles; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> fb;
        wmma::load_matrix_sync(
            fa, reinterpret_cast<const signed char*>(s.planes) + (mt * k_tiles + kt) * 256, 16);
        wmma::load_matrix_sync(
            fb, reinterpret_cast<const signed char*>(s.b_tile) + (kt * n_tiles + nt) * 256, 16);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(s.c_tile + mt * 16 * n + nt * 16, c, n, wmma::mem_row_major);
    }
    __syncthreads();
  }
};

// `a` is used in place (a kernel parameter written to would be copied to local memory).
template <Body kBody>
__global__ void __launch_bounds__(kBlockThreads) FusedKernel(const LaunchArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  DeviceRunner run;
  FusedBlock(run, kBody, a, smem, blockIdx.x, gridDim.x, blockIdx.y);
}

__global__ void __launch_bounds__(kBlockThreads) LevelKernel(const LaunchArgs a, int level) {
  DeviceRunner run;
  LevelBlock(run, a, level, blockIdx.x, gridDim.x);
}

__global__ void CombineKernel(const uint32_t* gathered, int ranks, uint64_t rank_stride,
                              uint64_t count, bool xor_op, uint32_t* out) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    uint32_t v = 0;
    for (int r = 0; r < ranks; ++r) {
      const uint32_t p = gathered[r * rank_stride + i];
      v = xor_op ? (v ^ p) : (v + p);
    }
    out[i] = v;
  }
}

template <Body kBody>
absl::StatusOr<int> ConfigureOne(uint32_t shared_bytes) {
  VEIL_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FusedKernel<kBody>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)));
  int blocks = 0;
  VEIL_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, FusedKernel<kBody>, kBlockThreads, shared_bytes));
  if (blocks < 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a block with ", shared_bytes, " bytes of shared memory does not fit an SM"));
  }
  return blocks;
}

}  // namespace

absl::StatusOr<int> ConfigureFusedKernel(Body body, uint32_t shared_bytes) {
  switch (body) {
    case Body::kBranchParallel:
      return ConfigureOne<Body::kBranchParallel>(shared_bytes);
    case Body::kLevelByLevelLeaves:
      return ConfigureOne<Body::kLevelByLevelLeaves>(shared_bytes);
    case Body::kBoundedWindow:
      return ConfigureOne<Body::kBoundedWindow>(shared_bytes);
  }
  return absl::InvalidArgumentError("unknown kernel body");
}

absl::Status LaunchAnswer(const LaunchArgs& a, Body body, uint32_t grid_x, uint32_t level_grid,
                          cudaStream_t stream) {
  if (a.num_keys <= 0 || a.tile_begin >= a.tile_end) return absl::OkStatus();
  if (body == Body::kLevelByLevelLeaves) {
    for (int level = -1; level < a.geo.levels; ++level) {
      LevelKernel<<<level_grid, kBlockThreads, 0, stream>>>(a, level);
      VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
  }
  const uint32_t shared =
      MakeSharedLayout(a.geo, a.keys_per_block, a.row_words, body, a.table_kind).bytes;
  const dim3 grid(grid_x, (a.num_keys + a.keys_per_block - 1) / a.keys_per_block);
  switch (body) {
    case Body::kBranchParallel:
      FusedKernel<Body::kBranchParallel><<<grid, kBlockThreads, shared, stream>>>(a);
      break;
    case Body::kLevelByLevelLeaves:
      FusedKernel<Body::kLevelByLevelLeaves><<<grid, kBlockThreads, shared, stream>>>(a);
      break;
    case Body::kBoundedWindow:
      FusedKernel<Body::kBoundedWindow><<<grid, kBlockThreads, shared, stream>>>(a);
      break;
  }
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchCombine(const uint32_t* gathered, int ranks, uint64_t rank_stride,
                           uint64_t count, bool xor_op, uint32_t* out, cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  const uint64_t blocks = (count + 255) / 256;
  CombineKernel<<<static_cast<uint32_t>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(
      gathered, ranks, rank_stride, count, xor_op, out);
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace veil::gpu::internal
