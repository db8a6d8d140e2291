// Host side of the GPU packing sums (gpu/packing.h): the inputs' checks, shared with the device
// path, and the host-run of the kernel's phases (gpu/internal/packing_phases.h), as CI checks them
// without a GPU.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/packing_phases.h"
#include "gpu/internal/runners.h"
#include "gpu/internal/switch_phases.h"
#include "gpu/packing.h"

namespace veil::gpu {

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

absl::StatusOr<SwitchPlan> MakeSwitchPlan(const lattice::RingContext& ctx) {
  if (ctx.params().log_n > kNttMaxLogN || ctx.k() > kSwitchMaxPrimes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU switch takes N <= 2^", kNttMaxLogN, ", not N = ", ctx.n()));
  }
  SwitchPlan plan;
  plan.log_n = static_cast<uint32_t>(ctx.params().log_n);
  plan.k = static_cast<uint32_t>(ctx.k());
  plan.target = ctx.response_modulus().value();
  for (size_t i = 0; i < ctx.k(); ++i) {
    absl::StatusOr<MontgomeryNttTables> t = MakeMontgomeryNttTables(ctx.ntt()[i]);
    if (!t.ok()) return t.status();
    const uint64_t q = t->q;
    plan.tables.push_back(*std::move(t));
    plan.punctured.push_back(ctx.base().punctured_inverse(i));
    plan.punctured_shoup.push_back(ctx.base().punctured_inverse_shoup(i));
    const unsigned __int128 ratio =
        ~static_cast<unsigned __int128>(0) / q;  // q odd: floor(2^128/q)
    plan.ratio_hi.push_back(static_cast<uint64_t>(ratio >> 64));
    plan.ratio_lo.push_back(static_cast<uint64_t>(ratio));
  }
  return plan;
}

SwitchArgs MakeSwitchArgs(const SwitchPlan& plan, absl::Span<uint64_t* const> iroots) {
  SwitchArgs args;
  args.log_n = plan.log_n;
  args.k = plan.k;
  args.target = plan.target;
  for (uint32_t i = 0; i < plan.k; ++i) {
    args.inverse[i] = plan.tables[i].Args(true, nullptr, 1);
    if (!iroots.empty()) args.inverse[i].roots = iroots[i];
    args.moduli[i] = plan.tables[i].q;
    args.punctured[i] = plan.punctured[i];
    args.punctured_shoup[i] = plan.punctured_shoup[i];
    args.ratio_hi[i] = plan.ratio_hi[i];
    args.ratio_lo[i] = plan.ratio_lo[i];
  }
  return args;
}

absl::StatusOr<std::vector<uint64_t>> SwitchHalves(
    const lattice::RingContext& ctx, absl::Span<const lattice::RlweCiphertext> packed) {
  const size_t n = ctx.n(), words = ctx.k() * n;
  std::vector<uint64_t> halves;
  halves.reserve(packed.size() * 2 * words);
  for (const lattice::RlweCiphertext& ct : packed) {
    if (ct.c0.size() != words || ct.c1.size() != words) {
      return absl::InvalidArgumentError(absl::StrCat("a packed ciphertext's halves hold ",
                                                     ct.c0.size(), " and ", ct.c1.size(),
                                                     " residues, expected ", words));
    }
    for (const std::vector<uint64_t>* half : {&ct.c0, &ct.c1}) {
      for (size_t r = 0; r < words; ++r) {
        if ((*half)[r] >= ctx.base()[r / n].value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("packed residue ", r, " is not below its prime"));
        }
      }
      halves.insert(halves.end(), half->begin(), half->end());
    }
  }
  return halves;
}

}  // namespace internal

namespace {

// The kernel over `queries` queries' keys narrowed to 32 bits (each query's beta, count x
// slots, then its alpha; the queries one after the other) into their sums (one after the other).
void RunPackingBlocks(const internal::PackingShape& shape, const lattice::PackingMatrix& matrix,
                      absl::Span<const uint32_t> index, const uint32_t* keys, uint64_t* sums,
                      uint32_t queries = 1) {
  internal::PackingArgs args;
  args.matrix = matrix.Polynomial(0, 0);
  args.lwe_n = shape.lwe_n;
  args.slots = shape.slots;
  args.log_n = shape.log_n;
  args.count = static_cast<uint32_t>(index.size());
  args.index = index.data();
  args.beta = keys;
  args.alpha = keys + index.size() * shape.slots;
  args.key_stride = 2 * index.size() * shape.slots;
  args.moduli = shape.moduli.data();
  args.two64 = shape.two64.data();
  args.sums = sums;
  args.sum_stride = shape.groups * 2 * shape.slots;
  internal::SequentialRunner run;
  const uint32_t blocks = (shape.slots + internal::kPackThreads - 1) / internal::kPackThreads;
  internal::WithPackQueries(queries, [&]<uint32_t Q>() {
    internal::HostLoop(shape.groups, [&](uint64_t g) {
      internal::HostLoop(blocks, [&](uint64_t b) {
        internal::PackingBlock<Q>(run, args, static_cast<uint32_t>(b), static_cast<uint32_t>(g));
      });
    });
  });
}

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
  RunPackingBlocks(*shape, matrix, index, keys->data(), sums.data());
  return absl::OkStatus();
}

