// What both GPU test binaries share: the PRGs and strategies they sweep, and one random seed per
// run, printed so that a failure can be replayed.
#ifndef VEIL_TESTS_GPU_TEST_SUPPORT_H_
#define VEIL_TESTS_GPU_TEST_SUPPORT_H_

#include <cstdint>
#include <cstdio>
#include <random>

#include "dpf/params.h"
#include "gpu/strategy.h"

namespace veil::gpu::testing {

inline constexpr dpf::Prg kAllPrgs[] = {dpf::Prg::kAes128, dpf::Prg::kChaCha8,
                                        dpf::Prg::kChaCha12, dpf::Prg::kChaCha20,
                                        dpf::Prg::kSipHash};
inline constexpr Strategy kAllStrategies[] = {Strategy::kBranchParallel, Strategy::kLevelByLevel,
                                              Strategy::kBoundedWindow};

// This run's seed, drawn once and printed as "<binary> random seed: N".
inline uint64_t TestSeed(const char* binary) {
  static const uint64_t seed = [binary] {
    const uint64_t s = std::random_device{}();
    std::printf("%s random seed: %llu\n", binary, static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

}  // namespace veil::gpu::testing

#endif  // VEIL_TESTS_GPU_TEST_SUPPORT_H_
