// Host side of the GPU expansion (gpu/expansion.h): the plan the kernel reads (tables, keys,
// permutations, monomials), shared with the device path, and the host run of the kernel's
// phases (gpu/internal/expansion_phases.h), as CI checks them without a GPU.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/expansion.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/runners.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {
namespace internal {

absl::StatusOr<QpTables> MakeQpTables(const lattice::RingContext& ctx) {
  if (ctx.expansion() == nullptr) return absl::FailedPreconditionError("the ring has no P");
  if (ctx.k() + 1 > kExpansionMaxPrimes || ctx.params().log_n > kNttMaxLogN) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU key switch takes up to ", kExpansionMaxPrimes - 1,
                     " primes and N <= 2^", kNttMaxLogN, ", not ", ctx.k(), " and N = ", ctx.n()));
  }
  const he::BfvContext& qp = *ctx.expansion();
  QpTables out;
  out.log_n = static_cast<uint32_t>(ctx.params().log_n);
  out.k = static_cast<uint32_t>(ctx.k());
  for (size_t p = 0; p <= ctx.k(); ++p) {
    absl::StatusOr<MontgomeryNttTables> t = MakeMontgomeryNttTables(qp.ntt(p));
    if (!t.ok()) return t.status();
    if (t->roots32.empty()) {  // RingParams admits none such; the kernel's lanes need it
      return absl::InvalidArgumentError(absl::StrCat("prime ", t->q, " is not below 2^32"));
    }
    out.tables.push_back(*std::move(t));
    if (p < ctx.k()) {
      out.p_inv.push_back(qp.key_switch().p_inv_mod_q[p]);
      out.p_mod_q.push_back(qp.key_switch().p_mod_q[p]);
    }
  }
  return out;
}

QpArgs MakeQpArgs(const QpTables& t, absl::Span<const uint32_t* const> roots,
                  absl::Span<const uint32_t* const> iroots) {
  QpArgs args;
  args.log_n = t.log_n;
  args.k = t.k;
  for (uint32_t q = 0; q <= t.k; ++q) {
    args.forward[q] = t.tables[q].Args32(false);
    args.forward[q].roots = roots[q];
    args.inverse[q] = t.tables[q].Args32(true);
    args.inverse[q].roots = iroots[q];
    args.moduli[q] = t.tables[q].q;
    args.barrett[q] = ~uint64_t{0} / t.tables[q].q;  // floor(2^64 / q): q is odd
    if (q < t.k) {
      args.p_inv[q] = t.p_inv[q];
      args.p_mod_q[q] = t.p_mod_q[q];
    }
  }
  return args;
}

absl::StatusOr<ExpansionPlan> MakeExpansionPlan(const lattice::RingContext& ctx, uint32_t lwe_n) {
  if (absl::Status s = lattice::CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  absl::StatusOr<QpTables> tables = MakeQpTables(ctx);
  if (!tables.ok()) return tables.status();
  ExpansionPlan plan;
  static_cast<QpTables&>(plan) = *std::move(tables);
  plan.lwe_n = lwe_n;
  plan.levels = lattice::ExpansionLevels(lwe_n);
  const he::BfvContext& qp = *ctx.expansion();
  const size_t words = ctx.k() * ctx.n();
  const std::vector<uint32_t> elements = lattice::ExpansionElements(ctx, lwe_n);
  const std::vector<std::vector<uint64_t>>& monomials = ctx.inverse_monomials();
  for (uint32_t l = 0; l < plan.levels; ++l) {
    const std::vector<uint32_t>& perm = qp.GaloisPermutation(elements[l]);
    plan.perms.insert(plan.perms.end(), perm.begin(), perm.end());
    plan.monos.insert(plan.monos.end(), monomials[l].begin(), monomials[l].begin() + words);
  }
  return plan;
}

absl::StatusOr<ExpansionKeyArrays> MakeExpansionKeyArrays(const lattice::RingContext& ctx,
                                                          const he::GaloisKeys& keys,
                                                          uint32_t lwe_n) {
  absl::StatusOr<std::vector<const he::KeySwitchKey*>> level_keys =
      lattice::internal::ExpansionLevelKeys(ctx, keys, lwe_n);
  if (!level_keys.ok()) return level_keys.status();
  ExpansionKeyArrays out;
  for (const he::KeySwitchKey* key : *level_keys) {
    out.key_b.insert(out.key_b.end(), key->b.begin(), key->b.end());
    out.key_a.insert(out.key_a.end(), key->a.begin(), key->a.end());
  }
  return out;
}

uint32_t MaxExpansionNodes(const ExpansionPlan& plan) {
  return plan.levels == 0 ? 1 : std::min(1u << (plan.levels - 1), plan.lwe_n);
}

uint64_t ExpansionQueryStride(const ExpansionPlan& plan) {
  return uint64_t{plan.lwe_n} * 2 * plan.k << plan.log_n;
}

uint64_t ExpansionScratchStride(const ExpansionPlan& plan) {
  return uint64_t{MaxExpansionNodes(plan)} * ExpansionScratchRows(plan.k) << plan.log_n;
}

}  // namespace internal

