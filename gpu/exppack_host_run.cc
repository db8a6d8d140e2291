// The host side of the GPU packed-query engine (gpu/exppack.h): the engine that runs the kernels'
// phases on the host (CI).
#include <utility>

#include "gpu/exppack.h"

namespace veil::gpu {

absl::StatusOr<std::unique_ptr<HostRunPackingEngine>> HostRunPackingEngine::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix, size_t max_sessions) {
  absl::StatusOr<internal::PackingShape> shape = internal::MakePackingShape(ctx, matrix);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, matrix.lwe_n());
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<HostRunPackingEngine>(
      new HostRunPackingEngine(ctx, matrix, *std::move(plan), max_sessions));
}

absl::Status HostRunPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                        absl::Span<const uint8_t> ciphertext, int /*threads*/,
                                        absl::Span<uint64_t> sums) const {
  if (absl::Status s = lattice::internal::CheckSumsArguments(
          keys, lattice::PackingSumWords(ctx_, matrix_), sums);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::shared_ptr<const internal::ExpansionKeyArrays>> arrays =
      sessions_.Get(keys,
                    [this](const he::GaloisKeys& k)
                        -> absl::StatusOr<std::unique_ptr<internal::ExpansionKeyArrays>> {
                      absl::StatusOr<internal::ExpansionKeyArrays> a =
                          internal::MakeExpansionKeyArrays(ctx_, k, plan_.lwe_n);
                      if (!a.ok()) return a.status();
                      return std::make_unique<internal::ExpansionKeyArrays>(*std::move(a));
                    });
  if (!arrays.ok()) return arrays.status();
  absl::StatusOr<ExpandedKeys> leaves =
      internal::HostRunExpansionWith(ctx_, plan_, **arrays, ciphertext);
  if (!leaves.ok()) return leaves.status();
  return HostRunSumLeaves(ctx_, matrix_, leaves->leaves, sums);
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> HostRunPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed) const {
  return HostRunSwitchResponse(ctx_, packed);
}

}  // namespace veil::gpu
