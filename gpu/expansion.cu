// The GPU expansion: the level loop over the phase body of gpu/internal/expansion_phases.h (the
// code CI runs on the host), one kernel per stage (gpu/internal/qp_device.h), and its
// measurement.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/expansion.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/qp_device.h"
#include "gpu/internal/runners.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {
namespace {

// The stages' kernels (gpu/internal/qp_device.h).
const auto kExpansionKernels =
    internal::StageKernels<internal::ExpansionArgs, internal::ExpansionStage,
                           internal::ExpansionStageBlock<internal::BlockRunner>>(
        std::make_integer_sequence<uint32_t, internal::kExpansionStages>());

}  // namespace

GpuExpansionKeys::~GpuExpansionKeys() {
  cudaSetDevice(device_);
  cudaFree(key_b_);
  cudaFree(key_a_);
}

struct GpuExpansion::Impl {
  int device = 0;
  internal::ExpansionPlan plan;
  lattice::RingContext ring;
  internal::DeviceQpRoots tables;
  uint64_t* d_monos = nullptr;
  uint32_t* d_perms = nullptr;
  uint64_t *d_nodes[2] = {nullptr, nullptr}, *d_scratch = nullptr;
  std::unique_ptr<GpuExpansionKeys> own;  // Create's keys, if any
  std::vector<uint64_t> root;             // the query's root, host side (the copy reads it)
  cudaStream_t stream = nullptr;
  std::mutex mu;

  explicit Impl(lattice::RingContext r) : ring(std::move(r)) {}
  ~Impl() {
    cudaSetDevice(device);  // the tables are freed after this body, on it
    cudaFree(d_monos);
    cudaFree(d_perms);
    cudaFree(d_nodes[0]);
    cudaFree(d_nodes[1]);
    cudaFree(d_scratch);
    if (stream) cudaStreamDestroy(stream);
  }

  uint64_t node_words() const { return 2ull * plan.k << plan.log_n; }

  // The device pointers above and the keys', as the level loop reads them.
  internal::ExpansionArrays Arrays(const GpuExpansionKeys& keys) const {
    internal::ExpansionArrays a;
    a.roots.assign(tables.roots.begin(), tables.roots.end());
    a.iroots.assign(tables.iroots.begin(), tables.iroots.end());
    a.key_b = keys.key_b_;
    a.key_a = keys.key_a_;
    a.perms = d_perms;
    a.monos = d_monos;
    a.nodes[0] = d_nodes[0];
    a.nodes[1] = d_nodes[1];
    a.scratch = d_scratch;
    return a;
  }

  // The levels on the root at d_nodes[0]; returns the buffer holding the leaves.
  absl::StatusOr<uint64_t*> Run(const GpuExpansionKeys& keys) {
    const uint64_t n = uint64_t{1} << plan.log_n;
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>(internal::kNttBlockThreads, n / 2));
    return internal::RunExpansionLevels(
        plan, Arrays(keys),
        [&](const internal::ExpansionArgs& args, internal::ExpansionStage stage,
            uint32_t blocks) -> absl::Status {
          const size_t shared =  // the stages without transforms need none
              stage == internal::ExpansionStage::kChildren ? 0 : n * sizeof(uint32_t);
          kExpansionKernels[static_cast<uint32_t>(stage)]<<<blocks, threads, shared, stream>>>(
              args);
          VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
          return absl::OkStatus();
        });
  }

  absl::Status UploadRoot(absl::Span<const uint8_t> ciphertext) {
    absl::StatusOr<std::vector<uint64_t>> parsed =
        lattice::internal::SecretCiphertextRoot(ring, ciphertext);
    if (!parsed.ok()) return parsed.status();
    VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // the previous copy has read it
    root = *std::move(parsed);
    VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        d_nodes[0], root.data(), root.size() * sizeof(uint64_t), cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  }
};

