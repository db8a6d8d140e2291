// Negacyclic NTTs on a CUDA device for N <= 2^12 (N = 4096 is the size the lattice backend and
// BFV at N = 4096 use), mod one prime below 2^62: one kernel launch per batch, one thread block
// per transform, Montgomery arithmetic in shared memory (gpu/internal/ntt_phases.h). Results equal
// he::NttTables::Forward / Inverse bit for bit. No CUDA types in this header.
#ifndef VEIL_GPU_NTT_H_
#define VEIL_GPU_NTT_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/ntt.h"

namespace veil::gpu {

class GpuNtt {
 public:
  // Returns INVALID_ARGUMENT if N > 2^12, UNAVAILABLE without a device, INTERNAL (or
  // RESOURCE_EXHAUSTED) for CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuNtt>> Create(const he::NttTables& tables,
                                                        int device = 0);
  ~GpuNtt();

  // In place on host memory (copied to the device and back): polys holds whole polynomials of N
  // residues below q. INVALID_ARGUMENT otherwise.
  absl::Status Forward(absl::Span<uint64_t> polys);
  absl::Status Inverse(absl::Span<uint64_t> polys);

  struct Throughput {
    double transforms_per_s = 0;  // device-resident batches, launch to launch (CUDA events)
    double mul_add_per_s = 0;     // Montgomery multiply-adds per second, same device, same run
    double butterflies_per_transform = 0;
  };
  // `reps` launches of `batch` transforms (forward or inverse) on device-resident data.
  absl::StatusOr<Throughput> Measure(uint32_t batch, int reps, bool inverse);

 private:
  struct Impl;
  explicit GpuNtt(std::unique_ptr<Impl> impl);
  absl::Status Run(absl::Span<uint64_t> polys, bool inverse);
  std::unique_ptr<Impl> impl_;
};

// The kernel's phases run on the host, block by block and item by item (CI). Same arguments and
// errors (without the device ones).
absl::Status HostRunNtt(const he::NttTables& tables, bool inverse, absl::Span<uint64_t> polys);

}  // namespace veil::gpu

#endif  // VEIL_GPU_NTT_H_
