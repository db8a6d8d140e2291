// The host side of the GPU packed-query engine (gpu/exppack.h): the engine that runs the kernels'
// phases on the host (CI).
#include <utility>
#include <vector>

#include "gpu/exppack.h"
#include "pir/lattice/deferred_packing.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {

absl::StatusOr<std::unique_ptr<HostRunPackingEngine>> HostRunPackingEngine::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix, size_t max_sessions,
    uint32_t deferred_levels) {
  absl::StatusOr<internal::PackingShape> shape = internal::MakePackingShape(ctx, matrix);
  if (!shape.ok()) return shape.status();
  const uint32_t levels = lattice::EngineDeferredLevels(ctx, matrix.lwe_n(), deferred_levels);
  std::optional<lattice::PackingMatrix> folded;
  std::optional<internal::DeferredPlan> deferred;
  if (levels > 0) {
    absl::StatusOr<internal::DeferredPlan> plan =
        internal::MakeDeferredPlan(ctx, matrix.lwe_n(), levels, matrix.groups());
    if (!plan.ok()) return plan.status();
    deferred = *std::move(plan);
    absl::StatusOr<lattice::PackingMatrix> m =
        lattice::DeferredPacking::FoldedMatrix(ctx, matrix, levels, 1);
    if (!m.ok()) return m.status();
    folded = *std::move(m);
  }
  absl::StatusOr<internal::ExpansionPlan> plan =
      internal::MakeExpansionPlan(ctx, folded ? folded->lwe_n() : matrix.lwe_n());
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<HostRunPackingEngine>(new HostRunPackingEngine(
      ctx, matrix, *std::move(plan), std::move(folded), std::move(deferred), max_sessions));
}

absl::Status HostRunPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                        absl::Span<const uint8_t> ciphertext, int /*threads*/,
                                        absl::Span<uint64_t> sums) const {
  if (absl::Status s = lattice::internal::CheckSumsArguments(
          keys, lattice::PackingSumWords(ctx_, matrix_), sums);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::shared_ptr<const Keys>> arrays =
      sessions_.Get(keys, [this](const he::GaloisKeys& k) -> absl::StatusOr<std::unique_ptr<Keys>> {
        auto out = std::make_unique<Keys>();
        absl::StatusOr<internal::ExpansionKeyArrays> levels =
            internal::MakeExpansionKeyArrays(ctx_, k, plan_.lwe_n);
        if (!levels.ok()) return levels.status();
        out->levels = std::make_unique<internal::ExpansionKeyArrays>(*std::move(levels));
        if (deferred_) {
          absl::StatusOr<internal::ExpansionKeyArrays> elements =
              internal::MakeDeferredKeyArrays(ctx_, *deferred_, k);
          if (!elements.ok()) return elements.status();
          out->deferred = std::make_unique<internal::ExpansionKeyArrays>(*std::move(elements));
        }
        return out;
      });
  if (!arrays.ok()) return arrays.status();
  absl::StatusOr<ExpandedKeys> leaves =
      internal::HostRunExpansionWith(ctx_, plan_, *(*arrays)->levels, ciphertext);
  if (!leaves.ok()) return leaves.status();
  if (!deferred_) return HostRunSumLeaves(ctx_, matrix_, leaves->leaves, sums);
  std::vector<uint64_t> virtual_sums(lattice::PackingSumWords(ctx_, *folded_));
  if (absl::Status s =
          HostRunSumLeaves(ctx_, *folded_, leaves->leaves, absl::MakeSpan(virtual_sums));
      !s.ok()) {
    return s;
  }
  return internal::HostRunDeferredSwitches(*deferred_, *(*arrays)->deferred, virtual_sums, sums);
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> HostRunPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed) const {
  return HostRunSwitchResponse(ctx_, packed);
}

}  // namespace veil::gpu
