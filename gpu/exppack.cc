// The GPU packed-query engine (gpu/exppack.h): GpuExpansion's leaves summed where they lie by
// GpuPackingSums, each session's keys uploaded once; GpuResponseSwitch (no CUDA calls here).
#include "gpu/exppack.h"

#include <utility>

namespace veil::gpu {

absl::StatusOr<std::unique_ptr<GpuPackingEngine>> GpuPackingEngine::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
    const GpuPackingEngineOptions& options) {
  absl::StatusOr<std::unique_ptr<GpuPackingSums>> packing =
      GpuPackingSums::Create(ctx, matrix, options.device);
  if (!packing.ok()) return packing.status();
  absl::StatusOr<std::unique_ptr<GpuExpansion>> expansion =
      GpuExpansion::Create(ctx, matrix.lwe_n(), options.device);
  if (!expansion.ok()) return expansion.status();
  absl::StatusOr<std::unique_ptr<GpuResponseSwitch>> switcher =
      GpuResponseSwitch::Create(ctx, options.device);
  if (!switcher.ok()) return switcher.status();
  return std::unique_ptr<GpuPackingEngine>(
      new GpuPackingEngine(*std::move(expansion), *std::move(packing), *std::move(switcher),
                           lattice::PackingSumWords(ctx, matrix), options.max_sessions));
}

absl::Status GpuPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                    absl::Span<const uint8_t> ciphertext, int /*threads*/,
                                    absl::Span<uint64_t> sums) const {
  if (absl::Status s = lattice::internal::CheckSumsArguments(keys, sum_words_, sums); !s.ok())
    return s;
  absl::StatusOr<std::shared_ptr<const GpuExpansionKeys>> session =
      sessions_.Get(keys, [this](const he::GaloisKeys& k) { return expansion_->UploadKeys(k); });
  if (!session.ok()) return session.status();
  return expansion_->ExpandThen(**session, ciphertext, [&](const uint64_t* leaves) {
    return packing_->SumLeaves(leaves, sums);
  });
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> GpuPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed) const {
  return switch_->Switch(packed);
}

}  // namespace veil::gpu
