// Random inputs for the GPU packing sums' tests (gpu/packing.h): a packing matrix of random
// a-parts and special ciphertexts of random residues (NTT form; the sums do not care whether
// they encrypt anything).
#ifndef VEIL_TESTS_GPU_PACKING_TEST_SUPPORT_H_
#define VEIL_TESTS_GPU_PACKING_TEST_SUPPORT_H_

#include <cstdint>
#include <random>
#include <vector>

#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu::testing {

inline lattice::PackingMatrix RandomPackingMatrix(const lattice::RingContext& ctx, uint64_t rows,
                                                  uint32_t lwe_n, std::mt19937_64& gen) {
  std::vector<uint32_t> a(rows * lwe_n);
  for (uint32_t& w : a) w = static_cast<uint32_t>(gen());
  return *lattice::PackingMatrix::Create(ctx, a, rows, lwe_n);
}

// count x k x N residues, each below its prime.
inline std::vector<uint64_t> RandomKeyHalves(const lattice::RingContext& ctx, uint32_t count,
                                             std::mt19937_64& gen) {
  const size_t n = ctx.n(), slots = ctx.k() * n;
  std::vector<uint64_t> out(count * slots);
  for (size_t r = 0; r < out.size(); ++r) out[r] = gen() % ctx.base()[(r % slots) / n].value();
  return out;
}

}  // namespace veil::gpu::testing

#endif  // VEIL_TESTS_GPU_PACKING_TEST_SUPPORT_H_
