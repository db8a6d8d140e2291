// The LWE product on a device: the __global__ wrappers over the phases of
// gpu/internal/lwe_phases.h (the same code CI runs on the host), the tensor-core tile product,
// and LweGpuProduct (device memory, stream, launches). Every CUDA call's status becomes a Status.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/lwe_phases.h"
#include "gpu/internal/lwe_plan.h"
#include "gpu/lwe.h"

namespace veil::gpu {
namespace internal {
namespace {

class LweDeviceRunner {
 public:
  template <class F>
  __device__ void Phase(uint32_t items, F&& f) {
    for (uint32_t i = threadIdx.x; i < items; i += blockDim.x) f(i);
    __syncthreads();
  }
  __device__ void GlobalAdd(uint32_t* p, uint32_t v) { atomicAdd(p, v); }

  // C += A . B (wmma m16n16k16, s8 x s8, INT32): each warp takes 16 x 16 output tiles, loads
  // its accumulator from shared memory, runs the step's 16 k-tiles and stores it back.
  template <uint32_t kN>
  __device__ void TensorTiles(const int8_t* a, const int8_t* b, int32_t* c) {
    using namespace nvcuda;
    constexpr uint32_t kMTiles = kLweTcRows / 16, kNTiles = kN / 16, kKTiles = kLweTcStepCols / 16;
    const uint32_t warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (uint32_t t = warp; t < kMTiles * kNTiles; t += warps) {
      const uint32_t mt = t / kNTiles, nt = t % kNTiles;
      wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
      wmma::load_matrix_sync(acc, c + mt * 16 * kN + nt * 16, kN, wmma::mem_row_major);
#pragma unroll 4
      for (uint32_t kt = 0; kt < kKTiles; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> fb;
        wmma::load_matrix_sync(
            fa, reinterpret_cast<const signed char*>(a) + (mt * kKTiles + kt) * 256, 16);
        wmma::load_matrix_sync(
            fb, reinterpret_cast<const signed char*>(b) + (kt * kNTiles + nt) * 256, 16);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(c + mt * 16 * kN + nt * 16, acc, kN, wmma::mem_row_major);
    }
    __syncthreads();
  }
};

template <int KB>
__global__ void __launch_bounds__(kLweThreads) LweCoreKernel(const LweArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  LweDeviceRunner run;
  LweCoreBlock<KB>(run, a, smem, blockIdx.x, blockIdx.y);
}

template <int KB>
__global__ void __launch_bounds__(kLweThreads) LweTensorKernel(const LweArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  LweDeviceRunner run;
  LweTensorBlock<KB>(run, a, smem, blockIdx.x, blockIdx.y);
}

template <int KB>
__global__ void __launch_bounds__(kLweThreads) LwePlanesKernel(const LweArgs a, int8_t* planes) {
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < LwePlaneItems(a.stride, KB)) LwePlaneItem<KB>(a, planes, i);
}

template <int KB>
absl::Status Launch(LweArgs a, bool tensor, int8_t* d_planes, cudaStream_t stream) {
  const dim3 grid(static_cast<uint32_t>(LweRowTiles(a.rows, tensor, KB)),
                  static_cast<uint32_t>(LweColumnChunks(a.stride)));
  if (tensor) {
    if constexpr (KB >= 4) {
      const uint64_t items = LwePlaneItems(a.stride, KB);
      LwePlanesKernel<KB><<<static_cast<uint32_t>((items + kLweThreads - 1) / kLweThreads),
                            kLweThreads, 0, stream>>>(a, d_planes);
      VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      a.planes = d_planes;
      const uint32_t shared = MakeLweTcLayout(KB).bytes;
      VEIL_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
          LweTensorKernel<KB>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
      LweTensorKernel<KB><<<grid, kLweThreads, shared, stream>>>(a);
    }
  } else if constexpr (KB <= kLweCoreMaxQueries) {
    const uint32_t shared = LweCoreSharedBytes(KB);
    VEIL_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        LweCoreKernel<KB>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
    LweCoreKernel<KB><<<grid, kLweThreads, shared, stream>>>(a);
  }
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchPass(const LweArgs& a, int kb, bool tensor, int8_t* d_planes,
                        cudaStream_t stream) {
  switch (kb) {
    case 1:
      return Launch<1>(a, tensor, d_planes, stream);
    case 2:
      return Launch<2>(a, tensor, d_planes, stream);
    case 4:
      return Launch<4>(a, tensor, d_planes, stream);
    case 8:
      return Launch<8>(a, tensor, d_planes, stream);
    case 16:
      return Launch<16>(a, tensor, d_planes, stream);
    case 32:
      return Launch<32>(a, tensor, d_planes, stream);
  }
  return absl::InternalError(absl::StrCat("no kernel for ", kb, " queries per pass"));
}

// Zeroes the answers, then every pass of a batch whose queries are on the device.
absl::Status LaunchBatch(const lattice::ByteMatrixView& db, const uint32_t* d_queries,
                         uint32_t* d_out, int8_t* d_planes, int batch, bool tensor,
                         cudaStream_t stream) {
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_out, 0, uint64_t(batch) * db.rows * 4, stream));
  for (const LwePass& pass : PlanLwePasses(batch, tensor)) {
    const LweArgs a{db.data,
                    db.rows,
                    db.cols,
                    db.stride,
                    d_queries + uint64_t(pass.first) * db.cols,
                    pass.queries,
                    d_out + uint64_t(pass.first) * db.rows,
                    db.rows};
    VEIL_RETURN_IF_ERROR(LaunchPass(a, pass.kb, tensor, d_planes, stream));
  }
  return absl::OkStatus();
}

template <class T>
absl::Status DeviceAlloc(T** ptr, uint64_t count) {
  *ptr = nullptr;
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(ptr), count * sizeof(T)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace internal

class LweGpuResources {
 public:
  LweGpuOptions options;
  lattice::ByteMatrixView shape;  // rows, cols, stride (data is the device copy)
  int8_t* d_db = nullptr;
  uint32_t* d_queries = nullptr;  // max_batch x cols
  uint32_t* d_out = nullptr;      // max_batch x rows
  int8_t* d_planes = nullptr;     // a tensor pass's digit planes
  cudaStream_t stream = nullptr;
  std::string device_name;
  std::mutex answering;  // one call at a time: they share the buffers and the stream

  ~LweGpuResources() {
    cudaSetDevice(options.device);
    cudaFree(d_db);
    cudaFree(d_queries);
    cudaFree(d_out);
    cudaFree(d_planes);
    if (stream) cudaStreamDestroy(stream);
  }
};

LweGpuProduct::LweGpuProduct(std::unique_ptr<LweGpuResources> resources)
    : resources_(std::move(resources)) {}

LweGpuProduct::~LweGpuProduct() = default;

absl::StatusOr<std::unique_ptr<LweGpuProduct>> LweGpuProduct::Create(
    const lattice::ByteMatrixView& db, const LweGpuOptions& options) {
  if (db.data == nullptr || db.rows == 0 || db.cols == 0 || db.stride % 64 != 0 ||
      db.stride < db.cols || options.max_batch < 1 || options.tensor_min_batch < 1) {
    return absl::InvalidArgumentError(
        "the GPU product needs a non-empty matrix (stride a multiple of 64) and a positive "
        "max_batch and tensor_min_batch");
  }
  // The grid's y dimension (column chunks) stops at 65,535.
  if (internal::LweColumnChunks(db.stride) > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("the GPU product takes up to ",
                                                   uint64_t{65535} * internal::kLweChunkCols,
                                                   " columns, not ", db.cols));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || options.device >= count) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("no CUDA device ", options.device));
  }
  auto r = std::make_unique<LweGpuResources>();
  r->options = options;
  r->shape = db;
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  cudaDeviceProp prop;
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  r->device_name = prop.name;
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
  VEIL_RETURN_IF_ERROR(internal::DeviceAlloc(&r->d_db, db.rows * db.stride));
  VEIL_RETURN_IF_ERROR(internal::DeviceAlloc(&r->d_queries, uint64_t(options.max_batch) * db.cols));
  VEIL_RETURN_IF_ERROR(internal::DeviceAlloc(&r->d_out, uint64_t(options.max_batch) * db.rows));
  VEIL_RETURN_IF_ERROR(internal::DeviceAlloc(
      &r->d_planes, internal::LwePlaneBytes(db.stride, internal::kLweTcMaxQueries)));
  VEIL_RETURN_IF_ERROR(internal::CopyToDevice(r->d_db, db.data, db.rows * db.stride));
  r->shape.data = r->d_db;
  return std::unique_ptr<LweGpuProduct>(new LweGpuProduct(std::move(r)));
}

