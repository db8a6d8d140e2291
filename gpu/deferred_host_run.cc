// Host side of the GPU's deferred switches (gpu/deferred.h): the plan and key arrays the kernel
// reads, shared with the device path, and the host run of its phases
// (gpu/internal/deferred_phases.h), as CI checks them without a GPU.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/deferred.h"
#include "gpu/internal/runners.h"
#include "pir/he/keyswitch.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu::internal {

absl::StatusOr<DeferredPlan> MakeDeferredPlan(const lattice::RingContext& ctx, uint32_t lwe_n,
                                              uint32_t levels, uint64_t groups) {
  if (absl::Status s = lattice::CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  if (levels == 0 || levels > lattice::DeferredLevels(lwe_n) || groups == 0 ||
      groups > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deferred switches of ", levels, " levels (1 to ", lattice::DeferredLevels(lwe_n),
        " for n = ", lwe_n, ") for ", groups, " groups (1 to 2^31 - 1)"));
  }
  // Every stage's blocks for a whole batch must fit one grid's x (DeferredStageBlocks is 32-bit):
  // per group, (2^D - 1) k, (2^D - 1) k (k + 1), (2^D - 1) 2, 2 (k + 1) and 2 k.
  const uint64_t k = ctx.k(), switches = (uint64_t{1} << levels) - 1;
  const uint64_t per_group =
      std::max({switches * k * (k + 1), switches * 2, 2 * (k + 1), 2 * k, switches * k});
  const uint64_t blocks = uint64_t{kExpansionMaxQueries} * groups * per_group;
  if (blocks > 0x7fffffff) {
    return absl::InvalidArgumentError(
        absl::StrCat("deferred switches for ", groups, " groups take ", blocks,
                     " blocks in a stage of a batch (at most 2^31 - 1): defer fewer levels"));
  }
  absl::StatusOr<QpTables> tables = MakeQpTables(ctx);
  if (!tables.ok()) return tables.status();
  DeferredPlan plan;
  static_cast<QpTables&>(plan) = *std::move(tables);
  plan.lwe_n = lwe_n;
  plan.levels = levels;
  plan.elements = 1u << levels;
  plan.groups = static_cast<uint32_t>(groups);
  for (uint32_t s = 1; s < plan.elements; ++s) {
    const std::vector<uint32_t>& perm =
        ctx.expansion()->GaloisPermutation(lattice::DeferredElement(ctx, lwe_n, levels, s));
    plan.perms.insert(plan.perms.end(), perm.begin(), perm.end());
  }
  return plan;
}

absl::StatusOr<ExpansionKeyArrays> MakeDeferredKeyArrays(const lattice::RingContext& ctx,
                                                         const DeferredPlan& plan,
                                                         const he::GaloisKeys& keys) {
  ExpansionKeyArrays out;
  for (uint32_t s = 1; s < plan.elements; ++s) {
    const uint32_t g = lattice::DeferredElement(ctx, plan.lwe_n, plan.levels, s);
    absl::StatusOr<const he::KeySwitchKey*> key =
        he::internal::FindGaloisKey(*ctx.expansion(), keys, g);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the expansion keys lack the Galois key of element ", g, ": ", key.status().message()));
    }
    out.key_b.insert(out.key_b.end(), (*key)->b.begin(), (*key)->b.end());
    out.key_a.insert(out.key_a.end(), (*key)->a.begin(), (*key)->a.end());
  }
  return out;
}

std::vector<absl::Status> HostRunDeferredSwitchesBatch(
    const DeferredPlan& plan, absl::Span<const ExpansionKeyArrays* const> keys,
    absl::Span<const absl::Span<const uint64_t>> virtual_sums,
    absl::Span<const absl::Span<uint64_t>> sums) {
  const size_t count = keys.size();
  std::vector<absl::Status> status(count);
  if (count == 0 || count > kExpansionMaxQueries || virtual_sums.size() != count ||
      sums.size() != count) {
    status.assign(count, absl::InvalidArgumentError(
                             absl::StrCat("deferred switches of ", count, " key arrays, ",
                                          virtual_sums.size(), " virtual sums and ", sums.size(),
                                          " sums (1 to ", kExpansionMaxQueries, " of each)")));
    return status;
  }
  const uint64_t n = uint64_t{1} << plan.log_n, half = uint64_t{plan.k} * n;
  const uint64_t key_words = DeferredKeyWords(plan);
  const uint64_t virtual_words = uint64_t{plan.groups} * plan.elements * 2 * half,
                 sum_words = uint64_t{plan.groups} * 2 * half;
  DeferredArrays arrays;
  std::vector<size_t> run;  // the queries switched, in order
  for (size_t q = 0; q < count; ++q) {
    if (virtual_sums[q].size() != virtual_words || sums[q].size() != sum_words ||
        keys[q]->key_b.size() != key_words || keys[q]->key_a.size() != key_words) {
      status[q] = absl::InvalidArgumentError(
          absl::StrCat("deferred switches: ", virtual_sums[q].size(), " virtual sums, ",
                       sums[q].size(), " sums and ", keys[q]->key_b.size(), " key words (expected ",
                       virtual_words, ", ", sum_words, " and ", key_words, ")"));
      continue;
    }
    run.push_back(q);
    arrays.key_b.push_back(keys[q]->key_b.data());
    arrays.key_a.push_back(keys[q]->key_a.data());
    arrays.sums.push_back(virtual_sums[q].data());
    arrays.out.push_back(sums[q].data());
  }
  if (run.empty()) return status;
  std::vector<uint64_t> scratch(
      run.size() * DeferredScratchWords(plan.k, plan.log_n, plan.groups, plan.elements));
  for (const MontgomeryNttTables& t : plan.tables) {
    arrays.roots.push_back(t.roots32.data());
    arrays.iroots.push_back(t.inverse_roots32.data());
  }
  arrays.perms = plan.perms.data();
  arrays.scratch = scratch.data();
  std::vector<uint32_t> shared(n);
  SequentialRunner runner;
  const absl::Status done = RunDeferredStages(
      plan, arrays, [&](const DeferredArgs& args, DeferredStage stage, uint32_t blocks) {
        HostLoop(blocks, [&](uint64_t b) {
          PoisonShared(shared);
          DeferredStageBlock(runner, args, stage, static_cast<uint32_t>(b), shared.data());
        });
        return absl::OkStatus();
      });
  for (size_t q : run) status[q] = done;
  return status;
}

absl::Status HostRunDeferredSwitches(const DeferredPlan& plan, const ExpansionKeyArrays& keys,
                                     absl::Span<const uint64_t> virtual_sums,
                                     absl::Span<uint64_t> sums) {
  const ExpansionKeyArrays* one = &keys;
  return HostRunDeferredSwitchesBatch(plan, {&one, 1}, {virtual_sums}, {sums}).front();
}

}  // namespace veil::gpu::internal
