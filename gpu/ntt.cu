// The GPU NTT: a __global__ wrapper over the phase body of gpu/internal/ntt_phases.h (the code CI
// runs on the host), its launch and its measurement.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/runners.h"
#include "gpu/ntt.h"

namespace veil::gpu {
namespace {

__global__ void __launch_bounds__(internal::kNttBlockThreads) NttKernel(const internal::NttArgs a) {
  extern __shared__ uint64_t shared[];
  internal::BlockRunner run;
  internal::NttBlock(run, a, blockIdx.x, shared);
}

// Four independent chains of Montgomery multiply-adds per thread (enough to hide latency):
// the device's ceiling for the butterflies' arithmetic.
__global__ void MulAddKernel(uint64_t q, uint64_t q_inv, uint64_t w, int iterations,
                             uint64_t* out) {
  const uint64_t id = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  uint64_t x0 = id % q, x1 = (id + 1) % q, x2 = (id + 2) % q, x3 = (id + 3) % q;
  for (int i = 0; i < iterations; ++i) {
    x0 = he::AddMod(he::MontMul(x0, w, q, q_inv), x1, q);
    x1 = he::AddMod(he::MontMul(x1, w, q, q_inv), x2, q);
    x2 = he::AddMod(he::MontMul(x2, w, q, q_inv), x3, q);
    x3 = he::AddMod(he::MontMul(x3, w, q, q_inv), x0, q);
  }
  out[id] = x0 ^ x1 ^ x2 ^ x3;
}

uint32_t BlockThreads(int log_n) {
  return std::min<uint32_t>(internal::kNttBlockThreads, std::max<uint32_t>(1, (1u << log_n) / 2));
}

}  // namespace

struct GpuNtt::Impl {
  int device = 0;
  internal::MontgomeryNttTables tables;
  he::NttTables host_tables;
  uint64_t* d_roots = nullptr;
  uint64_t* d_inverse_roots = nullptr;
  uint64_t* d_data = nullptr;
  size_t capacity = 0;  // residues at d_data
  cudaStream_t stream = nullptr;

  ~Impl() {
    cudaSetDevice(device);
    cudaFree(d_roots);
    cudaFree(d_inverse_roots);
    cudaFree(d_data);
    if (stream) cudaStreamDestroy(stream);
  }
  absl::Status Reserve(size_t words) {
    if (words <= capacity) return absl::OkStatus();
    VEIL_CUDA_RETURN_IF_ERROR(cudaFree(d_data));
    d_data = nullptr;
    capacity = 0;
    VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_data, words * sizeof(uint64_t)));
    capacity = words;
    return absl::OkStatus();
  }
  absl::Status Launch(bool inverse, uint32_t batch) {
    internal::NttArgs args = tables.Args(inverse, d_data, batch);
    args.roots = inverse ? d_inverse_roots : d_roots;
    const size_t shared = (size_t{1} << tables.log_n) * sizeof(uint64_t);
    NttKernel<<<batch, BlockThreads(tables.log_n), shared, stream>>>(args);
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
};

GpuNtt::GpuNtt(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuNtt::~GpuNtt() = default;

absl::StatusOr<std::unique_ptr<GpuNtt>> GpuNtt::Create(const he::NttTables& tables, int device) {
  absl::StatusOr<internal::MontgomeryNttTables> t = internal::MakeMontgomeryNttTables(tables);
  if (!t.ok()) return t.status();
  VEIL_RETURN_IF_ERROR(internal::CheckDevice(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->tables = *std::move(t);
  impl->host_tables = tables;
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  const internal::MontgomeryNttTables& m = impl->tables;
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_roots, m.roots.data(), m.roots.size()));
  VEIL_RETURN_IF_ERROR(
      internal::UploadNew(&impl->d_inverse_roots, m.inverse_roots.data(), m.inverse_roots.size()));
  return std::unique_ptr<GpuNtt>(new GpuNtt(std::move(impl)));
}

absl::Status GpuNtt::Run(absl::Span<uint64_t> polys, bool inverse) {
  if (absl::Status s = internal::CheckNttPolys(impl_->host_tables, polys); !s.ok()) return s;
  if (polys.empty()) return absl::OkStatus();
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device));
  if (absl::Status s = impl_->Reserve(polys.size()); !s.ok()) return s;
  const size_t bytes = polys.size() * sizeof(uint64_t);
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(impl_->d_data, polys.data(), bytes, cudaMemcpyHostToDevice, impl_->stream));
  const uint32_t batch = static_cast<uint32_t>(polys.size() >> impl_->tables.log_n);
  if (absl::Status s = impl_->Launch(inverse, batch); !s.ok()) return s;
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(polys.data(), impl_->d_data, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return absl::OkStatus();
}

absl::Status GpuNtt::Forward(absl::Span<uint64_t> polys) { return Run(polys, false); }
absl::Status GpuNtt::Inverse(absl::Span<uint64_t> polys) { return Run(polys, true); }

absl::StatusOr<GpuNtt::Throughput> GpuNtt::Measure(uint32_t batch, int reps, bool inverse) {
  if (batch == 0 || reps <= 0) return absl::InvalidArgumentError("batch and reps must be positive");
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device));
  const size_t n = size_t{1} << impl_->tables.log_n;
  int sms = 0;
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, impl_->device));
  const uint32_t blocks = static_cast<uint32_t>(std::max(sms, 1) * 16), threads = 256;
  if (absl::Status s = impl_->Reserve(std::max(batch * n, size_t{blocks} * threads)); !s.ok()) {
    return s;
  }
  // Residues below q: any fill works, the transform's cost does not depend on the values.
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(impl_->d_data, 0, batch * n * sizeof(uint64_t), impl_->stream));
  internal::Events<2> ev;
  VEIL_RETURN_IF_ERROR(ev.Create());
  auto elapsed = [&](const auto& launch) -> absl::StatusOr<double> {
    if (absl::Status s = launch(); !s.ok()) return s;  // warm-up
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[0], impl_->stream));
    for (int r = 0; r < reps; ++r) {
      if (absl::Status s = launch(); !s.ok()) return s;
    }
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev.e[1], impl_->stream));
    VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev.e[1]));
    double seconds = 0;
    VEIL_RETURN_IF_ERROR(ev.Seconds(0, 1, seconds));
    return seconds;
  };
  Throughput out;
  absl::StatusOr<double> ntt_s = elapsed([&] { return impl_->Launch(inverse, batch); });
  constexpr int kIterations = 4096;
  absl::StatusOr<double> mul_s = elapsed([&]() -> absl::Status {
    MulAddKernel<<<blocks, threads, 0, impl_->stream>>>(impl_->tables.q, impl_->tables.q_inv, 12345,
                                                        kIterations, impl_->d_data);
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
  if (!ntt_s.ok()) return ntt_s.status();
  if (!mul_s.ok()) return mul_s.status();
  out.transforms_per_s = double(batch) * reps / *ntt_s;
  out.mul_add_per_s = double(blocks) * threads * kIterations * 4 * reps / *mul_s;
  out.butterflies_per_transform = double(n) / 2 * impl_->tables.log_n;
  return out;
}

}  // namespace veil::gpu
