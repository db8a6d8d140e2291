// ExpPack's expansion (pir/lattice/expansion.h) on a CUDA device: one RLWE ciphertext of a query's
// LWE secret becomes the n special ciphertexts K_j, level by level, five launches per level of
// several blocks per node (gpu/internal/expansion_phases.h), equal to ExpandLweSecret's leaves bit
// for bit. The session's keys live on the device. This header includes no CUDA headers.
#ifndef VEIL_GPU_EXPANSION_H_
#define VEIL_GPU_EXPANSION_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/internal/expansion_phases.h"
#include "gpu/internal/ntt_tables.h"
#include "pir/he/bfv.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu {

// The leaves: K_j's halves (beta_j, then alpha_j; k x N residues each, NTT form over Q) for
// j < n, leaf-major: 2 k N words per leaf.
struct ExpandedKeys {
  uint32_t lwe_n = 0;
  std::vector<uint64_t> leaves;
};

namespace internal {
struct ExpansionKeyArrays;
}  // namespace internal

// One session's key arrays on a device, freed with the object: the levels' (GpuExpansion::
// UploadKeys: levels x k (k + 1) N x 16 bytes, 7.9 MB at the default ring and n = 1,024) or the
// deferred elements' (GpuDeferredSwitches::UploadKeys, gpu/deferred.h).
class GpuExpansionKeys {
 public:
  ~GpuExpansionKeys();
  GpuExpansionKeys(const GpuExpansionKeys&) = delete;
  GpuExpansionKeys& operator=(const GpuExpansionKeys&) = delete;
  uint64_t bytes() const { return 2 * words_ * sizeof(uint64_t); }

 private:
  friend class GpuExpansion;
  friend class GpuDeferredSwitches;
  GpuExpansionKeys() = default;
  // The arrays on `device`, made for `owner`.
  static absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> Upload(
      const internal::ExpansionKeyArrays& arrays, const void* owner, int device);
  // Whether these are `owner`'s arrays of `words` words each: the address alone could match keys
  // of an object freed before `owner` was made.
  bool MadeFor(const void* owner, uint64_t words) const {
    return owner_ == owner && words_ == words;
  }
  const void* owner_ = nullptr;  // the object that made them
  int device_ = 0;
  uint64_t words_ = 0;
  uint64_t* key_b_ = nullptr;
  uint64_t* key_a_ = nullptr;
};

class GpuExpansion {
 public:
  static constexpr uint32_t kMaxBatch = internal::kExpansionMaxQueries;

