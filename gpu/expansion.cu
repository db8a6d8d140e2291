// The GPU expansion: a __global__ wrapper over the phase body of
// gpu/internal/expansion_phases.h (the code CI runs on the host), the level loop and its
// measurement.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/expansion.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/runners.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {
namespace {

__global__ void __launch_bounds__(internal::kNttBlockThreads)
    ExpansionKernel(const internal::ExpansionArgs a) {
  extern __shared__ uint64_t shared[];
  internal::BlockRunner run;
  internal::ExpansionNodeBlock(run, a, blockIdx.x, shared);
}

}  // namespace

struct GpuExpansion::Impl {
  int device = 0;
  internal::ExpansionPlan plan;
  lattice::RingContext ring;
  std::vector<uint64_t*> d_roots, d_iroots;
  uint64_t *d_key_b = nullptr, *d_key_a = nullptr, *d_monos = nullptr;
  uint32_t* d_perms = nullptr;
  uint64_t *d_nodes[2] = {nullptr, nullptr}, *d_scratch = nullptr;
  std::vector<uint64_t> root;  // the query's root, host side (the copy reads it)
  cudaStream_t stream = nullptr;
  std::mutex mu;

  explicit Impl(lattice::RingContext r) : ring(std::move(r)) {}
  ~Impl() {
    cudaSetDevice(device);
    for (uint64_t* p : d_roots) cudaFree(p);
    for (uint64_t* p : d_iroots) cudaFree(p);
    cudaFree(d_key_b);
    cudaFree(d_key_a);
    cudaFree(d_monos);
    cudaFree(d_perms);
    cudaFree(d_nodes[0]);
    cudaFree(d_nodes[1]);
    cudaFree(d_scratch);
    if (stream) cudaStreamDestroy(stream);
  }

  uint64_t node_words() const { return 2ull * plan.k << plan.log_n; }

  // The device pointers above, as the level loop reads them.
  internal::ExpansionArrays Arrays() const {
    internal::ExpansionArrays a;
    a.roots.assign(d_roots.begin(), d_roots.end());
    a.iroots.assign(d_iroots.begin(), d_iroots.end());
    a.key_b = d_key_b;
    a.key_a = d_key_a;
    a.perms = d_perms;
    a.monos = d_monos;
    a.nodes[0] = d_nodes[0];
    a.nodes[1] = d_nodes[1];
    a.scratch = d_scratch;
    return a;
  }

  // The levels on the root at d_nodes[0]; returns the buffer holding the leaves.
  absl::StatusOr<uint64_t*> Run() {
    const uint64_t n = uint64_t{1} << plan.log_n;
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>(internal::kNttBlockThreads, n / 2));
    return internal::RunExpansionLevels(
        plan, Arrays(), [&](const internal::ExpansionArgs& args) -> absl::Status {
          ExpansionKernel<<<args.nodes, threads, n * sizeof(uint64_t), stream>>>(args);
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

absl::StatusOr<std::unique_ptr<GpuExpansion>> GpuExpansion::Create(const lattice::RingContext& ctx,
                                                                   const he::GaloisKeys& keys,
                                                                   uint32_t lwe_n, int device) {
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, keys, lwe_n);
  if (!plan.ok()) return plan.status();
  VEIL_RETURN_IF_ERROR(internal::CheckDevice(device));
  absl::StatusOr<lattice::RingContext> ring = lattice::RingContext::Create(ctx.params());
  if (!ring.ok()) return ring.status();
  auto impl = std::make_unique<Impl>(*std::move(ring));
  impl->device = device;
  impl->plan = *std::move(plan);
  const internal::ExpansionPlan& p = impl->plan;
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  for (const internal::MontgomeryNttTables& t : p.tables) {
    impl->d_roots.push_back(nullptr);
    impl->d_iroots.push_back(nullptr);
    VEIL_RETURN_IF_ERROR(
        internal::UploadNew(&impl->d_roots.back(), t.roots.data(), t.roots.size()));
    VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_iroots.back(), t.inverse_roots.data(),
                                             t.inverse_roots.size()));
  }
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_key_b, p.key_b.data(), p.key_b.size()));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_key_a, p.key_a.data(), p.key_a.size()));
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

absl::StatusOr<ExpandedKeys> GpuExpansion::Expand(absl::Span<const uint8_t> ciphertext) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  VEIL_RETURN_IF_ERROR(m.UploadRoot(ciphertext));
  absl::StatusOr<uint64_t*> leaves = m.Run();
  if (!leaves.ok()) return leaves.status();
  ExpandedKeys out{m.plan.lwe_n, std::vector<uint64_t>(uint64_t{m.plan.lwe_n} * m.node_words())};
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.leaves.data(), *leaves,
                                            out.leaves.size() * sizeof(uint64_t),
                                            cudaMemcpyDeviceToHost, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
  return out;
}

absl::StatusOr<double> GpuExpansion::MeasureExpand(absl::Span<const uint8_t> ciphertext,
                                                   int reps) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  // The levels overwrite the root: it goes up again before each run.
  return internal::MedianLaunchSeconds(
      m.stream, reps, [&] { return m.UploadRoot(ciphertext); }, [&] { return m.Run().status(); });
}

}  // namespace veil::gpu
