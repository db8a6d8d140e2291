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
};

// Returns INVALID_ARGUMENT if the tables' N exceeds 2^kNttMaxLogN.
absl::StatusOr<MontgomeryNttTables> MakeMontgomeryNttTables(const he::NttTables& tables);

// INVALID_ARGUMENT unless polys holds whole polynomials of the tables' N with residues below q.
absl::Status CheckNttPolys(const he::NttTables& tables, absl::Span<const uint64_t> polys);

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_NTT_TABLES_H_