absl::Status LweGpuProduct::Multiply(absl::Span<const uint32_t> queries, int batch,
                                     absl::Span<uint32_t> out) const {
  return MultiplyWith(LweGpuMethod::kAuto, queries, batch, out);
}

absl::Status LweGpuProduct::MultiplyWith(LweGpuMethod method, absl::Span<const uint32_t> queries,
                                         int batch, absl::Span<uint32_t> out) const {
  LweGpuResources& r = *resources_;
  if (absl::Status s = internal::CheckLweCall(r.shape, queries, batch, out); !s.ok()) return s;
  if (batch > r.options.max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", batch, " is above max_batch ", r.options.max_batch));
  }
  std::lock_guard<std::mutex> lock(r.answering);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(r.options.device));
  const lattice::ByteMatrixView& db = r.shape;
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(r.d_queries, queries.data(), queries.size() * 4,
                                            cudaMemcpyHostToDevice, r.stream));
  VEIL_RETURN_IF_ERROR(internal::LaunchBatch(
      db, r.d_queries, r.d_out, r.d_planes, batch,
      internal::UsesTensorCores(method, batch, r.options.tensor_min_batch), r.stream));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), r.d_out, out.size() * 4, cudaMemcpyDeviceToHost, r.stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(r.stream));
  return absl::OkStatus();
}

