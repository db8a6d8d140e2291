// ExpPack's per-query ring work on a CUDA device, as a packed server's lattice::PackingEngine
// (pir/lattice/packed.h), bit for bit lattice::CpuPackingEngine's with as many levels deferred.
// With D levels deferred (the default, as on the CPU: deferred_packing.h) each query's secret
// ciphertext is expanded to the 2^(L-D) roots only (gpu/expansion.h), which are summed against
// the folded matrix where they lie (gpu/packing.h), and each group's 2^D - 1 rotated sums are
// key-switched, summed and ModDown'ed once there too (gpu/deferred.h); with none, the n leaves
// are summed against the packing matrix. Each session's keys stay on the device
// (gpu/internal/key_cache.h); only the sums (ceil(D1 / N) x 2 k N residues) come back; the packed
// ciphertexts' switch to q' runs there too (GpuResponseSwitch). The servers' --backend=gpu
// (server/backend_select.h). This header includes no CUDA headers.
#ifndef VEIL_GPU_EXPPACK_H_
#define VEIL_GPU_EXPPACK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/deferred.h"
#include "gpu/expansion.h"
#include "gpu/internal/key_cache.h"
#include "gpu/packing.h"
#include "pir/lattice/packed.h"

namespace veil::gpu {

struct GpuPackingEngineOptions {
  int device = 0;
  // Sessions whose keys stay on the device (786 KB a key at the default ring: 10 levels' fully
  // expanding, 21 with four levels deferred, 14 with three); the least recently used beyond it
  // is uploaded again at its next query.
  size_t max_sessions = 64;
  // Levels deferred (lattice::EngineDeferredLevels of it), as lattice::CpuPackingEngine's
  // argument: the same number gives the same bits. 0: the full expansion.
  uint32_t deferred_levels = lattice::kDeferredLevels;
  // Threads that fold the matrix at Create (the host's work: G 2^D n polynomial multiply-adds).
  int fold_threads = 1;
  // Queries expanded, summed and switched together (1 to GpuPackingSums::kMaxBatch; SumsBatch's
  // chunks). Each adds the expansion's buffers and the switches' scratch: about 125 MB at
  // 2^24 x 64 B with four levels deferred, 890 MB at n = 1,024 fully expanding.
  uint32_t max_batch = 8;
};

namespace internal {
// A session's key arrays: the expansion's levels (of the roots' tree when levels are deferred)
// and the deferred elements' (empty without).
template <class Keys>
struct SessionKeys {
  std::unique_ptr<Keys> levels, deferred;
};

// What the device engine and its host run share: Sums is a batch of one, and SumsBatch checks the
// spans (CheckSumsBatch's error for all when they disagree) and hands SumsChunk up to `chunk`
// queries at a time (1 to GpuPackingSums::kMaxBatch: expanded together, one pass over the matrix
// each). `threads` is checked, not used: the device does the work.
class ChunkedPackingEngine : public lattice::PackingEngine {
 public:
  explicit ChunkedPackingEngine(uint32_t chunk) : chunk_(chunk) {}
  absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                    absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const final;
  std::vector<absl::Status> SumsBatch(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                                      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                      absl::Span<const absl::Span<uint64_t>> sums,
                                      int threads) const final;

 protected:
  // out[q] = query q's status (the spans in step, 1 to `chunk` queries): the queries expanded
  // side by side (those that fail are left out), one pass over the matrix for them, then each
  // one's deferred switches.
  virtual void SumsChunk(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                         absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                         absl::Span<const absl::Span<uint64_t>> sums,
                         absl::Span<absl::Status> out) const = 0;

 private:
  uint32_t chunk_;
};
}  // namespace internal

class GpuPackingEngine final : public internal::ChunkedPackingEngine {
 public:
  // Folds the matrix (levels deferred) and copies its transforms and the expansion's and
  // switches' tables to the device, reserving their buffers. Neither argument need outlive the
  // engine. Returns DeferredPacking::FoldedMatrix's, GpuExpansion::Create's,
  // GpuPackingSums::Create's and GpuDeferredSwitches::Create's errors.
  static absl::StatusOr<std::unique_ptr<GpuPackingEngine>> Create(
      const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
      const GpuPackingEngineOptions& options = {});

  std::string name() const override { return "gpu"; }
  // Sums and SumsBatch (ChunkedPackingEngine): up to max_batch queries expanded side by side on
  // the device (GpuExpansion::ExpandBatchThen), then one pass of the packing kernel over the
  // (folded) matrix for them (GpuPackingSums::SumLeavesBatchThen), then each one's deferred
  // switches; bit for bit the CPU engine's sums. A query fails alone with INVALID_ARGUMENT for
  // missing keys or sums of the wrong size, or UploadKeys', ExpandBatchThen's or the switches'
  // errors.

