// Host side of the GPU packing sums (gpu/packing.h): the inputs' checks, shared with the device
// path, and the host-run of the kernel's phases (gpu/internal/packing_phases.h), as CI checks them
// without a GPU.
#include "absl/strings/str_cat.h"
#include "gpu/internal/packing_phases.h"
#include "gpu/packing.h"

namespace veil::gpu {

uint64_t PackingSumWords(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix) {
  return matrix.groups() * 2 * ctx.k() * ctx.n();
}

namespace internal {

absl::StatusOr<PackingShape> MakePackingShape(const lattice::RingContext& ctx,
                                              const lattice::PackingMatrix& matrix) {
  PackingShape shape;
  shape.lwe_n = matrix.lwe_n();
  shape.slots = static_cast<uint32_t>(ctx.k() * ctx.n());
  shape.log_n = static_cast<uint32_t>(ctx.params().log_n);
  shape.groups = matrix.groups();
  if (matrix.bytes() != shape.groups * shape.lwe_n * shape.slots * sizeof(uint32_t)) {
    return absl::InvalidArgumentError("the packing matrix is of another ring");
  }
  for (size_t p = 0; p < ctx.k(); ++p) {
    const uint64_t q = ctx.base()[p].value();
    shape.moduli.push_back(q);
    shape.two64.push_back(((~uint64_t{0}) % q + 1) % q);
  }
  return shape;
}

absl::StatusOr<std::vector<uint32_t>> CheckPackingInputs(const PackingShape& shape,
                                                         absl::Span<const uint32_t> index,
                                                         absl::Span<const uint64_t> beta,
                                                         absl::Span<const uint64_t> alpha,
                                                         absl::Span<const uint64_t> sums) {
  const uint64_t slots = shape.slots, sum_words = shape.groups * 2 * slots;
  if (beta.size() != index.size() * slots || alpha.size() != beta.size() ||
      sums.size() != sum_words) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing sums: ", index.size(), " keys need ", index.size() * slots,
                     " residues per half (got ", beta.size(), " and ", alpha.size(),
                     ") and sums of ", sum_words, " (got ", sums.size(), ")"));
  }
  for (uint32_t j : index) {
    if (j >= shape.lwe_n) {
      return absl::InvalidArgumentError(
          absl::StrCat("key index ", j, " is not below n = ", shape.lwe_n));
    }
  }
  const auto prime = [&](size_t r) { return shape.moduli[(r % slots) >> shape.log_n]; };
  std::vector<uint32_t> keys(2 * beta.size());
  for (size_t r = 0; r < beta.size(); ++r) {
    if (beta[r] >= prime(r) || alpha[r] >= prime(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("key residue ", r, " is not below its prime ", prime(r)));
    }
    keys[r] = static_cast<uint32_t>(beta[r]);
    keys[beta.size() + r] = static_cast<uint32_t>(alpha[r]);
  }
  for (size_t r = 0; r < sums.size(); ++r) {
    if (sums[r] >= prime(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sum ", r, " is not below its prime ", prime(r)));
    }
  }
  return keys;
}

}  // namespace internal

namespace {

// Runs a phase's items in order: a valid schedule of the block's threads (items of one phase
// write disjoint sums).
struct SequentialRunner {
  template <class F>
  void Phase(uint32_t items, F&& f) {
    for (uint32_t i = 0; i < items; ++i) f(i);
  }
};

}  // namespace

absl::Status HostRunPackingSums(const lattice::RingContext& ctx,
                                const lattice::PackingMatrix& matrix,
                                absl::Span<const uint32_t> index, absl::Span<const uint64_t> beta,
                                absl::Span<const uint64_t> alpha, absl::Span<uint64_t> sums) {
  absl::StatusOr<internal::PackingShape> shape = internal::MakePackingShape(ctx, matrix);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::vector<uint32_t>> keys =
      internal::CheckPackingInputs(*shape, index, beta, alpha, sums);
  if (!keys.ok()) return keys.status();
  internal::PackingArgs args;
  args.matrix = matrix.Polynomial(0, 0);
  args.lwe_n = shape->lwe_n;
  args.slots = shape->slots;
  args.log_n = shape->log_n;
  args.count = static_cast<uint32_t>(index.size());
  args.index = index.data();
  args.beta = keys->data();
  args.alpha = keys->data() + beta.size();
  args.moduli = shape->moduli.data();
  args.two64 = shape->two64.data();
  args.sums = sums.data();
  SequentialRunner run;
  const uint32_t blocks = (shape->slots + internal::kPackThreads - 1) / internal::kPackThreads;
  for (uint32_t g = 0; g < shape->groups; ++g) {
    for (uint32_t b = 0; b < blocks; ++b) internal::PackingBlock(run, args, b, g);
  }
  return absl::OkStatus();
}

}  // namespace veil::gpu
