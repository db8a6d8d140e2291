// What the pir/he suites share: one random seed per run, printed so that a failure can be
// replayed (set VEIL_TEST_SEED to replay it), random polynomials, and the bag's parameters.
#ifndef VEIL_TESTS_PIR_HE_TEST_SUPPORT_H_
#define VEIL_TESTS_PIR_HE_TEST_SUPPORT_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "pir/he/bag.h"

namespace veil::he::testing {

// This run's seed: VEIL_TEST_SEED if set, else drawn once; printed as "random seed: N".
inline uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("VEIL_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("random seed: %llu (replay with VEIL_TEST_SEED)\n",
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A generator seeded from the run's seed and a per-test salt.
inline std::mt19937_64 Rng(uint64_t salt) {
  return std::mt19937_64(TestSeed() ^ (salt * 0x9e3779b97f4a7c15ULL));
}

inline std::vector<uint64_t> RandomResidues(size_t n, uint64_t q, std::mt19937_64& rng) {
  std::vector<uint64_t> v(n);
  for (uint64_t& x : v) x = rng() % q;
  return v;
}

// bfv-bag's parameters (BagParams: N = 8192, t < 2^58), made once.
inline std::shared_ptr<const BfvContext> BagContext() {
  static const auto* ctx = new std::shared_ptr<const BfvContext>(*BfvContext::Create(*BagParams()));
  return *ctx;
}

}  // namespace veil::he::testing

#endif  // VEIL_TESTS_PIR_HE_TEST_SUPPORT_H_
