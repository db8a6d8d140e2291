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
  uint32_t max_batch = 1;
  internal::ExpansionPlan plan;
  lattice::RingContext ring;
  internal::DeviceQpRoots tables;
  uint64_t* d_monos = nullptr;
  uint32_t* d_perms = nullptr;
  // max_batch queries' nodes (ExpansionQueryStride each) and scratch (ExpansionScratchStride).
  uint64_t *d_nodes[2] = {nullptr, nullptr}, *d_scratch = nullptr;
  std::unique_ptr<GpuExpansionKeys> own;     // Create's keys, if any
  std::vector<std::vector<uint64_t>> roots;  // the queries' roots, host side (the copy reads them)
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

  // The levels on the roots at d_nodes[0] (query q's ExpansionQueryStride words after query
  // q - 1's), query q under keys[q]; returns the buffer holding the leaves.
  absl::StatusOr<uint64_t*> Run(absl::Span<const GpuExpansionKeys* const> keys) {
    const uint64_t n = uint64_t{1} << plan.log_n;
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>(internal::kNttBlockThreads, n / 2));
    internal::ExpansionArrays a;
    a.roots.assign(tables.roots.begin(), tables.roots.end());
    a.iroots.assign(tables.iroots.begin(), tables.iroots.end());
    for (const GpuExpansionKeys* k : keys) {
      a.key_b.push_back(k->key_b_);
      a.key_a.push_back(k->key_a_);
    }
    a.perms = d_perms;
    a.monos = d_monos;
    a.nodes[0] = d_nodes[0];
    a.nodes[1] = d_nodes[1];
    a.scratch = d_scratch;
    return internal::RunExpansionLevels(
        plan, a,
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

  // The roots of parsed ciphertexts (one node each) into their queries' slots of d_nodes[0].
  absl::Status UploadRoots(std::vector<std::vector<uint64_t>> parsed) {
    VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // the previous copy has read them
    roots = std::move(parsed);
    const uint64_t stride = internal::ExpansionQueryStride(plan);
    for (size_t q = 0; q < roots.size(); ++q) {
      VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_nodes[0] + q * stride, roots[q].data(),
                                                roots[q].size() * sizeof(uint64_t),
                                                cudaMemcpyHostToDevice, stream));
    }
    return absl::OkStatus();
  }
};

