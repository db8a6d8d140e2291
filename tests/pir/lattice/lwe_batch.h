// LWE ciphertexts with known plaintexts, for the packing tests (packing_test, expansion_test).
#ifndef VEIL_TESTS_PIR_LATTICE_LWE_BATCH_H_
#define VEIL_TESTS_PIR_LATTICE_LWE_BATCH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "pir/lattice/lwe.h"
#include "pir/lattice/params.h"
#include "tests/pir/lattice/seeded_source.h"

namespace veil::lattice::testing {

// `rows` LWE ciphertexts over Z_{2^32} under one secret s: a uniform, b = <a, s> + e + Delta m
// with m a random byte and e SimplePIR's Gaussian; phase = e + Delta m, what decryption gives.
struct LweBatch {
  LweBatch(uint64_t rows, uint32_t lwe_n, uint64_t seed)
      : secret(lwe_n), a(rows * lwe_n), b(rows), phase(rows), bytes(rows) {
    SeededSource rng(seed);
    SampleSecret(rng, absl::MakeSpan(secret));
    SampleSecret(rng, absl::MakeSpan(a));  // uniform words, like the hint's rows
    std::vector<int32_t> errors(rows);
    SampleErrors(rng, absl::MakeSpan(errors));
    rng.Fill(absl::MakeSpan(bytes));
    for (uint64_t r = 0; r < rows; ++r) {
      uint32_t dot = 0;
      for (uint32_t j = 0; j < lwe_n; ++j) dot += a[r * lwe_n + j] * secret[j];
      phase[r] = static_cast<uint32_t>(errors[r]) + kDelta * bytes[r];
      b[r] = dot + phase[r];
    }
  }
  std::vector<uint32_t> secret, a, b, phase;
  std::vector<uint8_t> bytes;
};

// What packing added to a batch's phases: the noise's root mean square and largest magnitude
// (in words), and the share of bytes that decrypt wrongly.
struct PhaseNoise {
  double sigma = 0, largest = 0, wrong_share = 0;
};
inline PhaseNoise MeasurePhaseNoise(const LweBatch& lwe, const std::vector<uint32_t>& phases) {
  PhaseNoise out;
  double sum_squares = 0;
  uint64_t wrong = 0;
  for (size_t r = 0; r < phases.size(); ++r) {
    wrong += RoundToByte(phases[r]) != lwe.bytes[r];
    const double noise = static_cast<int32_t>(phases[r] - lwe.phase[r]);
    sum_squares += noise * noise;
    out.largest = std::max(out.largest, std::abs(noise));
  }
  out.sigma = std::sqrt(sum_squares / phases.size());
  out.wrong_share = static_cast<double>(wrong) / phases.size();
  return out;
}

}  // namespace veil::lattice::testing

#endif  // VEIL_TESTS_PIR_LATTICE_LWE_BATCH_H_
