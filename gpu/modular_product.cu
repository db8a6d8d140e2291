// GpuModularProduct (gpu/modular_product.h): the phases of gpu/internal/montgomery.h as kernels,
// one thread per item, one launch per reduction round (the rounds' shapes come from the same
// plan as the host-run's).
//
// TODO(perf): one thread owns a whole residue (up to 192 words of accumulator and CIOS scratch in
// local memory) and neighbouring threads read residues `limbs` words apart. A warp-cooperative
// multiplication (a limb per lane) with limb-interleaved residues is the next step once the
// device figures are in.
#include <cuda_runtime_api.h>

#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/montgomery.h"
#include "gpu/internal/product_plan.h"
#include "gpu/modular_product.h"

namespace veil::gpu {
namespace {

constexpr int kThreads = 128;

template <int kLimbs>
__global__ void __launch_bounds__(kThreads) ReduceKernel(const internal::ProductLaunch a) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < a.items();
       i += uint64_t{gridDim.x} * blockDim.x) {
    internal::ReduceItem<kLimbs>(a, i);
  }
}

template <int kLimbs>
__global__ void __launch_bounds__(kThreads) FinishKernel(const internal::FinishLaunch a) {
  for (uint64_t c = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; c < a.columns;
       c += uint64_t{gridDim.x} * blockDim.x) {
    internal::FinishItem<kLimbs>(a, c);
  }
}

// Device memory freed on every path.
class DeviceWords {
 public:
  ~DeviceWords() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  absl::Status Allocate(size_t words) {
    VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&ptr_), words * 4));
    return absl::OkStatus();
  }
  uint32_t* get() const { return ptr_; }

 private:
  uint32_t* ptr_ = nullptr;
};

unsigned Blocks(uint64_t items) {
  return static_cast<unsigned>(std::min<uint64_t>((items + kThreads - 1) / kThreads, 1u << 20));
}

template <int kLimbs>
absl::Status Launch(const internal::ProductPlan& plan, const ModularProductInput& input,
                    const uint32_t* d_modulus, const uint32_t* d_correction, DeviceWords& d_in,
                    DeviceWords& d_scratch, uint32_t* d_out) {
  const uint32_t* in = d_in.get();
  uint32_t* buffers[2] = {d_scratch.get(), d_in.get()};  // ping-pong: the input is consumed
  uint64_t rows = input.rows;
  for (size_t round = 0; round < plan.slices.size(); ++round) {
    uint32_t* out = buffers[round % 2];
    const internal::ProductLaunch launch{d_modulus, plan.n_inv,    plan.limbs,         in,
                                         rows,      input.columns, plan.slices[round], out};
    ReduceKernel<kLimbs><<<Blocks(launch.items()), kThreads>>>(launch);
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    in = out;
    rows = plan.slices[round];
  }
  const internal::FinishLaunch finish{d_modulus,    plan.n_inv,    plan.limbs, in,
                                      d_correction, input.columns, d_out};
  FinishKernel<kLimbs><<<Blocks(input.columns), kThreads>>>(finish);
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GpuProductTiming> GpuModularProduct(int device, const ModularProductInput& input,
                                                   absl::Span<uint32_t> out) {
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  int sms = 0;
  VEIL_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Local memory per thread is large (see the TODO): 8 blocks of kThreads per SM keep it cached.
  auto plan = internal::PlanModularProduct(input, out, uint64_t(sms) * 8 * kThreads);
  if (!plan.ok()) return plan.status();
  const size_t limbs = plan->limbs;
  DeviceWords d_modulus, d_correction, d_in, d_scratch, d_out;
  VEIL_RETURN_IF_ERROR(d_modulus.Allocate(limbs));
  VEIL_RETURN_IF_ERROR(d_correction.Allocate(limbs));
  VEIL_RETURN_IF_ERROR(d_in.Allocate(input.residues.size()));
  VEIL_RETURN_IF_ERROR(d_scratch.Allocate(plan->slices[0] * input.columns * limbs));
  VEIL_RETURN_IF_ERROR(d_out.Allocate(out.size()));
  internal::Events<4> ev;
  VEIL_RETURN_IF_ERROR(ev.Create());
  cudaEvent_t* events = ev.e;

  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[0]));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_modulus.get(), input.modulus.data(), limbs * 4, cudaMemcpyHostToDevice));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_correction.get(), plan->correction.data(), limbs * 4, cudaMemcpyHostToDevice));
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_in.get(), input.residues.data(), input.residues.size() * 4,
                                       cudaMemcpyHostToDevice));
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[1]));
  auto* launch = plan->limb_class == 64    ? &Launch<64>
                 : plan->limb_class == 128 ? &Launch<128>
                                           : &Launch<192>;
  VEIL_RETURN_IF_ERROR(
      launch(*plan, input, d_modulus.get(), d_correction.get(), d_in, d_scratch, d_out.get()));
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[2]));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out.data(), d_out.get(), out.size() * 4, cudaMemcpyDeviceToHost));
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[3]));
  VEIL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events[3]));
  GpuProductTiming timing;
  VEIL_RETURN_IF_ERROR(ev.Seconds(0, 1, timing.upload_s));
  VEIL_RETURN_IF_ERROR(ev.Seconds(1, 2, timing.compute_s));
  VEIL_RETURN_IF_ERROR(ev.Seconds(2, 3, timing.download_s));
  return timing;
}

}  // namespace veil::gpu