  // Copies the Galois permutations and the NTT tables to the device and reserves the levels'
  // buffers for `max_batch` queries expanded side by side (per query 2 n nodes of 2 k N words
  // and the scratch). Returns MakeExpansionPlan's errors, INVALID_ARGUMENT for a max_batch
  // outside [1, kMaxBatch], UNAVAILABLE without a device, RESOURCE_EXHAUSTED if device memory
  // is short, INTERNAL for other CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuExpansion>> Create(const lattice::RingContext& ctx,
                                                              uint32_t lwe_n, int device = 0,
                                                              uint32_t max_batch = 1);
  // The same, and UploadKeys(keys) for Expand and MeasureExpand.
  static absl::StatusOr<std::unique_ptr<GpuExpansion>> Create(const lattice::RingContext& ctx,
                                                              const he::GaloisKeys& keys,
                                                              uint32_t lwe_n, int device = 0,
                                                              uint32_t max_batch = 1);
  ~GpuExpansion();

  // A session's level keys (of ParseExpansionKeys for lwe_n) on this device. Returns
  // MakeExpansionKeyArrays' errors, RESOURCE_EXHAUSTED if device memory is short, INTERNAL for
  // other CUDA failures.
  absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> UploadKeys(const he::GaloisKeys& keys) const;

  // Expands up to max_batch queries' ciphertexts (EncryptLweSecret's wire form), query q under
  // keys[q], side by side (every level's launches take all of their nodes), and calls
  // use(expanded, leaves) once: the indices of the queries expanded, in order, and each one's
  // leaves' device address (ExpandedKeys' layout), complete and not overwritten before `use`
  // returns (calls from several threads run one after the other). One status per query:
  // SecretCiphertextRoot's errors for its ciphertext or INVALID_ARGUMENT for keys of another
  // GpuExpansion (the query left out), INTERNAL for CUDA failures, else OK; INVALID_ARGUMENT for
  // all when the spans disagree or hold no query or more than max_batch.
  std::vector<absl::Status> ExpandBatchThen(
      absl::Span<const GpuExpansionKeys* const> keys,
      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
      absl::FunctionRef<void(absl::Span<const size_t> expanded,
                             absl::Span<const uint64_t* const> leaves)>
          use) const;
  // One query's: ExpandBatchThen's status, else use(leaves)'s.
  absl::Status ExpandThen(const GpuExpansionKeys& keys, absl::Span<const uint8_t> ciphertext,
                          absl::FunctionRef<absl::Status(const uint64_t* leaves)> use) const;

  // With Create's keys: the leaves of one query's ciphertext, copied back. Returns ExpandThen's
  // errors, FAILED_PRECONDITION if Create had no keys.
  absl::StatusOr<ExpandedKeys> Expand(absl::Span<const uint8_t> ciphertext) const;
  // Median device seconds of `reps` expansions of `queries` copies of `ciphertext` side by side
  // (1 to max_batch; the leaves stay on the device).
  absl::StatusOr<double> MeasureExpand(absl::Span<const uint8_t> ciphertext, int reps,
                                       uint32_t queries = 1) const;

  int device() const;

 private:
  struct Impl;
  explicit GpuExpansion(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The kernel's phases run on the host, level by level, block by block and item by item (CI).
// GpuExpansion::Expand's arguments and errors, without the device.
absl::StatusOr<ExpandedKeys> HostRunExpansion(const lattice::RingContext& ctx,
                                              const he::GaloisKeys& keys, uint32_t lwe_n,
                                              absl::Span<const uint8_t> ciphertext);

namespace internal {

// What a key switch over QP reads of its primes: per-prime Montgomery NTT tables (Q's primes,
// then P; the transforms in 32-bit lanes: every prime of a lattice ring is below 2^32), P^{-1}
// and P modulo each q_j. Returns FAILED_PRECONDITION for a ring without P, INVALID_ARGUMENT for
// rings of more than 3 primes or N above 2^12.
struct QpTables {
  uint32_t log_n = 0, k = 0;
  std::vector<MontgomeryNttTables> tables;  // k + 1: Q's primes, then P
  std::vector<uint64_t> p_inv, p_mod_q;     // k each
};
absl::StatusOr<QpTables> MakeQpTables(const lattice::RingContext& ctx);
// The kernels' arguments for the tables, their roots at roots[q] and iroots[q] (k + 1 each).
QpArgs MakeQpArgs(const QpTables& t, absl::Span<const uint32_t* const> roots,
                  absl::Span<const uint32_t* const> iroots);

// The device-independent part of an expansion that no session's keys change: the QP tables and
// the per-level permutations and monomials, laid out as the kernel reads them. Returns
// CheckExpansion's and MakeQpTables' errors.
struct ExpansionPlan : QpTables {
  uint32_t lwe_n = 0, levels = 0;
  std::vector<uint32_t> perms;  // level-major, N each
  std::vector<uint64_t> monos;  // level-major, k N each (X^{-2^l}, NTT form)
};
absl::StatusOr<ExpansionPlan> MakeExpansionPlan(const lattice::RingContext& ctx, uint32_t lwe_n);
// A session's level keys as the kernel reads them: level-major, k (k + 1) N residues each.
// Returns lattice::internal::ExpansionLevelKeys' errors (keys lacking a level's element).
struct ExpansionKeyArrays {
  std::vector<uint64_t> key_b, key_a;
};
// The words of each of a session's two key arrays for `plan`.
inline uint64_t ExpansionKeyWords(const ExpansionPlan& plan) {
  return uint64_t{plan.levels} * plan.k * (plan.k + 1) << plan.log_n;
}
absl::StatusOr<ExpansionKeyArrays> MakeExpansionKeyArrays(const lattice::RingContext& ctx,
                                                          const he::GaloisKeys& keys,
                                                          uint32_t lwe_n);
// HostRunExpansion for a plan and 1 to kExpansionMaxQueries queries, each under its session's key
// arrays (of the same ring and n), expanded side by side as GpuExpansion::ExpandBatchThen does:
// each query's leaves, or SecretCiphertextRoot's error for its ciphertext, or INVALID_ARGUMENT
// for key arrays of another plan (such queries are left out of the run). INVALID_ARGUMENT for
// all when the spans disagree or hold no query or too many.
std::vector<absl::StatusOr<ExpandedKeys>> HostRunExpansionBatch(
    const lattice::RingContext& ctx, const ExpansionPlan& plan,
    absl::Span<const ExpansionKeyArrays* const> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts);
// Nodes at the largest level (the buffers' size): min(2^(levels - 1), n), at least 1.
uint32_t MaxExpansionNodes(const ExpansionPlan& plan);

// Where a run's arrays live: the plan's own (the host run) or their device copies.
struct ExpansionArrays {
  // Per prime: the tables' 32-bit forward and inverse roots.
  std::vector<const uint32_t*> roots, iroots;
  // Per query (1 to kExpansionMaxQueries): its session's level keys.
  std::vector<const uint64_t*> key_b, key_a;
  const uint32_t* perms = nullptr;
  const uint64_t* monos = nullptr;
  // n nodes per query each, query q's ExpansionQueryStride(plan) words after query q - 1's; the
  // roots at nodes[0].
  uint64_t* nodes[2] = {nullptr, nullptr};
  // Per query: MaxExpansionNodes x ExpansionScratchRows rows of N (ExpansionScratchStride).
  uint64_t* scratch = nullptr;
};
// The words of one query's nodes (n nodes of 2 k N words) and of its scratch.
uint64_t ExpansionQueryStride(const ExpansionPlan& plan);
uint64_t ExpansionScratchStride(const ExpansionPlan& plan);

// The level loop of the host run and of the device: level l's arguments from the arrays (every
// query's, a.key_b.size() of them, 1 to kExpansionMaxQueries), then launch(args, stage, blocks)
// for each of its stages, in order (an absl::Status). Returns the buffer of the leaves.
template <class Launch>
absl::StatusOr<uint64_t*> RunExpansionLevels(const ExpansionPlan& p, const ExpansionArrays& a,
                                             Launch&& launch) {
  const uint64_t n = uint64_t{1} << p.log_n, key_words = uint64_t{p.k} * (p.k + 1) * n;
  ExpansionArgs args;
  static_cast<QpArgs&>(args) = MakeQpArgs(p, a.roots, a.iroots);
  args.queries = static_cast<uint32_t>(a.key_b.size());
  args.query_stride = ExpansionQueryStride(p);
  args.scratch_stride = ExpansionScratchStride(p);
  args.scratch = a.scratch;
  uint32_t nodes = 1;
  int cur = 0;
  for (uint32_t l = 0; l < p.levels; ++l) {
    for (uint32_t q = 0; q < args.queries; ++q) {
      args.key_b[q] = a.key_b[q] + l * key_words;
      args.key_a[q] = a.key_a[q] + l * key_words;
    }
    args.perm = a.perms + l * n;
    args.mono = a.monos + l * p.k * n;
    args.in = a.nodes[cur];
    args.out = a.nodes[1 - cur];
    args.nodes = nodes;
    args.children = std::min(2 * nodes, p.lwe_n);
    for (uint32_t stage = 0; stage < kExpansionStages; ++stage) {
      const auto st = static_cast<ExpansionStage>(stage);
      if (absl::Status s =
              launch(static_cast<const ExpansionArgs&>(args), st, ExpansionStageBlocks(args, st));
          !s.ok()) {
        return s;
      }
    }
    nodes = args.children;
    cur = 1 - cur;
  }
  return a.nodes[cur];
}

}  // namespace internal
}  // namespace veil::gpu

#endif  // VEIL_GPU_EXPANSION_H_
