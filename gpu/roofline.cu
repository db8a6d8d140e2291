// Micro-kernels for the device roofline: each runs the same per-thread code the DPF kernels run
// (dpf/prg_portable.h), in a tight loop whose result is stored so it cannot be optimised away.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/strings/str_cat.h"
#include "dpf/prg_portable.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/roofline.h"

namespace veil::gpu {
namespace {

using dpf::Block;

constexpr int kThreads = 256;

__global__ void ChaChaKernel(int rounds, int iters, uint32_t* sink) {
  uint32_t state[16], out[16];
  const uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
  dpf::ChaChaSeedState({id * 0x9e3779b97f4a7c15ull, id}, 0, state);
  uint32_t acc = 0;
  for (int it = 0; it < iters; ++it) {
    state[12] = static_cast<uint32_t>(it);
    dpf::ChaChaBlock(rounds, state, out);
    state[4] ^= out[0];  // a dependency chain, as in a tree walk
    acc ^= out[5];
  }
  sink[id] = acc ^ state[4];
}

__constant__ dpf::AesSlicedKeys c_roofline_aes_keys = dpf::kAesSlicedLeftRight;

// sigma-MMO AES with the kernels' bitsliced AES: two blocks (a node's children) per iteration.
__global__ void AesKernel(int iters, uint32_t* sink) {
  const uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
  Block x{id * 0x9e3779b97f4a7c15ull, id};
  for (int it = 0; it < iters; ++it) {
    Block left, right;
    dpf::MmoHash2(c_roofline_aes_keys, x, x, left, right);
    x = left ^ right;  // a dependency chain, as in a tree walk
  }
  sink[id] = static_cast<uint32_t>(x.lo ^ x.hi);
}

__global__ void SipKernel(int iters, uint32_t* sink) {
  const uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t k0 = id, k1 = ~uint64_t{id}, v = 0;
  for (int it = 0; it < iters; ++it) {
    v = dpf::SipHash24(k0, k1, static_cast<uint64_t>(it));
    k0 ^= v;
  }
  sink[id] = static_cast<uint32_t>(v ^ k0);
}

__global__ void ReadKernel(const uint4* data, uint64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// 8 independent multiply-add chains per thread (enough to hide the IMAD latency).
__global__ void Int32MacKernel(int iters, uint32_t* sink) {
  const uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[8], b = id | 1u;
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = id + j;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = a[j] * b + (a[j] >> 3);
  }
  uint32_t acc = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) acc ^= a[j];
  sink[id] = acc;
}

// Each warp repeats m16n16k16 s8 products on fragments held in registers (4 accumulators).
__global__ void Int8MacKernel(int iters, uint32_t* sink) {
  using namespace nvcuda;
  __shared__ __align__(256) signed char tile[2][256];
  for (int i = threadIdx.x; i < 512; i += blockDim.x) tile[i / 256][i % 256] = (i * 37) & 0x7f;
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c[4];
  wmma::load_matrix_sync(fa, tile[0], 16);
  wmma::load_matrix_sync(fb, tile[1], 16);
#pragma unroll
  for (int j = 0; j < 4; ++j) wmma::fill_fragment(c[j], 0);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 4; ++j) wmma::mma_sync(c[j], fa, fb, c[j]);
  }
  int acc = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    for (int e = 0; e < c[j].num_elements; ++e) acc ^= c[j].x[e];
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<uint32_t>(acc);
}

// Seconds of one launch, timed with events after one untimed warm-up launch.
absl::StatusOr<double> TimeLaunch(const std::function<void()>& launch) {
  internal::Events<2> ev;
  VEIL_RETURN_IF_ERROR(ev.Create());
  launch();
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  VEIL_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[0]));
  launch();
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[1]));
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev.e[1]));
  double seconds = 0;
  VEIL_RETURN_IF_ERROR(ev.Seconds(0, 1, seconds));
  return seconds;
}

// Rate of a kernel doing `work_per_iter` units per iteration: the iteration count is scaled from
// a short probe so that the timed launch takes about `seconds`.
absl::StatusOr<double> MeasureRate(double work_per_iter, double seconds,
                                   const std::function<void(int)>& launch_with_iters) {
  int iters = 16;
  absl::StatusOr<double> t = TimeLaunch([&] { launch_with_iters(iters); });
  if (!t.ok()) return t.status();
  const double scale = std::clamp(seconds / std::max(*t, 1e-6), 1.0, 1e5);
  iters = static_cast<int>(std::min(iters * scale, 2e9 / 16));
  absl::StatusOr<double> timed = TimeLaunch([&] { launch_with_iters(iters); });
  if (!timed.ok()) return timed.status();
  return work_per_iter * iters / *timed;
}

}  // namespace

absl::StatusOr<DeviceRoofline> MeasureDeviceRoofline(int device, double seconds_each) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("no CUDA device ", device));
  }
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp prop;
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  DeviceRoofline r;
  r.device_name = prop.name;
  r.sms = prop.multiProcessorCount;
  const uint32_t blocks = r.sms * 8, threads = blocks * kThreads;

  uint32_t* d_sink = nullptr;
  uint4* d_data = nullptr;
  const uint64_t read_bytes = uint64_t{4} << 30;  // 4 GiB: ~70 times the H200's L2
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_sink, threads * sizeof(uint32_t)));
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_data, read_bytes));
  struct Free {
    void* p[2];
    ~Free() {
      for (void* x : p) cudaFree(x);
    }
  } free_all{{d_sink, d_data}};
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemset(d_data, 0x5a, read_bytes));

  auto set = [](absl::StatusOr<double> v, double& field) -> absl::Status {
    if (!v.ok()) return v.status();
    field = *v;
    return absl::OkStatus();
  };
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(threads, seconds_each,
                      [&](int it) { ChaChaKernel<<<blocks, kThreads>>>(12, it, d_sink); }),
          r.chacha12_blocks_per_s));
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(threads, seconds_each,
                      [&](int it) { ChaChaKernel<<<blocks, kThreads>>>(8, it, d_sink); }),
          r.chacha8_blocks_per_s));
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(2.0 * threads, seconds_each,
                      [&](int it) { AesKernel<<<blocks, kThreads>>>(it, d_sink); }),
          r.aes_blocks_per_s));
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(threads, seconds_each,
                      [&](int it) { SipKernel<<<blocks, kThreads>>>(it, d_sink); }),
          r.siphash_per_s));
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(8.0 * threads, seconds_each,
                      [&](int it) { Int32MacKernel<<<blocks, kThreads>>>(it, d_sink); }),
          r.int32_mac_per_s));
  VEIL_RETURN_IF_ERROR(
      set(MeasureRate(4.0 * 16 * 16 * 16 * (threads / 32), seconds_each,
                      [&](int it) { Int8MacKernel<<<blocks, kThreads>>>(it, d_sink); }),
          r.int8_mac_per_s));
  absl::StatusOr<double> t = TimeLaunch(
      [&] { ReadKernel<<<blocks, kThreads>>>(d_data, read_bytes / sizeof(uint4), d_sink); });
  if (!t.ok()) return t.status();
  r.mem_read_gbps = read_bytes / *t / 1e9;
  return r;
}

}  // namespace veil::gpu
