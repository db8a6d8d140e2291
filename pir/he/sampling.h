// Random polynomials for RLWE, written as residues in several moduli (prime-major rows of n):
//   ExpandUniform  uniform residues from a public 32-byte seed (ChaCha20-IETF keyed by the seed,
//                  nonce = (domain, row); 64-bit words rejection-sampled below the largest
//                  multiple of q): the `a` halves that seeded serialization omits;
//   SampleTernary  secret-like polynomials, coefficients uniform in {-1, 0, 1};
//   SampleError    centered binomial CBD(21): the difference of two 21-bit popcounts, variance
//                  10.5 (sigma 3.24, the HE standard's 3.2; SEAL samples errors the same way).
// Secret samples draw from ChaCha20 under a fresh system seed (libsodium) and are constant time:
// no branch or table index depends on a sampled value (popcounts are bit-sliced, signs become
// masks).
#ifndef VEIL_PIR_HE_SAMPLING_H_
#define VEIL_PIR_HE_SAMPLING_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "pir/he/modarith.h"

namespace veil::he {

using Seed = std::array<uint8_t, 32>;

// A fresh seed from libsodium.
Seed RandomSeed();

void ExpandUniform(const Seed& seed, uint32_t domain, absl::Span<const Modulus> moduli, size_t n,
                   uint64_t* out);
void SampleTernary(absl::Span<const Modulus> moduli, size_t n, uint64_t* out);
void SampleError(absl::Span<const Modulus> moduli, size_t n, uint64_t* out);

// The largest absolute value SampleError returns.
inline constexpr int kErrorBound = 21;

}  // namespace veil::he

#endif  // VEIL_PIR_HE_SAMPLING_H_
