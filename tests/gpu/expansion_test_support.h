// Helpers for the GPU expansion's tests (gpu/expansion.h): a client's keys and ExpandLweSecret's
// leaves in ExpandedKeys' layout.
#ifndef VEIL_TESTS_GPU_EXPANSION_TEST_SUPPORT_H_
#define VEIL_TESTS_GPU_EXPANSION_TEST_SUPPORT_H_

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/bfv.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu::testing {

struct Session {
  Session(const lattice::RingContext& ctx, uint32_t lwe_n)
      : key(he::GenerateSecretKey(*ctx.expansion())),
        z(lattice::RlweSecret::FromKey(ctx, key)),
        keys(*lattice::ParseExpansionKeys(ctx, lwe_n,
                                          *lattice::MakeExpansionKeys(ctx, key, lwe_n))) {}
  he::SecretKey key;
  lattice::RlweSecret z;
  he::GaloisKeys keys;
};

// ExpandLweSecret's leaves in ExpandedKeys' layout.
std::vector<uint64_t> CpuLeaves(const lattice::RingContext& ctx, const he::GaloisKeys& keys,
                                uint32_t lwe_n, absl::Span<const uint8_t> ct) {
  const size_t words = ctx.k() * ctx.n();
  std::vector<uint64_t> leaves(uint64_t{lwe_n} * 2 * words);
  std::mutex mu;
  const absl::Status s = lattice::ExpandLweSecret(
      ctx, keys, lwe_n, ct, 2,
      [&](int, uint32_t count, const uint32_t* index, const uint64_t* beta, const uint64_t* alpha) {
        std::lock_guard<std::mutex> lock(mu);
        for (uint32_t i = 0; i < count; ++i) {
          uint64_t* to = leaves.data() + uint64_t{index[i]} * 2 * words;
          std::copy_n(beta + i * words, words, to);
          std::copy_n(alpha + i * words, words, to + words);
        }
      });
  EXPECT_TRUE(s.ok()) << s;
  return leaves;
}

}  // namespace veil::gpu::testing

#endif  // VEIL_TESTS_GPU_EXPANSION_TEST_SUPPORT_H_
