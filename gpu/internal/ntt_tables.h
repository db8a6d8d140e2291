// Host side of the GPU NTT (no CUDA): the Montgomery-form tables the kernel reads, made from
// pir/he's NttTables.
#ifndef VEIL_GPU_INTERNAL_NTT_TABLES_H_
#define VEIL_GPU_INTERNAL_NTT_TABLES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpu/internal/ntt_phases.h"
#include "pir/he/ntt.h"

namespace veil::gpu::internal {

struct MontgomeryNttTables {
  int log_n = 0;
  uint64_t q = 0, q_inv = 0, n_inv_mont = 0;
  std::vector<uint64_t> roots, inverse_roots;  // w R mod q
  // For q below 2^32 (else empty and zero): the same with R = 2^32 (Ntt32Block).
  uint32_t q_inv32 = 0, n_inv_mont32 = 0;
  std::vector<uint32_t> roots32, inverse_roots32;

  // The kernel arguments for a transform of `batch` polynomials at `data`.
  NttArgs Args(bool inverse, uint64_t* data, uint32_t batch) const {
    return NttArgs{inverse ? inverse_roots.data() : roots.data(),
                   q,
                   q_inv,
                   n_inv_mont,
                   log_n,
                   inverse,
                   data,
                   batch};
  }
  // Ntt32Block's arguments (roots on the host; the caller may point them at a device copy).
  Ntt32Args Args32(bool inverse) const {
    return Ntt32Args{inverse ? inverse_roots32.data() : roots32.data(), static_cast<uint32_t>(q),
                     q_inv32, n_inv_mont32};
  }
};

// Returns INVALID_ARGUMENT if the tables' N exceeds 2^kNttMaxLogN.
absl::StatusOr<MontgomeryNttTables> MakeMontgomeryNttTables(const he::NttTables& tables);

// INVALID_ARGUMENT unless polys holds whole polynomials of the tables' N with residues below q.
absl::Status CheckNttPolys(const he::NttTables& tables, absl::Span<const uint64_t> polys);

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_NTT_TABLES_H_
