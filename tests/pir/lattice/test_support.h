// What the lattice tests share: one random seed per run, printed so that a failure can be
// replayed.
#ifndef VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_
#define VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_

#include <cstdint>
#include <cstdio>
#include <random>

namespace veil::lattice::testing {

// This run's seed, drawn once and printed as "<binary> random seed: N".
inline uint64_t TestSeed(const char* binary) {
  static const uint64_t seed = [binary] {
    const uint64_t s = std::random_device{}();
    std::printf("%s random seed: %llu\n", binary, static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

}  // namespace veil::lattice::testing

#endif  // VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_