absl::Status HostRunSumLeavesBatch(const lattice::RingContext& ctx,
                                   const lattice::PackingMatrix& matrix,
                                   absl::Span<const absl::Span<const uint64_t>> leaves,
                                   absl::Span<const absl::Span<uint64_t>> sums) {
  absl::StatusOr<internal::PackingShape> shape = internal::MakePackingShape(ctx, matrix);
  if (!shape.ok()) return shape.status();
  const uint64_t n = shape->lwe_n, slots = shape->slots, sum_words = shape->groups * 2 * slots;
  if (leaves.empty() || leaves.size() > internal::kPackMaxQueries || sums.size() != leaves.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packing sums of leaves: 1 to ", internal::kPackMaxQueries, " queries' leaves (got ",
        leaves.size(), ") and as many sums (got ", sums.size(), ")"));
  }
  for (size_t q = 0; q < leaves.size(); ++q) {
    if (leaves[q].size() != n * 2 * slots || sums[q].size() != sum_words) {
      return absl::InvalidArgumentError(
          absl::StrCat("packing sums of leaves: ", leaves[q].size(), " leaf words and ",
                       sums[q].size(), " sums (expected ", n * 2 * slots, " and ", sum_words, ")"));
    }
  }
  const uint32_t queries = static_cast<uint32_t>(leaves.size());
  std::vector<uint32_t> keys(queries * 2 * n * slots), index(n);
  for (uint32_t j = 0; j < n; ++j) index[j] = j;
  internal::SequentialRunner run;
  for (uint32_t q = 0; q < queries; ++q) {
    internal::NarrowArgs narrow{leaves[q].data(), keys.data() + q * 2 * n * slots, shape->lwe_n,
                                shape->slots};
    internal::HostLoop(internal::NarrowBlocks(shape->lwe_n, shape->slots), [&](uint64_t b) {
      internal::NarrowLeavesBlock(run, narrow, static_cast<uint32_t>(b));
    });
  }
  std::vector<uint64_t> all_sums(queries * sum_words, 0);
  RunPackingBlocks(*shape, matrix, index, keys.data(), all_sums.data(), queries);
  for (uint32_t q = 0; q < queries; ++q) {
    std::copy_n(all_sums.begin() + q * sum_words, sum_words, sums[q].begin());
  }
  return absl::OkStatus();
}

absl::Status HostRunSumLeaves(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                              absl::Span<const uint64_t> leaves, absl::Span<uint64_t> sums) {
  return HostRunSumLeavesBatch(ctx, matrix, {leaves}, {sums});
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> HostRunSwitchResponse(
    const lattice::RingContext& ctx, absl::Span<const lattice::RlweCiphertext> packed) {
  absl::StatusOr<internal::SwitchPlan> plan = internal::MakeSwitchPlan(ctx);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::vector<uint64_t>> halves = internal::SwitchHalves(ctx, packed);
  if (!halves.ok()) return halves.status();
  const uint32_t n = static_cast<uint32_t>(ctx.n());
  std::vector<uint32_t> words(packed.size() * 2 * n);
  internal::SwitchArgs args = internal::MakeSwitchArgs(*plan, {});
  args.halves = halves->data();
  args.out = words.data();
  std::vector<uint64_t> shared(n);
  internal::SequentialRunner run;
  internal::HostLoop(2 * packed.size(), [&](uint64_t h) {
    internal::PoisonShared(shared);
    internal::SwitchBlock(run, args, static_cast<uint32_t>(h), shared.data());
  });
  std::vector<lattice::SwitchedCiphertext> out(packed.size());
  for (size_t t = 0; t < packed.size(); ++t) {
    out[t].c0.assign(words.begin() + 2 * t * n, words.begin() + (2 * t + 1) * n);
    out[t].c1.assign(words.begin() + (2 * t + 1) * n, words.begin() + (2 * t + 2) * n);
  }
  return out;
}

}  // namespace veil::gpu
