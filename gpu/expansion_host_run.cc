// Host side of the GPU expansion (gpu/expansion.h): the plan the kernel reads (tables, keys,
// permutations, monomials), shared with the device path, and the host run of the kernel's
// phases (gpu/internal/expansion_phases.h), as CI checks them without a GPU.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpu/expansion.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/runners.h"
#include "pir/lattice/expansion.h"

namespace veil::gpu {
namespace internal {

absl::StatusOr<ExpansionPlan> MakeExpansionPlan(const lattice::RingContext& ctx,
                                                const he::GaloisKeys& keys, uint32_t lwe_n) {
  absl::StatusOr<lattice::internal::ExpansionLevelInputs> in =
      lattice::internal::PrepareExpansionLevels(ctx, keys, lwe_n);
  if (!in.ok()) return in.status();
  if (ctx.k() + 1 > kExpansionMaxPrimes || ctx.params().log_n > kNttMaxLogN) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU expansion takes up to ", kExpansionMaxPrimes - 1,
                     " primes and N <= 2^", kNttMaxLogN, ", not ", ctx.k(), " and N = ", ctx.n()));
  }
  const he::BfvContext& qp = *ctx.expansion();
  ExpansionPlan plan;
  plan.log_n = static_cast<uint32_t>(ctx.params().log_n);
  plan.k = static_cast<uint32_t>(ctx.k());
  plan.lwe_n = lwe_n;
  plan.levels = lattice::ExpansionLevels(lwe_n);
  for (size_t p = 0; p <= ctx.k(); ++p) {
    absl::StatusOr<MontgomeryNttTables> t = MakeMontgomeryNttTables(qp.ntt(p));
    if (!t.ok()) return t.status();
    plan.moduli.push_back(t->q);
    plan.q_inv.push_back(t->q_inv);
    plan.n_inv_mont.push_back(t->n_inv_mont);
    plan.roots.push_back(std::move(t->roots));
    plan.iroots.push_back(std::move(t->inverse_roots));
    if (p < ctx.k()) plan.p_inv.push_back(qp.key_switch().p_inv_mod_q[p]);
  }
  const size_t n = ctx.n(), words = ctx.k() * n;
  const std::vector<uint32_t> elements = lattice::ExpansionElements(ctx, lwe_n);
  for (uint32_t l = 0; l < plan.levels; ++l) {
    const he::KeySwitchKey& key = *in->keys[l];
    plan.key_b.insert(plan.key_b.end(), key.b.begin(), key.b.end());
    plan.key_a.insert(plan.key_a.end(), key.a.begin(), key.a.end());
    const std::vector<uint32_t>& perm = qp.GaloisPermutation(elements[l]);
    plan.perms.insert(plan.perms.end(), perm.begin(), perm.end());
    plan.monos.insert(plan.monos.end(), in->monomials[l].begin(), in->monomials[l].begin() + words);
  }
  return plan;
}

uint32_t MaxExpansionNodes(const ExpansionPlan& plan) {
  return plan.levels == 0 ? 1 : std::min(1u << (plan.levels - 1), plan.lwe_n);
}

}  // namespace internal

absl::StatusOr<ExpandedKeys> HostRunExpansion(const lattice::RingContext& ctx,
                                              const he::GaloisKeys& keys, uint32_t lwe_n,
                                              absl::Span<const uint8_t> ciphertext) {
  absl::StatusOr<internal::ExpansionPlan> plan = internal::MakeExpansionPlan(ctx, keys, lwe_n);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::vector<uint64_t>> root =
      lattice::internal::SecretCiphertextRoot(ctx, ciphertext);
  if (!root.ok()) return root.status();
  const internal::ExpansionPlan& p = *plan;
  const uint64_t n = ctx.n(), k = p.k, node_words = 2 * k * n;
  std::vector<uint64_t> cur = *std::move(root), next(uint64_t{lwe_n} * node_words);
  std::vector<uint64_t> scratch(uint64_t{internal::MaxExpansionNodes(p)} *
                                internal::ExpansionScratchRows(p.k) * n);
  std::vector<uint64_t> shared(n);
  internal::ExpansionArgs args;
  args.log_n = p.log_n;
  args.k = p.k;
  for (uint32_t q = 0; q <= p.k; ++q) {
    args.forward[q] =
        internal::NttArgs{p.roots[q].data(),         p.moduli[q], p.q_inv[q], p.n_inv_mont[q],
                          static_cast<int>(p.log_n), false,       nullptr,    1};
    args.inverse[q] = args.forward[q];
    args.inverse[q].roots = p.iroots[q].data();
    args.inverse[q].inverse = true;
    args.moduli[q] = p.moduli[q];
    if (q < p.k) args.p_inv[q] = p.p_inv[q];
  }
  args.scratch = scratch.data();
  internal::SequentialRunner run;
  uint32_t nodes = 1;
  for (uint32_t l = 0; l < p.levels; ++l) {
    const uint64_t key_words = k * (k + 1) * n;
    args.key_b = p.key_b.data() + l * key_words;
    args.key_a = p.key_a.data() + l * key_words;
    args.perm = p.perms.data() + l * n;
    args.mono = p.monos.data() + l * k * n;
    args.in = cur.data();
    args.out = next.data();
    args.nodes = nodes;
    args.children = std::min(2 * nodes, lwe_n);
    for (uint32_t node = 0; node < nodes; ++node) {
      internal::ExpansionNodeBlock(run, args, node, shared.data());
    }
    nodes = args.children;
    cur.swap(next);
    next.resize(uint64_t{lwe_n} * node_words);
  }
  cur.resize(uint64_t{lwe_n} * node_words);
  return ExpandedKeys{lwe_n, std::move(cur)};
}

}  // namespace veil::gpu
