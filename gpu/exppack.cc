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
  const uint32_t batch = std::clamp<uint32_t>(options.max_batch, 1, GpuPackingSums::kMaxBatch);
  std::unique_ptr<GpuDeferredSwitches> deferred;
  absl::StatusOr<std::unique_ptr<GpuPackingSums>> packing;
  uint32_t expanded = matrix.lwe_n();  // the tree's leaves: the roots when levels are deferred
  if (levels > 0) {
    absl::StatusOr<std::unique_ptr<GpuDeferredSwitches>> switches = GpuDeferredSwitches::Create(
        ctx, matrix.lwe_n(), levels, matrix.groups(), options.device, batch);
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
      GpuExpansion::Create(ctx, expanded, options.device, batch);
  if (!expansion.ok()) return expansion.status();
  absl::StatusOr<std::unique_ptr<GpuResponseSwitch>> switcher =
      GpuResponseSwitch::Create(ctx, options.device);
  if (!switcher.ok()) return switcher.status();
  return std::unique_ptr<GpuPackingEngine>(new GpuPackingEngine(
      *std::move(expansion), *std::move(packing), std::move(deferred), levels, *std::move(switcher),
      lattice::PackingSumWords(ctx, matrix), options.max_sessions, batch));
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
  std::vector<size_t> ready;  // the queries whose arguments and keys are good
  std::vector<const GpuExpansionKeys*> levels;
  std::vector<absl::Span<const uint8_t>> ready_ciphertexts;
  for (size_t q = 0; q < keys.size(); ++q) {
    out[q] = lattice::internal::CheckSumsArguments(keys[q], sum_words_, sums[q]);
    if (!out[q].ok()) continue;
    absl::StatusOr<std::shared_ptr<const Keys>> session = Session(keys[q]);
    if (!session.ok()) {
      out[q] = session.status();
      continue;
    }
    held[q] = *std::move(session);
    ready.push_back(q);
    levels.push_back(held[q]->levels.get());
    ready_ciphertexts.push_back(ciphertexts[q]);
  }
  if (ready.empty()) return;
  const std::vector<absl::Status> expanded = expansion_->ExpandBatchThen(
      levels, ready_ciphertexts,
      [&](absl::Span<const size_t> done, absl::Span<const uint64_t* const> leaves) {
        std::vector<absl::Span<uint64_t>> done_sums;
        std::vector<const GpuExpansionKeys*> elements;
        for (size_t j : done) {
          done_sums.push_back(sums[ready[j]]);
          if (deferred_) elements.push_back(held[ready[j]]->deferred.get());
        }
        const std::vector<absl::Status> summed = packing_->SumLeavesBatchThen(
            leaves, [&](absl::Span<const uint64_t* const> device_sums) {
              if (deferred_) return deferred_->FinishBatch(elements, device_sums, done_sums);
              std::vector<absl::Status> copied;
              for (size_t i = 0; i < device_sums.size(); ++i) {
                copied.push_back(packing_->CopySums(device_sums[i], done_sums[i]));
              }
              return copied;
            });
        for (size_t i = 0; i < done.size(); ++i) out[ready[done[i]]] = summed[i];
      });
  for (size_t j = 0; j < ready.size(); ++j) {
    if (!expanded[j].ok()) out[ready[j]] = expanded[j];
  }
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> GpuPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed, int /*threads*/) const {
  return switch_->Switch(packed);
}

}  // namespace veil::gpu
