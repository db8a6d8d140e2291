// The GPU packed-query engine (gpu/exppack.h): GpuExpansion's roots (or leaves) summed where they
// lie by GpuPackingSums, the deferred levels' switches by GpuDeferredSwitches, each session's
// keys uploaded once; GpuResponseSwitch (no CUDA calls here).
#include "gpu/exppack.h"

#include <algorithm>
#include <utility>

#include "pir/lattice/deferred_packing.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {

absl::StatusOr<std::unique_ptr<GpuPackingEngine>> GpuPackingEngine::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
    const GpuPackingEngineOptions& options) {
  const uint32_t levels =
      lattice::EngineDeferredLevels(ctx, matrix.lwe_n(), options.deferred_levels);
  std::unique_ptr<GpuDeferredSwitches> deferred;
  absl::StatusOr<std::unique_ptr<GpuPackingSums>> packing;
  uint32_t expanded = matrix.lwe_n();  // the tree's leaves: the roots when levels are deferred
  if (levels > 0) {
    absl::StatusOr<std::unique_ptr<GpuDeferredSwitches>> switches =
        GpuDeferredSwitches::Create(ctx, matrix.lwe_n(), levels, matrix.groups(), options.device);
    if (!switches.ok()) return switches.status();
    deferred = *std::move(switches);
    absl::StatusOr<lattice::PackingMatrix> folded = lattice::DeferredPacking::FoldedMatrix(
        ctx, matrix, levels, std::max(options.fold_threads, 1));
    if (!folded.ok()) return folded.status();
    expanded = folded->lwe_n();
    packing = GpuPackingSums::Create(ctx, *folded, options.device);
  } else {
    packing = GpuPackingSums::Create(ctx, matrix, options.device);
  }
  if (!packing.ok()) return packing.status();
  absl::StatusOr<std::unique_ptr<GpuExpansion>> expansion =
      GpuExpansion::Create(ctx, expanded, options.device);
  if (!expansion.ok()) return expansion.status();
  absl::StatusOr<std::unique_ptr<GpuResponseSwitch>> switcher =
      GpuResponseSwitch::Create(ctx, options.device);
  if (!switcher.ok()) return switcher.status();
  return std::unique_ptr<GpuPackingEngine>(new GpuPackingEngine(
      *std::move(expansion), *std::move(packing), std::move(deferred), levels, *std::move(switcher),
      lattice::PackingSumWords(ctx, matrix), options.max_sessions));
}

absl::StatusOr<std::shared_ptr<const GpuPackingEngine::Keys>> GpuPackingEngine::Session(
    const std::shared_ptr<const he::GaloisKeys>& keys) const {
  return sessions_.Get(
      keys, [this](const he::GaloisKeys& k) -> absl::StatusOr<std::unique_ptr<Keys>> {
        auto out = std::make_unique<Keys>();
        absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> levels = expansion_->UploadKeys(k);
        if (!levels.ok()) return levels.status();
        out->levels = *std::move(levels);
        if (deferred_) {
          absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> elements = deferred_->UploadKeys(k);
          if (!elements.ok()) return elements.status();
          out->deferred = *std::move(elements);
        }
        return out;
      });
}

void GpuPackingEngine::SumsChunk(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                                 absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                 absl::Span<const absl::Span<uint64_t>> sums,
                                 absl::Span<absl::Status> out) const {
  std::vector<std::shared_ptr<const Keys>> held(keys.size());
  const std::vector<absl::Status> status = packing_->SumLeavesBatchThen(
      static_cast<uint32_t>(keys.size()),
      [&](uint32_t q, GpuPackingSums::Put put) -> absl::Status {
        if (absl::Status s = lattice::internal::CheckSumsArguments(keys[q], sum_words_, sums[q]);
            !s.ok()) {
          return s;
        }
        absl::StatusOr<std::shared_ptr<const Keys>> session = Session(keys[q]);
        if (!session.ok()) return session.status();
        held[q] = *std::move(session);
        return expansion_->ExpandThen(*held[q]->levels, ciphertexts[q], put);
      },
      [&](uint32_t q, const uint64_t* device_sums) -> absl::Status {
        if (!deferred_) return packing_->CopySums(device_sums, sums[q]);
        return deferred_->Finish(*held[q]->deferred, device_sums, sums[q]);
      });
  std::copy(status.begin(), status.end(), out.begin());
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> GpuPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed) const {
  return switch_->Switch(packed);
}

}  // namespace veil::gpu
