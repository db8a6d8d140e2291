// The host side of the GPU packed-query engine (gpu/exppack.h): the batching both engines share,
// and the engine that runs the kernels' phases on the host (CI).
#include <algorithm>
#include <utility>
#include <vector>

#include "gpu/exppack.h"
#include "pir/lattice/deferred_packing.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {

namespace internal {

absl::Status ChunkedPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                        absl::Span<const uint8_t> ciphertext, int threads,
                                        absl::Span<uint64_t> sums) const {
  return SumsBatch({keys}, {ciphertext}, {sums}, std::max(threads, 1)).front();
}

std::vector<absl::Status> ChunkedPackingEngine::SumsBatch(
    absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::Span<const absl::Span<uint64_t>> sums, int threads) const {
  const size_t count = keys.size();
  if (absl::Status s =
          lattice::internal::CheckSumsBatch(count, ciphertexts.size(), sums.size(), threads);
      !s.ok()) {
    return std::vector<absl::Status>(count, s);
  }
  std::vector<absl::Status> out(count);
  for (size_t first = 0; first < count; first += chunk_) {
    const size_t size = std::min<size_t>(chunk_, count - first);
    SumsChunk(keys.subspan(first, size), ciphertexts.subspan(first, size),
              sums.subspan(first, size), absl::MakeSpan(out).subspan(first, size));
  }
  return out;
}

}  // namespace internal

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

absl::StatusOr<std::shared_ptr<const HostRunPackingEngine::Keys>> HostRunPackingEngine::Session(
    const std::shared_ptr<const he::GaloisKeys>& keys) const {
  return sessions_.Get(
      keys, [this](const he::GaloisKeys& k) -> absl::StatusOr<std::unique_ptr<Keys>> {
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
}

void HostRunPackingEngine::SumsChunk(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                                     absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                     absl::Span<const absl::Span<uint64_t>> sums,
                                     absl::Span<absl::Status> out) const {
  const lattice::PackingMatrix& summed = folded_ ? *folded_ : matrix_;
  const uint64_t sum_words = lattice::PackingSumWords(ctx_, matrix_);
  // As the device: the queries with good arguments and keys expanded side by side, ...
  std::vector<size_t> ready;
  std::vector<std::shared_ptr<const Keys>> held;
  std::vector<const internal::ExpansionKeyArrays*> levels;
  std::vector<absl::Span<const uint8_t>> ready_ciphertexts;
  for (size_t q = 0; q < keys.size(); ++q) {
    out[q] = lattice::internal::CheckSumsArguments(keys[q], sum_words, sums[q]);
    if (!out[q].ok()) continue;
    absl::StatusOr<std::shared_ptr<const Keys>> session = Session(keys[q]);
    if (!session.ok()) {
      out[q] = session.status();
      continue;
    }
    ready.push_back(q);
    held.push_back(*std::move(session));
    levels.push_back(held.back()->levels.get());
    ready_ciphertexts.push_back(ciphertexts[q]);
  }
  if (ready.empty()) return;
  std::vector<absl::StatusOr<ExpandedKeys>> expanded =
      internal::HostRunExpansionBatch(ctx_, plan_, levels, ready_ciphertexts);
  // ... those expanded summed in one pass, ...
  std::vector<size_t> done;  // indices into `ready`
  std::vector<absl::Span<const uint64_t>> leaf_spans;
  for (size_t j = 0; j < ready.size(); ++j) {
    if (!expanded[j].ok()) {
      out[ready[j]] = expanded[j].status();
      continue;
    }
    done.push_back(j);
    leaf_spans.push_back(expanded[j]->leaves);
  }
  if (done.empty()) return;
  std::vector<std::vector<uint64_t>> pass_sums(  // the folded matrix's, when deferred
      deferred_ ? done.size() : 0, std::vector<uint64_t>(lattice::PackingSumWords(ctx_, summed)));
  std::vector<absl::Span<uint64_t>> sum_spans;
  for (size_t i = 0; i < done.size(); ++i) {
    sum_spans.push_back(deferred_ ? absl::MakeSpan(pass_sums[i]) : sums[ready[done[i]]]);
  }
  if (absl::Status s = HostRunSumLeavesBatch(ctx_, summed, leaf_spans, sum_spans); !s.ok()) {
    for (size_t j : done) out[ready[j]] = s;
    return;
  }
  // ... then their deferred switches side by side.
  if (!deferred_) return;
  std::vector<const internal::ExpansionKeyArrays*> elements;
  std::vector<absl::Span<const uint64_t>> virtual_spans;
  std::vector<absl::Span<uint64_t>> out_spans;
  for (size_t i = 0; i < done.size(); ++i) {
    elements.push_back(held[done[i]]->deferred.get());
    virtual_spans.push_back(pass_sums[i]);
    out_spans.push_back(sums[ready[done[i]]]);
  }
  const std::vector<absl::Status> switched =
      internal::HostRunDeferredSwitchesBatch(*deferred_, elements, virtual_spans, out_spans);
  for (size_t i = 0; i < done.size(); ++i) out[ready[done[i]]] = switched[i];
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> HostRunPackingEngine::Switch(
    absl::Span<const lattice::RlweCiphertext> packed, int /*threads*/) const {
  return HostRunSwitchResponse(ctx_, packed);
}

}  // namespace veil::gpu
