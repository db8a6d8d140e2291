// Batched modular products on the GPU: the aggregation step of Paillier (the product mod n^2 of
// many ciphertexts is the encryption of the sum of their plaintexts), column by column over rows
// of reports, as QHCS's aggregator sums clients' encrypted matrices. Multi-precision Montgomery
// multiplication with 32-bit limbs (gpu/internal/montgomery.h); no GMP, no CUDA types here.
//
// HostRunModularProduct runs the kernels' phases on the CPU (CI checks them against GMP);
// GpuModularProduct (built with CUDA only) runs them on a device. Both return the same words.
#ifndef VEIL_GPU_MODULAR_PRODUCT_H_
#define VEIL_GPU_MODULAR_PRODUCT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::gpu {

inline constexpr int kMaxModularProductLimbs = 192;  // n^2 of a 3072-bit Paillier modulus

struct ModularProductInput {
  absl::Span<const uint32_t> modulus;   // limbs 32-bit words, little-endian: odd, top word != 0
  absl::Span<const uint32_t> residues;  // rows x columns residues of limbs words, row-major
  uint64_t rows = 0;
  uint64_t columns = 0;
};

// out[c] (words [c limbs, (c + 1) limbs)) = prod over r of residues[r][c] mod modulus.
// Returns INVALID_ARGUMENT if the modulus is empty, even, has a zero top word or more than
// kMaxModularProductLimbs words, rows or columns is 0, a span has the wrong size, or a residue is
// not below the modulus. `parallel_items` is the number of items the device would run at once
// (it shapes the reduction tree; the host-run can mirror any device's).
absl::Status HostRunModularProduct(const ModularProductInput& input, absl::Span<uint32_t> out,
                                   uint64_t parallel_items = 132 * 1024);

struct GpuProductTiming {
  double upload_s = 0;    // residues to the device
  double compute_s = 0;   // every reduction launch and the correction
  double download_s = 0;  // the products back
};

// The same on `device`. Returns HostRunModularProduct's INVALID_ARGUMENT cases, UNAVAILABLE
// without a device, RESOURCE_EXHAUSTED when the residues do not fit in device memory, INTERNAL
// for other CUDA failures.
absl::StatusOr<GpuProductTiming> GpuModularProduct(int device, const ModularProductInput& input,
                                                   absl::Span<uint32_t> out);

}  // namespace veil::gpu

#endif  // VEIL_GPU_MODULAR_PRODUCT_H_