GpuExpansion::GpuExpansion(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuExpansion::~GpuExpansion() = default;

int GpuExpansion::device() const { return impl_->device; }

absl::StatusOr<std::unique_ptr<GpuExpansion>> GpuExpansion::Create(const lattice::RingContext& ctx,
                                                                   uint32_t lwe_n, int device) {
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, lwe_n);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<Impl>> started =
      internal::StartOnDevice<Impl>(ctx, *std::move(plan), device);
  if (!started.ok()) return started.status();
  std::unique_ptr<Impl> impl = *std::move(started);
  const internal::ExpansionPlan& p = impl->plan;
  VEIL_RETURN_IF_ERROR(impl->tables.Upload(p));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_monos, p.monos.data(), p.monos.size()));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_perms, p.perms.data(), p.perms.size()));
  const uint64_t n = uint64_t{1} << p.log_n;
  for (uint64_t*& buffer : impl->d_nodes) {
    VEIL_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&buffer, uint64_t{p.lwe_n} * impl->node_words() * sizeof(uint64_t)));
  }
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&impl->d_scratch, uint64_t{internal::MaxExpansionNodes(p)} *
                                                             internal::ExpansionScratchRows(p.k) *
                                                             n * sizeof(uint64_t)));
  return std::unique_ptr<GpuExpansion>(new GpuExpansion(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<GpuExpansion>> GpuExpansion::Create(const lattice::RingContext& ctx,
                                                                   const he::GaloisKeys& keys,
                                                                   uint32_t lwe_n, int device) {
  absl::StatusOr<std::unique_ptr<GpuExpansion>> out = Create(ctx, lwe_n, device);
  if (!out.ok()) return out.status();
  absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> own = (*out)->UploadKeys(keys);
  if (!own.ok()) return own.status();
  (*out)->impl_->own = *std::move(own);
  return out;
}

absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> GpuExpansionKeys::Upload(
    const internal::ExpansionKeyArrays& arrays, const void* owner, int device) {
  std::unique_ptr<GpuExpansionKeys> out(new GpuExpansionKeys());
  out->owner_ = owner;
  out->device_ = device;
  out->words_ = arrays.key_b.size();
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&out->key_b_, arrays.key_b.data(), out->words_));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&out->key_a_, arrays.key_a.data(), out->words_));
  return out;
}

absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> GpuExpansion::UploadKeys(
    const he::GaloisKeys& keys) const {
  absl::StatusOr<internal::ExpansionKeyArrays> arrays =
      internal::MakeExpansionKeyArrays(impl_->ring, keys, impl_->plan.lwe_n);
  if (!arrays.ok()) return arrays.status();
  return GpuExpansionKeys::Upload(*arrays, this, impl_->device);
}

absl::Status GpuExpansion::ExpandThen(
    const GpuExpansionKeys& keys, absl::Span<const uint8_t> ciphertext,
    absl::FunctionRef<absl::Status(const uint64_t* leaves)> use) const {
  if (keys.owner_ != this) {
    return absl::InvalidArgumentError("expansion keys uploaded by another GpuExpansion");
  }
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  VEIL_RETURN_IF_ERROR(m.UploadRoot(ciphertext));
  absl::StatusOr<uint64_t*> leaves = m.Run(keys);
  if (!leaves.ok()) return leaves.status();
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
  return use(*leaves);
}

absl::StatusOr<ExpandedKeys> GpuExpansion::Expand(absl::Span<const uint8_t> ciphertext) const {
  Impl& m = *impl_;
  if (m.own == nullptr) return absl::FailedPreconditionError("this expansion has no keys");
  ExpandedKeys out{m.plan.lwe_n, std::vector<uint64_t>(uint64_t{m.plan.lwe_n} * m.node_words())};
  const auto copy = [&out](const uint64_t* leaves) -> absl::Status {
    VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpy(
        out.leaves.data(), leaves, out.leaves.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  };
  VEIL_RETURN_IF_ERROR(ExpandThen(*m.own, ciphertext, copy));
  return out;
}

absl::StatusOr<double> GpuExpansion::MeasureExpand(absl::Span<const uint8_t> ciphertext,
                                                   int reps) const {
  Impl& m = *impl_;
  if (m.own == nullptr) return absl::FailedPreconditionError("this expansion has no keys");
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  // The levels overwrite the root: it goes up again before each run.
  return internal::MedianLaunchSeconds(
      m.stream, reps, [&] { return m.UploadRoot(ciphertext); },
      [&] { return m.Run(*m.own).status(); });
}

}  // namespace veil::gpu
