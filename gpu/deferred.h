// The deferred levels' key switches of ExpPack's packing (pir/lattice/deferred_packing.h) on a
// CUDA device: the virtual groups' sums against the folded matrix (GpuPackingSums over
// DeferredPacking::FoldedMatrix) go in where they lie, each group's packing sums come out,
// lattice::DeferredPacking::Sums' bit for bit (the kernel: gpu/internal/deferred_phases.h).
// This header includes no CUDA headers.
#ifndef VEIL_GPU_DEFERRED_H_
#define VEIL_GPU_DEFERRED_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/expansion.h"
#include "gpu/internal/deferred_phases.h"
#include "pir/he/bfv.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu {

namespace internal {

// What no session's keys change: the QP tables and the elements' permutations (s >= 1, N
// each). Returns MakeQpTables' and CheckExpansion's errors, INVALID_ARGUMENT for levels 0 or
// above min(kDeferredLevels, L), for 2^31 groups or more and for groups whose digit stage would
// take more than 2^31 - 1 blocks for kExpansionMaxQueries queries.
struct DeferredPlan : QpTables {
  uint32_t lwe_n = 0, levels = 0, elements = 0;
  uint32_t groups = 0;
  std::vector<uint32_t> perms;
};
absl::StatusOr<DeferredPlan> MakeDeferredPlan(const lattice::RingContext& ctx, uint32_t lwe_n,
                                              uint32_t levels, uint64_t groups);
// A session's keys of the elements s >= 1, s-major (ExpansionKeyArrays' layout). Returns
// INVALID_ARGUMENT for keys lacking one.
absl::StatusOr<ExpansionKeyArrays> MakeDeferredKeyArrays(const lattice::RingContext& ctx,
                                                         const DeferredPlan& plan,
                                                         const he::GaloisKeys& keys);
// The words of each of a session's two key arrays for `plan`.
inline uint64_t DeferredKeyWords(const DeferredPlan& plan) {
  return uint64_t{plan.elements - 1} * plan.k * (plan.k + 1) << plan.log_n;
}

// Where a run's arrays live: the plan's own (the host run) or their device copies.
struct DeferredArrays {
  std::vector<const uint32_t*> roots, iroots;  // per prime of QP
  // Per query (1 to kExpansionMaxQueries): its session's element keys, its virtual groups' sums
  // and its groups' sums (the output).
  std::vector<const uint64_t*> key_b, key_a, sums;
  std::vector<uint64_t*> out;
  const uint32_t* perms = nullptr;
  uint64_t* scratch = nullptr;  // DeferredScratchWords per query
};

// The stages of the host run and of the device: launch(args, stage, blocks) for each stage with
// blocks, in order (an absl::Status).
template <class Launch>
absl::Status RunDeferredStages(const DeferredPlan& p, const DeferredArrays& a, Launch&& launch) {
  DeferredArgs args;
  static_cast<QpArgs&>(args) = MakeQpArgs(p, a.roots, a.iroots);
  args.groups = p.groups;
  args.elements = p.elements;
  args.queries = static_cast<uint32_t>(a.key_b.size());
  args.scratch_stride = DeferredScratchWords(p.k, p.log_n, p.groups, p.elements);
  for (uint32_t q = 0; q < args.queries; ++q) {
    args.key_b[q] = a.key_b[q];
    args.key_a[q] = a.key_a[q];
    args.sums[q] = a.sums[q];
    args.out[q] = a.out[q];
  }
  args.perms = a.perms;
  args.scratch = a.scratch;
  for (uint32_t stage = 0; stage < kDeferredStages; ++stage) {
    const auto st = static_cast<DeferredStage>(stage);
    const uint32_t blocks = DeferredStageBlocks(args, st);
    if (blocks == 0) continue;
    if (absl::Status s = launch(static_cast<const DeferredArgs&>(args), st, blocks); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The stages' phases on the host (CI) for 1 to kExpansionMaxQueries queries side by side, as
// GpuDeferredSwitches::FinishBatch: sums[q] (the groups', PackingSumWords) from query q's
// virtual groups' (G 2^D x 2 k N) under keys[q]. One status per query: INVALID_ARGUMENT for
// spans of other sizes or key arrays of another plan (the query left out), for all when the
// spans disagree or hold no query or too many.
std::vector<absl::Status> HostRunDeferredSwitchesBatch(
    const DeferredPlan& plan, absl::Span<const ExpansionKeyArrays* const> keys,
    absl::Span<const absl::Span<const uint64_t>> virtual_sums,
    absl::Span<const absl::Span<uint64_t>> sums);
// One query's.
absl::Status HostRunDeferredSwitches(const DeferredPlan& plan, const ExpansionKeyArrays& keys,
                                     absl::Span<const uint64_t> virtual_sums,
                                     absl::Span<uint64_t> sums);

}  // namespace internal

class GpuDeferredSwitches {
 public:
  // Copies the plan's tables and permutations to the device and reserves the scratch of
  // `max_batch` queries (DeferredScratchWords each: 68 MB at G = 6 and D = 4). Returns
  // MakeDeferredPlan's errors, INVALID_ARGUMENT for max_batch outside [1,
  // kExpansionMaxQueries], UNAVAILABLE without a device, RESOURCE_EXHAUSTED if device memory is
  // short, INTERNAL for other CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuDeferredSwitches>> Create(
      const lattice::RingContext& ctx, uint32_t lwe_n, uint32_t levels, uint64_t groups,
      int device = 0, uint32_t max_batch = 1);
  ~GpuDeferredSwitches();

  // A session's element keys on this device. Returns MakeDeferredKeyArrays' errors,
  // RESOURCE_EXHAUSTED if device memory is short, INTERNAL for other CUDA failures.
  absl::StatusOr<std::unique_ptr<GpuExpansionKeys>> UploadKeys(const he::GaloisKeys& keys) const;

  // For up to max_batch queries side by side: sums[q] (PackingSumWords of the groups) from
  // query q's virtual groups' sums at device address virtual_sums[q] (G 2^D x 2 k N residues,
  // unchanged during the call) under keys[q], copied back. One status per query:
  // INVALID_ARGUMENT for sums of the wrong size or keys of another object (the query left out),
  // INTERNAL for CUDA failures; INVALID_ARGUMENT for all when the spans disagree or hold no
  // query or more than max_batch. Calls from several threads run one after the other.
  std::vector<absl::Status> FinishBatch(absl::Span<const GpuExpansionKeys* const> keys,
                                        absl::Span<const uint64_t* const> virtual_sums,
                                        absl::Span<const absl::Span<uint64_t>> sums) const;

 private:
  struct Impl;
  explicit GpuDeferredSwitches(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace veil::gpu

#endif  // VEIL_GPU_DEFERRED_H_