GpuExpansion::GpuExpansion(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuExpansion::~GpuExpansion() = default;

int GpuExpansion::device() const { return impl_->device; }

absl::StatusOr<std::unique_ptr<GpuExpansion>> GpuExpansion::Create(const lattice::RingContext& ctx,
                                                                   uint32_t lwe_n, int device,
                                                                   uint32_t max_batch) {
  if (max_batch == 0 || max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("an expansion batch holds 1 to ", kMaxBatch, " queries, not ", max_batch));
  }
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, lwe_n);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<Impl>> started =
      internal::StartOnDevice<Impl>(ctx, *std::move(plan), device);
  if (!started.ok()) return started.status();
  std::unique_ptr<Impl> impl = *std::move(started);
  impl->max_batch = max_batch;
  const internal::ExpansionPlan& p = impl->plan;
  VEIL_RETURN_IF_ERROR(impl->tables.Upload(p));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_monos, p.monos.data(), p.monos.size()));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_perms, p.perms.data(), p.perms.size()));
  for (uint64_t*& buffer : impl->d_nodes) {
    VEIL_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&buffer, max_batch * internal::ExpansionQueryStride(p) * sizeof(uint64_t)));
  }
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(
      &impl->d_scratch, max_batch * internal::ExpansionScratchStride(p) * sizeof(uint64_t)));
  return std::unique_ptr<GpuExpansion>(new GpuExpansion(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<GpuExpansion>> GpuExpansion::Create(const lattice::RingContext& ctx,
                                                                   const he::GaloisKeys& keys,
                                                                   uint32_t lwe_n, int device,
                                                                   uint32_t max_batch) {
  absl::StatusOr<std::unique_ptr<GpuExpansion>> out = Create(ctx, lwe_n, device, max_batch);
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

std::vector<absl::Status> GpuExpansion::ExpandBatchThen(
    absl::Span<const GpuExpansionKeys* const> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::FunctionRef<void(absl::Span<const size_t> expanded,
                           absl::Span<const uint64_t* const> leaves)>
        use) const {
  Impl& m = *impl_;
  const size_t count = keys.size();
  std::vector<absl::Status> status(count);
  if (count == 0 || count > m.max_batch || ciphertexts.size() != count) {
    status.assign(count, absl::InvalidArgumentError(absl::StrCat(
                             "an expansion batch of ", count, " keys and ", ciphertexts.size(),
                             " ciphertexts (1 to ", m.max_batch, " of each)")));
    return status;
  }
  std::vector<size_t> expanded;
  std::vector<const GpuExpansionKeys*> expanded_keys;
  std::vector<std::vector<uint64_t>> parsed;
  for (size_t q = 0; q < count; ++q) {
    if (keys[q] == nullptr || !keys[q]->MadeFor(this, internal::ExpansionKeyWords(m.plan))) {
      status[q].Update(
          absl::InvalidArgumentError("expansion keys uploaded by another GpuExpansion"));
      continue;
    }
    absl::StatusOr<std::vector<uint64_t>> root =
        lattice::internal::SecretCiphertextRoot(m.ring, ciphertexts[q]);
    if (!root.ok()) {
      status[q].Update(root.status());
      continue;
    }
    expanded.push_back(q);
    expanded_keys.push_back(keys[q]);
    parsed.push_back(*std::move(root));
  }
  if (expanded.empty()) return status;
  std::lock_guard<std::mutex> lock(m.mu);
  absl::StatusOr<uint64_t*> leaves = [&]() -> absl::StatusOr<uint64_t*> {
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
    VEIL_RETURN_IF_ERROR(m.UploadRoots(std::move(parsed)));
    absl::StatusOr<uint64_t*> out = m.Run(expanded_keys);
    if (!out.ok()) return out.status();
    VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
    return out;
  }();
  if (!leaves.ok()) {
    for (size_t q : expanded) status[q].Update(leaves.status());
    return status;
  }
  std::vector<const uint64_t*> each;
  for (size_t i = 0; i < expanded.size(); ++i) {
    each.push_back(*leaves + i * internal::ExpansionQueryStride(m.plan));
  }
  use(expanded, each);
  return status;
}

absl::Status GpuExpansion::ExpandThen(
    const GpuExpansionKeys& keys, absl::Span<const uint8_t> ciphertext,
    absl::FunctionRef<absl::Status(const uint64_t* leaves)> use) const {
  const GpuExpansionKeys* one = &keys;
  absl::Status used;
  absl::Status expanded =
      ExpandBatchThen({&one, 1}, {ciphertext},
                      [&](absl::Span<const size_t>, absl::Span<const uint64_t* const> leaves) {
                        used.Update(use(leaves[0]));
                      })[0];
  return expanded.ok() ? used : expanded;
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

absl::StatusOr<double> GpuExpansion::MeasureExpand(absl::Span<const uint8_t> ciphertext, int reps,
                                                   uint32_t queries) const {
  Impl& m = *impl_;
  if (m.own == nullptr) return absl::FailedPreconditionError("this expansion has no keys");
  if (queries == 0 || queries > m.max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("an expansion batch holds 1 to ", m.max_batch, " queries, not ", queries));
  }
  absl::StatusOr<std::vector<uint64_t>> root =
      lattice::internal::SecretCiphertextRoot(m.ring, ciphertext);
  if (!root.ok()) return root.status();
  const std::vector<const GpuExpansionKeys*> keys(queries, m.own.get());
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  // The levels overwrite the roots: they go up again before each run.
  return internal::MedianLaunchSeconds(
      m.stream, reps,
      [&] { return m.UploadRoots(std::vector<std::vector<uint64_t>>(queries, *root)); },
      [&] { return m.Run(keys).status(); });
}

}  // namespace veil::gpu
