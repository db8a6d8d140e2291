// Ring packing's sums (pir/lattice/packing.h) on a CUDA device: the transforms of a
// PackingMatrix live on the device, blocks of special ciphertexts go in and PackAccumulator's
// sums come out, bit for bit (the kernel: gpu/internal/packing_phases.h). A server packs with
// them as PackAccumulator does: PackedCiphertext(sums) per group, then SwitchResponse.
// This header includes no CUDA headers.
#ifndef VEIL_GPU_PACKING_H_
#define VEIL_GPU_PACKING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/switch_phases.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu {

class GpuPackingSums {
 public:
  // Copies the matrix's transforms to the device (matrix.bytes()); neither argument need outlive
  // the result. Returns INVALID_ARGUMENT for a matrix of another ring or 2^31 groups or more,
  // UNAVAILABLE without a device, RESOURCE_EXHAUSTED if device memory is short, INTERNAL
  // for other CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuPackingSums>> Create(
      const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix, int device = 0);
  ~GpuPackingSums();

  // sums (lattice::PackingSumWords, residues below their primes) += the keys index[0 .. count):
  // their halves beta and alpha, count x k x N residues each in NTT form (PackAccumulator::Add's
  // arguments, any count up to n). Returns INVALID_ARGUMENT for spans of the wrong size, an
  // index >= n or a residue not below its prime; INTERNAL for CUDA failures. Calls from several
  // threads run one after the other.
  absl::Status Accumulate(absl::Span<const uint32_t> index, absl::Span<const uint64_t> beta,
                          absl::Span<const uint64_t> alpha, absl::Span<uint64_t> sums) const;

  // The packing sums (lattice::PackingSumWords each) of all n special ciphertexts of 1 to
  // kMaxBatch queries in one pass over the matrix (the matrix read once for all, as the CPU's
  // DeferredPacking::SumsBatch streams its folded matrix once for several): leaves[i] is query
  // i's leaves' device address (GpuExpansion's layout on this object's device, unchanged during
  // the call), narrowed to 32-bit residues into the query's own key slot. Then use(sums) gets
  // the queries' sums' device addresses, complete and valid until `use` returns, and returns one
  // status per query, which this returns; INTERNAL for CUDA failures, INVALID_ARGUMENT for a
  // count outside [1, kMaxBatch] (for all). Calls from several threads run one after the other.
  static constexpr uint32_t kMaxBatch = 8;  // internal::kPackMaxQueries
  using UseSums =
      absl::FunctionRef<std::vector<absl::Status>(absl::Span<const uint64_t* const> sums)>;
  std::vector<absl::Status> SumLeavesBatchThen(absl::Span<const uint64_t* const> leaves,
                                               UseSums use) const;
  // sums = the sums at device address `device_sums` (SumLeavesBatchThen's, inside its `use`),
  // copied back. INVALID_ARGUMENT for sums of the wrong size, INTERNAL for CUDA failures.
  absl::Status CopySums(const uint64_t* device_sums, absl::Span<uint64_t> sums) const;

  int device() const;

  // Median seconds of `reps` launches that add all n keys (device-resident, arbitrary residues)
  // of `queries` queries (1 to kMaxBatch) to device-resident sums: one pass over the matrix,
  // as `queries` queries' packing in SumLeavesBatchThen. INVALID_ARGUMENT for other counts.
  absl::StatusOr<double> MeasurePass(int reps, uint32_t queries = 1) const;
  uint64_t matrix_bytes() const;

 private:
  struct Impl;
  explicit GpuPackingSums(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The packed response switched to q' on a device (lattice::SwitchResponse, bit for bit): one
// block per ciphertext half, the inverse NTT of its rows fused with the switch
// (gpu/internal/switch_phases.h).
class GpuResponseSwitch {
 public:
  // Copies the ring's inverse NTT tables to the device. Returns INVALID_ARGUMENT for N above
  // 2^12, UNAVAILABLE without a device, INTERNAL for CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuResponseSwitch>> Create(const lattice::RingContext& ctx,
                                                                   int device = 0);
  ~GpuResponseSwitch();
  // lattice::SwitchResponse's result. Returns INVALID_ARGUMENT for a ciphertext of the wrong size
  // or a residue not below its prime, INTERNAL for CUDA failures.
  absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> Switch(
      absl::Span<const lattice::RlweCiphertext> packed) const;
  // Median device seconds of `reps` switches of `count` ciphertexts (device-resident).
  absl::StatusOr<double> MeasureSwitch(uint32_t count, int reps) const;

 private:
  struct Impl;
  explicit GpuResponseSwitch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The kernels' phases run on the host, block by block and item by item (CI): the arguments and
// errors of Accumulate and of Switch, without the device.
absl::Status HostRunPackingSums(const lattice::RingContext& ctx,
                                const lattice::PackingMatrix& matrix,
                                absl::Span<const uint32_t> index, absl::Span<const uint64_t> beta,
                                absl::Span<const uint64_t> alpha, absl::Span<uint64_t> sums);
// One query's SumLeavesBatchThen on the host, over the leaves of HostRunExpansion (n x 2 k N
// words): the sums copied out.
absl::Status HostRunSumLeaves(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                              absl::Span<const uint64_t> leaves, absl::Span<uint64_t> sums);
// SumLeavesBatchThen's pass on the host: sums[q] = the sums of leaves[q], for 1 to
// GpuPackingSums::kMaxBatch queries in one pass. INVALID_ARGUMENT for other counts or sizes.
absl::Status HostRunSumLeavesBatch(const lattice::RingContext& ctx,
                                   const lattice::PackingMatrix& matrix,
                                   absl::Span<const absl::Span<const uint64_t>> leaves,
                                   absl::Span<const absl::Span<uint64_t>> sums);
absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> HostRunSwitchResponse(
    const lattice::RingContext& ctx, absl::Span<const lattice::RlweCiphertext> packed);

namespace internal {

// What the kernel needs of a ring and a matrix besides the matrix's residues.
struct PackingShape {
  std::vector<uint64_t> moduli, two64;  // q_p and 2^64 mod q_p
  uint32_t lwe_n = 0, slots = 0, log_n = 0;
  uint64_t groups = 0;
};
// Returns INVALID_ARGUMENT for a matrix of another ring.
absl::StatusOr<PackingShape> MakePackingShape(const lattice::RingContext& ctx,
                                              const lattice::PackingMatrix& matrix);
// Accumulate's checks; the keys narrowed to 32-bit residues, beta's then alpha's (the device's
// layout). Returns Accumulate's INVALID_ARGUMENT errors.
absl::StatusOr<std::vector<uint32_t>> CheckPackingInputs(const PackingShape& shape,
                                                         absl::Span<const uint32_t> index,
                                                         absl::Span<const uint64_t> beta,
                                                         absl::Span<const uint64_t> alpha,
                                                         absl::Span<const uint64_t> sums);

// The switch's constants per prime (inverse NTT tables in Montgomery form, (Q / q_i)^{-1} and
// floor(2^128 / q_i)) and the packed halves checked and laid out as the kernel reads them (half h
// of ciphertext t at (2 t + h) k N). Returns INVALID_ARGUMENT for N above 2^12, a ciphertext of
// the wrong size or a residue not below its prime.
struct SwitchPlan {
  uint32_t log_n = 0, k = 0;
  std::vector<MontgomeryNttTables> tables;  // Q's primes
  std::vector<uint64_t> punctured, punctured_shoup, ratio_hi, ratio_lo;
  uint64_t target = 0;
};
absl::StatusOr<SwitchPlan> MakeSwitchPlan(const lattice::RingContext& ctx);
// The kernel's arguments for the plan, its inverse roots at iroots[i] (the plan's own when
// empty: the host run); halves and out unset.
SwitchArgs MakeSwitchArgs(const SwitchPlan& plan, absl::Span<uint64_t* const> iroots);
absl::StatusOr<std::vector<uint64_t>> SwitchHalves(
    const lattice::RingContext& ctx, absl::Span<const lattice::RlweCiphertext> packed);

}  // namespace internal
}  // namespace veil::gpu

#endif  // VEIL_GPU_PACKING_H_