namespace internal {

std::vector<absl::StatusOr<ExpandedKeys>> HostRunExpansionBatch(
    const lattice::RingContext& ctx, const ExpansionPlan& plan,
    absl::Span<const ExpansionKeyArrays* const> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts) {
  const size_t count = keys.size();
  std::vector<absl::StatusOr<ExpandedKeys>> out(count, ExpandedKeys{});
  if (count == 0 || count > kExpansionMaxQueries || ciphertexts.size() != count) {
    out.assign(count, absl::InvalidArgumentError(absl::StrCat(
                          "an expansion batch of ", count, " key arrays and ", ciphertexts.size(),
                          " ciphertexts (1 to ", kExpansionMaxQueries, " of each)")));
    return out;
  }
  const ExpansionPlan& p = plan;
  const uint64_t key_words = ExpansionKeyWords(p);
  const uint64_t stride = ExpansionQueryStride(p);
  std::vector<size_t> run;  // the queries expanded, in their slots' order
  std::vector<uint64_t> nodes[2];
  ExpansionArrays arrays;
  for (size_t q = 0; q < count; ++q) {
    if (keys[q]->key_b.size() != key_words || keys[q]->key_a.size() != key_words) {
      out[q] = absl::InvalidArgumentError("the expansion's key arrays are of another plan");
      continue;
    }
    absl::StatusOr<std::vector<uint64_t>> root =
        lattice::internal::SecretCiphertextRoot(ctx, ciphertexts[q]);
    if (!root.ok()) {
      out[q] = root.status();
      continue;
    }
    run.push_back(q);
    nodes[0].insert(nodes[0].end(), root->begin(), root->end());
    nodes[0].resize(run.size() * stride);
    arrays.key_b.push_back(keys[q]->key_b.data());
    arrays.key_a.push_back(keys[q]->key_a.data());
  }
  if (run.empty()) return out;
  nodes[1].resize(nodes[0].size());
  std::vector<uint64_t> scratch(run.size() * ExpansionScratchStride(p));
  for (const MontgomeryNttTables& t : p.tables) {
    arrays.roots.push_back(t.roots32.data());
    arrays.iroots.push_back(t.inverse_roots32.data());
  }
  arrays.perms = p.perms.data();
  arrays.monos = p.monos.data();
  arrays.nodes[0] = nodes[0].data();
  arrays.nodes[1] = nodes[1].data();
  arrays.scratch = scratch.data();
  std::vector<uint32_t> shared(uint64_t{1} << p.log_n);
  SequentialRunner runner;
  absl::StatusOr<uint64_t*> leaves = RunExpansionLevels(
      p, arrays, [&](const ExpansionArgs& args, ExpansionStage stage, uint32_t blocks) {
        HostLoop(blocks, [&](uint64_t b) {
          PoisonShared(shared);
          ExpansionStageBlock(runner, args, stage, static_cast<uint32_t>(b), shared.data());
        });
        return absl::OkStatus();
      });
  if (!leaves.ok()) {
    for (size_t q : run) out[q] = leaves.status();
    return out;
  }
  const std::vector<uint64_t>& done = nodes[*leaves == nodes[0].data() ? 0 : 1];
  for (size_t i = 0; i < run.size(); ++i) {
    out[run[i]] = ExpandedKeys{
        p.lwe_n, std::vector<uint64_t>(done.begin() + i * stride, done.begin() + (i + 1) * stride)};
  }
  return out;
}

}  // namespace internal

absl::StatusOr<ExpandedKeys> HostRunExpansion(const lattice::RingContext& ctx,
                                              const he::GaloisKeys& keys, uint32_t lwe_n,
                                              absl::Span<const uint8_t> ciphertext) {
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, lwe_n);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<internal::ExpansionKeyArrays> arrays =
      internal::MakeExpansionKeyArrays(ctx, keys, lwe_n);
  if (!arrays.ok()) return arrays.status();
  const internal::ExpansionKeyArrays* one = &*arrays;
  return std::move(internal::HostRunExpansionBatch(ctx, *plan, {&one, 1}, {ciphertext}).front());
}

}  // namespace veil::gpu
