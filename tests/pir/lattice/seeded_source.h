// A reproducible lattice::RandomSource for tests: dpf's seeded ChaCha20 stream (veil_dpf_testing).
#ifndef VEIL_TESTS_PIR_LATTICE_SEEDED_SOURCE_H_
#define VEIL_TESTS_PIR_LATTICE_SEEDED_SOURCE_H_

#include <cstdint>

#include "dpf/testing/seeded_keys.h"
#include "pir/lattice/lwe.h"

namespace veil::lattice {

class SeededSource final : public RandomSource {
 public:
  explicit SeededSource(uint64_t seed) : stream_(seed) {}
  void Fill(absl::Span<uint8_t> out) override { stream_.Fill(out); }

 private:
  dpf::SeededRandomForTesting stream_;
};

}  // namespace veil::lattice

#endif  // VEIL_TESTS_PIR_LATTICE_SEEDED_SOURCE_H_
