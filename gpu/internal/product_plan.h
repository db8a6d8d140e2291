// Host-side planning of a modular product (gpu/modular_product.h), shared by the host-run and the
// device path: input validation, the Montgomery constants, the correction R^rows mod N and the
// launches' shapes.
#ifndef VEIL_GPU_INTERNAL_PRODUCT_PLAN_H_
#define VEIL_GPU_INTERNAL_PRODUCT_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/modular_product.h"

namespace veil::gpu::internal {

struct ProductPlan {
  int limbs = 0;
  int limb_class = 0;  // the kernel instantiation: the smallest kProductLimbClasses entry >= limbs
  uint32_t n_inv = 0;  // -N^(-1) mod 2^32
  std::vector<uint32_t> correction;  // R^rows mod N
  std::vector<uint64_t> slices;      // per launch: rows out (each launch's rows in: the previous)
};

// Returns HostRunModularProduct's INVALID_ARGUMENT cases.
absl::StatusOr<ProductPlan> PlanModularProduct(const ModularProductInput& input,
                                               absl::Span<const uint32_t> out,
                                               uint64_t parallel_items);

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_PRODUCT_PLAN_H_
