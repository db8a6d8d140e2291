// Reproducible DPF keys for tests and benchmarks: a seeded randomness source and a GenerateKeys
// overload that draws the root seeds from it. Target veil_dpf_testing, linked only by tests and
// benchmarks; production key generation (dpf/key.h) takes its seeds from the system CSPRNG and
// has no way to accept these.
#ifndef VEIL_DPF_TESTING_SEEDED_KEYS_H_
#define VEIL_DPF_TESTING_SEEDED_KEYS_H_

#include <array>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/key.h"
#include "dpf/params.h"

namespace veil::dpf {

// Deterministic ChaCha20 stream keyed by a 64-bit seed; each Fill uses the next nonce.
class SeededRandomForTesting {
 public:
  explicit SeededRandomForTesting(uint64_t seed);
  ~SeededRandomForTesting();
  SeededRandomForTesting(const SeededRandomForTesting&) = delete;
  SeededRandomForTesting& operator=(const SeededRandomForTesting&) = delete;
  void Fill(absl::Span<uint8_t> out);

 private:
  std::array<uint8_t, 32> key_{};
  uint64_t nonce_ = 0;
};

// GenerateKeys (dpf/key.h) with the two root seeds drawn from `rng` (party 0's first): the same
// seed and sequence of calls give the same keys.
absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeys(const DpfParameters& params, uint64_t alpha,
                                                      uint32_t beta, SeededRandomForTesting& rng);

}  // namespace veil::dpf

#endif  // VEIL_DPF_TESTING_SEEDED_KEYS_H_