  // GpuResponseSwitch's: the inverse NTT fused with the switch, on the same device.
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> Switch(
      absl::Span<const lattice::RlweCiphertext> packed, int threads) const override;
  // The keys' 64-bit words go to the device.
  bool host_switching() const override { return false; }

  uint32_t deferred_levels() const { return deferred_ ? levels_ : 0; }
  size_t cached_sessions() const { return sessions_.size(); }

 private:
  using Keys = internal::SessionKeys<GpuExpansionKeys>;
  void SumsChunk(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                 absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                 absl::Span<const absl::Span<uint64_t>> sums,
                 absl::Span<absl::Status> out) const override;
  // The session's keys on the device: cached, or uploaded (and cached if owned).
  absl::StatusOr<std::shared_ptr<const Keys>> Session(
      const std::shared_ptr<const he::GaloisKeys>& keys) const;
  GpuPackingEngine(std::unique_ptr<GpuExpansion> expansion, std::unique_ptr<GpuPackingSums> packing,
                   std::unique_ptr<GpuDeferredSwitches> deferred, uint32_t levels,
                   std::unique_ptr<GpuResponseSwitch> switcher, uint64_t sum_words,
                   size_t max_sessions, uint32_t batch)
      : ChunkedPackingEngine(batch),
        expansion_(std::move(expansion)),
        packing_(std::move(packing)),
        deferred_(std::move(deferred)),
        levels_(levels),
        switch_(std::move(switcher)),
        sum_words_(sum_words),
        sessions_(max_sessions) {}

  std::unique_ptr<GpuExpansion> expansion_;
  std::unique_ptr<GpuPackingSums> packing_;        // of the folded matrix when levels are deferred
  std::unique_ptr<GpuDeferredSwitches> deferred_;  // null without
  uint32_t levels_;
  std::unique_ptr<GpuResponseSwitch> switch_;
  uint64_t sum_words_;
  mutable internal::SessionKeyCache<Keys> sessions_;
};

// The same engine with the kernels' phases run on the host (CI): HostRunExpansionWith under each
// session's key arrays (cached as the device caches its keys), HostRunSumLeaves, and with levels
// deferred HostRunDeferredSwitches; HostRunSwitchResponse. Bit for bit the device's; far too slow
// to serve.
class HostRunPackingEngine final : public internal::ChunkedPackingEngine {
 public:
  // The ring and the matrix must outlive the engine. Returns MakeExpansionPlan's,
  // DeferredPacking::FoldedMatrix's and MakeDeferredPlan's errors and INVALID_ARGUMENT for a
  // matrix of another ring.
  static absl::StatusOr<std::unique_ptr<HostRunPackingEngine>> Create(
      const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
      size_t max_sessions = 64, uint32_t deferred_levels = lattice::kDeferredLevels);

  std::string name() const override { return "gpu-host-run"; }
  // Sums and SumsBatch: GpuPackingEngine's, each chunk's sums in one host-run pass
  // (HostRunSumLeavesBatch); the same errors.

  // HostRunSwitchResponse.
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> Switch(
      absl::Span<const lattice::RlweCiphertext> packed, int threads) const override;
  // The keys' 64-bit words go to the device.
  bool host_switching() const override { return false; }

  uint32_t deferred_levels() const { return deferred_ ? deferred_->levels : 0; }
  // The session cache's state: entries held, and key sets made (uploads, on a device).
  size_t cached_sessions() const { return sessions_.size(); }
  uint64_t key_uploads() const { return sessions_.made(); }

 private:
  using Keys = internal::SessionKeys<internal::ExpansionKeyArrays>;
  void SumsChunk(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                 absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                 absl::Span<const absl::Span<uint64_t>> sums,
                 absl::Span<absl::Status> out) const override;
  absl::StatusOr<std::shared_ptr<const Keys>> Session(
      const std::shared_ptr<const he::GaloisKeys>& keys) const;
  HostRunPackingEngine(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                       internal::ExpansionPlan plan, std::optional<lattice::PackingMatrix> folded,
                       std::optional<internal::DeferredPlan> deferred, size_t max_sessions)
      : ChunkedPackingEngine(GpuPackingSums::kMaxBatch),
        ctx_(ctx),
        matrix_(matrix),
        plan_(std::move(plan)),
        folded_(std::move(folded)),
        deferred_(std::move(deferred)),
        sessions_(max_sessions) {}

  const lattice::RingContext& ctx_;
  const lattice::PackingMatrix& matrix_;
  internal::ExpansionPlan plan_;  // of the roots' tree when levels are deferred
  std::optional<lattice::PackingMatrix> folded_;
  std::optional<internal::DeferredPlan> deferred_;
  mutable internal::SessionKeyCache<Keys> sessions_;
};

}  // namespace veil::gpu

#endif  // VEIL_GPU_EXPPACK_H_