absl::StatusOr<double> LweGpuProduct::TimeKernels(LweGpuMethod method, int batch, int reps) const {
  LweGpuResources& r = *resources_;
  if (batch < 1 || batch > r.options.max_batch || reps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", batch, " outside [1, ", r.options.max_batch, "] or no reps"));
  }
  std::lock_guard<std::mutex> lock(r.answering);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(r.options.device));
  const bool tensor = internal::UsesTensorCores(method, batch, r.options.tensor_min_batch);
  internal::Events<2> ev;
  VEIL_RETURN_IF_ERROR(ev.Create());
  std::vector<double> seconds;
  absl::Status status;
  for (int rep = 0; rep <= reps && status.ok(); ++rep) {  // rep 0 warms up
    status.Update([&]() -> absl::Status {
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[0], r.stream));
      VEIL_RETURN_IF_ERROR(internal::LaunchBatch(r.shape, r.d_queries, r.d_out, r.d_planes, batch,
                                                 tensor, r.stream));
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[1], r.stream));
      VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev.e[1]));
      double t = 0;
      VEIL_RETURN_IF_ERROR(ev.Seconds(0, 1, t));
      if (rep > 0) seconds.push_back(t);
      return absl::OkStatus();
    }());
  }
  if (!status.ok()) return status;
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

uint64_t LweGpuProduct::device_bytes() const {
  const LweGpuResources& r = *resources_;
  return r.shape.rows * r.shape.stride +
         uint64_t(r.options.max_batch) * (r.shape.cols + r.shape.rows) * 4 +
         internal::LwePlaneBytes(r.shape.stride, internal::kLweTcMaxQueries);
}

std::string LweGpuProduct::device_name() const { return resources_->device_name; }

}  // namespace veil::gpu
