// The GPU's deferred switches: the stage loop over the phase body of
// gpu/internal/deferred_phases.h (the code CI runs on the host), one kernel per stage
// (gpu/internal/qp_device.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/deferred.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/qp_device.h"
#include "gpu/internal/runners.h"

namespace veil::gpu {
namespace {

// The stages' kernels (gpu/internal/qp_device.h).
const auto kDeferredKernels =
    internal::StageKernels<internal::DeferredArgs, internal::DeferredStage,
                           internal::DeferredStageBlock<internal::BlockRunner>>(
        std::make_integer_sequence<uint32_t, internal::kDeferredStages>());

}  // namespace

struct GpuDeferredSwitches::Impl {
  int device = 0;
  uint32_t max_batch = 1;
  internal::DeferredPlan plan;
  lattice::RingContext ring;
  internal::DeviceQpRoots tables;
  uint32_t* d_perms = nullptr;
  uint64_t *d_scratch = nullptr, *d_out = nullptr;  // max_batch queries' each
  cudaStream_t stream = nullptr;
  std::mutex mu;

  explicit Impl(lattice::RingContext r) : ring(std::move(r)) {}
  ~Impl() {
    cudaSetDevice(device);  // the tables are freed after this body, on it
    cudaFree(d_perms);
    cudaFree(d_scratch);
    cudaFree(d_out);
    if (stream) cudaStreamDestroy(stream);
  }

  uint64_t sum_words() const { return uint64_t{plan.groups} * 2 * plan.k << plan.log_n; }
};

GpuDeferredSwitches::GpuDeferredSwitches(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuDeferredSwitches::~GpuDeferredSwitches() = default;

absl::StatusOr<std::unique_ptr<GpuDeferredSwitches>> GpuDeferredSwitches::Create(
    const lattice::RingContext& ctx, uint32_t lwe_n, uint32_t levels, uint64_t groups, int device,
    uint32_t max_batch) {
  if (max_batch == 0 || max_batch > internal::kExpansionMaxQueries) {
    return absl::InvalidArgumentError(absl::StrCat("deferred switches of 1 to ",
                                                   internal::kExpansionMaxQueries,
                                                   " queries at a time, not ", max_batch));
  }
  absl::StatusOr<internal::DeferredPlan> plan =
      internal::MakeDeferredPlan(ctx, lwe_n, levels, groups);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<Impl>> started =
      internal::StartOnDevice<Impl>(ctx, *std::move(plan), device);
  if (!started.ok()) return started.status();
  std::unique_ptr<Impl> impl = *std::move(started);
  impl->max_batch = max_batch;
  const internal::DeferredPlan& p = impl->plan;
  VEIL_RETURN_IF_ERROR(impl->tables.Upload(p));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_perms, p.perms.data(), p.perms.size()));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&impl->d_scratch,
                 max_batch * internal::DeferredScratchWords(p.k, p.log_n, p.groups, p.elements) *
                     sizeof(uint64_t)));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&impl->d_out, max_batch * impl->sum_words() * sizeof(uint64_t)));
  return std::unique_ptr<GpuDeferredSwitches>(new GpuDeferredSwitches(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> GpuDeferredSwitches::UploadKeys(
    const he::GaloisKeys& keys) const {
  absl::StatusOr<internal::ExpansionKeyArrays> arrays =
      internal::MakeDeferredKeyArrays(impl_->ring, impl_->plan, keys);
  if (!arrays.ok()) return arrays.status();
  return GpuExpansionKeys::Upload(*arrays, this, impl_->device);
}

std::vector<absl::Status> GpuDeferredSwitches::FinishBatch(
    absl::Span<const GpuExpansionKeys* const> keys, absl::Span<const uint64_t* const> virtual_sums,
    absl::Span<const absl::Span<uint64_t>> sums) const {
  Impl& m = *impl_;
  const size_t count = keys.size();
  std::vector<absl::Status> status(count);
  if (count == 0 || count > m.max_batch || virtual_sums.size() != count || sums.size() != count) {
    status.assign(
        count, absl::InvalidArgumentError(absl::StrCat(
                   "deferred switches of ", count, " keys, ", virtual_sums.size(),
                   " virtual sums and ", sums.size(), " sums (1 to ", m.max_batch, " of each)")));
    return status;
  }
  internal::DeferredArrays arrays;
  std::vector<size_t> run;  // the queries switched, in their output slots' order
  for (size_t q = 0; q < count; ++q) {
    if (keys[q] == nullptr || !keys[q]->MadeFor(this, internal::DeferredKeyWords(m.plan))) {
      status[q].Update(
          absl::InvalidArgumentError("deferred keys uploaded by another GpuDeferredSwitches"));
      continue;
    }
    if (sums[q].size() != m.sum_words()) {
      status[q].Update(absl::InvalidArgumentError(absl::StrCat(
          "deferred switches: ", sums[q].size(), " sums (expected ", m.sum_words(), ")")));
      continue;
    }
    arrays.key_b.push_back(keys[q]->key_b_);
    arrays.key_a.push_back(keys[q]->key_a_);
    arrays.sums.push_back(virtual_sums[q]);
    arrays.out.push_back(m.d_out + run.size() * m.sum_words());
    run.push_back(q);
  }
  if (run.empty()) return status;
  std::lock_guard<std::mutex> lock(m.mu);
  const absl::Status done = [&]() -> absl::Status {
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
    arrays.roots.assign(m.tables.roots.begin(), m.tables.roots.end());
    arrays.iroots.assign(m.tables.iroots.begin(), m.tables.iroots.end());
    arrays.perms = m.d_perms;
    arrays.scratch = m.d_scratch;
    const uint64_t n = uint64_t{1} << m.plan.log_n;
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>(internal::kNttBlockThreads, n / 2));
    VEIL_RETURN_IF_ERROR(internal::RunDeferredStages(
        m.plan, arrays,
        [&](const internal::DeferredArgs& args, internal::DeferredStage stage,
            uint32_t blocks) -> absl::Status {
          const size_t shared =  // the stage without transforms needs none
              stage == internal::DeferredStage::kRotate ? 0 : n * sizeof(uint32_t);
          kDeferredKernels[static_cast<uint32_t>(stage)]<<<blocks, threads, shared, m.stream>>>(
              args);
          VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
          return absl::OkStatus();
        }));
    for (size_t i = 0; i < run.size(); ++i) {
      VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sums[run[i]].data(), arrays.out[i],
                                                m.sum_words() * sizeof(uint64_t),
                                                cudaMemcpyDeviceToHost, m.stream));
    }
    VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
    return absl::OkStatus();
  }();
  for (size_t q : run) status[q].Update(done);
  return status;
}

}  // namespace veil::gpu
