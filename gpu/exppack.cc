// The GPU packed-query engine (gpu/exppack.h): GpuExpansion's leaves summed where they lie by
// GpuPackingSums, each session's keys uploaded once (no CUDA calls here).
#include "gpu/exppack.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace veil::gpu {

absl::StatusOr<std::unique_ptr<GpuExpPackSums>> GpuExpPackSums::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
    const GpuExpPackOptions& options) {
  absl::StatusOr<std::unique_ptr<GpuPackingSums>> packing =
      GpuPackingSums::Create(ctx, matrix, options.device);
  if (!packing.ok()) return packing.status();
  absl::StatusOr<std::unique_ptr<GpuExpansion>> expansion =
      GpuExpansion::Create(ctx, matrix.lwe_n(), options.device);
  if (!expansion.ok()) return expansion.status();
  return std::unique_ptr<GpuExpPackSums>(
      new GpuExpPackSums(*std::move(expansion), *std::move(packing),
                         lattice::PackingSumWords(ctx, matrix), options.max_sessions));
}

absl::Status GpuExpPackSums::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                  absl::Span<const uint8_t> ciphertext, int /*threads*/,
                                  absl::Span<uint64_t> sums) const {
  if (absl::Status s = internal::CheckSumsArguments(keys, sum_words_, sums); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<const GpuExpansionKeys>> session =
      sessions_.Get(keys, [this](const he::GaloisKeys& k) { return expansion_->UploadKeys(k); });
  if (!session.ok()) return session.status();
  return expansion_->ExpandThen(**session, ciphertext, [&](const uint64_t* leaves) {
    return packing_->SumLeaves(leaves, sums);
  });
}

}  // namespace veil::gpu
