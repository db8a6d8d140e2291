// The host side of the GPU packed-query engine (gpu/exppack.h): the argument checks both engines
// share, and the engine that runs the kernels' phases on the host (CI).
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpu/exppack.h"

namespace veil::gpu {
namespace internal {

absl::Status CheckSumsArguments(const std::shared_ptr<const he::GaloisKeys>& keys,
                                uint64_t sum_words, absl::Span<const uint64_t> sums) {
  if (keys == nullptr || sums.size() != sum_words) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing sums: ", keys == nullptr ? "no keys, " : "", sums.size(),
                     " sums (expected ", sum_words, ")"));
  }
  return absl::OkStatus();
}

}  // namespace internal

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
  if (absl::Status s =
          internal::CheckSumsArguments(keys, lattice::PackingSumWords(ctx_, matrix_), sums);
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
