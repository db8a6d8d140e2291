// ExpPack's per-query ring work on a CUDA device, as a packed server's lattice::PackingEngine
// (pir/lattice/packed.h): each query's secret ciphertext is expanded under its session's keys
// (gpu/expansion.h), which stay on the device per session (gpu/internal/key_cache.h), and the n
// leaves are summed against the packing matrix where they lie (gpu/packing.h); only the sums
// (ceil(D1 / N) x 2 k N residues) come back; the packed ciphertexts' switch to q' runs there
// too (GpuResponseSwitch). Bit for bit lattice::CpuPackingEngine's full expansion (no deferred
// levels: the CPU's default folds the bottom levels into its matrix, deferred_packing.h, which
// this engine does not yet); the servers' --backend=gpu (server/backend_select.h). This header
// includes no CUDA headers.
#ifndef VEIL_GPU_EXPPACK_H_
#define VEIL_GPU_EXPPACK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/expansion.h"
#include "gpu/internal/key_cache.h"
#include "gpu/packing.h"
#include "pir/lattice/packed.h"

namespace veil::gpu {

struct GpuPackingEngineOptions {
  int device = 0;
  // Sessions whose keys stay on the device (7.9 MB each at the default ring and n = 1,024); the
  // least recently used beyond it is uploaded again at its next query.
  size_t max_sessions = 64;
};

class GpuPackingEngine final : public lattice::PackingEngine {
 public:
  // Copies the matrix's transforms and the expansion's tables to the device and reserves the
  // expansion's buffers (2 n x 2 k N words). Neither argument need outlive the engine. Returns
  // GpuExpansion::Create's and GpuPackingSums::Create's errors.
  static absl::StatusOr<std::unique_ptr<GpuPackingEngine>> Create(
      const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
      const GpuPackingEngineOptions& options = {});

  std::string name() const override { return "gpu"; }
  // Returns INVALID_ARGUMENT for missing keys or sums of the wrong size, UploadKeys' and
  // ExpandThen's errors. `threads` is unused: the device does the work.
  absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                    absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const override;
  // GpuResponseSwitch's: the inverse NTT fused with the switch, on the same device.
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> Switch(
      absl::Span<const lattice::RlweCiphertext> packed) const override;

  size_t cached_sessions() const { return sessions_.size(); }

 private:
  GpuPackingEngine(std::unique_ptr<GpuExpansion> expansion, std::unique_ptr<GpuPackingSums> packing,
                   std::unique_ptr<GpuResponseSwitch> switcher, uint64_t sum_words,
                   size_t max_sessions)
      : expansion_(std::move(expansion)),
        packing_(std::move(packing)),
        switch_(std::move(switcher)),
        sum_words_(sum_words),
        sessions_(max_sessions) {}

  std::unique_ptr<GpuExpansion> expansion_;
  std::unique_ptr<GpuPackingSums> packing_;
  std::unique_ptr<GpuResponseSwitch> switch_;
  uint64_t sum_words_;
  mutable internal::SessionKeyCache<GpuExpansionKeys> sessions_;
};

// The same engine with the kernels' phases run on the host (CI): HostRunExpansionWith under each
// session's key arrays (cached as the device caches its keys), then HostRunSumLeaves; and
// HostRunSwitchResponse. Bit for bit the device's; far too slow to serve.
class HostRunPackingEngine final : public lattice::PackingEngine {
 public:
  // The ring and the matrix must outlive the engine. Returns MakeExpansionPlan's errors and
  // INVALID_ARGUMENT for a matrix of another ring.
  static absl::StatusOr<std::unique_ptr<HostRunPackingEngine>> Create(
      const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
      size_t max_sessions = 64);

  std::string name() const override { return "gpu-host-run"; }
  // GpuPackingEngine::Sums' errors.
  absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                    absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const override;
  // HostRunSwitchResponse.
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> Switch(
      absl::Span<const lattice::RlweCiphertext> packed) const override;

  // The session cache's state: entries held, and key sets made (uploads, on a device).
  size_t cached_sessions() const { return sessions_.size(); }
  uint64_t key_uploads() const { return sessions_.made(); }

 private:
  HostRunPackingEngine(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                       internal::ExpansionPlan plan, size_t max_sessions)
      : ctx_(ctx), matrix_(matrix), plan_(std::move(plan)), sessions_(max_sessions) {}

  const lattice::RingContext& ctx_;
  const lattice::PackingMatrix& matrix_;
  internal::ExpansionPlan plan_;
  mutable internal::SessionKeyCache<internal::ExpansionKeyArrays> sessions_;
};

}  // namespace veil::gpu

#endif  // VEIL_GPU_EXPPACK_H_
