// Row-wise operations on RNS polynomials: rows.size() residue rows of n coefficients each,
// prime-major (row j holds the residues modulo rows[j]).
#ifndef VEIL_PIR_HE_POLY_H_
#define VEIL_PIR_HE_POLY_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "pir/he/modarith.h"
#include "pir/he/ntt.h"

namespace veil::he::internal {

void ForwardNtt(absl::Span<const NttTables> rows, uint64_t* p);
void InverseNtt(absl::Span<const NttTables> rows, uint64_t* p);
// out = a + b, a - b, -a, a * b (pointwise), acc += a * b; out may alias a or b; every input
// residue below its prime. The products are dot_product.h's AVX2 + FMA kernel's where it runs.
void AddRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b, uint64_t* out);
void SubRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b, uint64_t* out);
void NegateRows(absl::Span<const NttTables> rows, const uint64_t* a, uint64_t* out);
void MultiplyRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b,
                  uint64_t* out);
void MultiplyAccumulateRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b,
                            uint64_t* acc);

// The Galois automorphism a(X) -> a(X^g) (g odd, below 2N) in coefficient form: coefficient i
// moves to i g mod 2N, negated where that wraps past N. out must not alias in.
void ApplyGaloisCoefficients(const Modulus& q, int log_n, uint32_t galois, const uint64_t* in,
                             uint64_t* out);
// The same in the NTT domain of NttTables (bit-reversed evaluations at psi^(2 bitrev(k) + 1)):
// out[k] = in[perm[k]] with perm from GaloisNttPermutation.
std::vector<uint32_t> GaloisNttPermutation(int log_n, uint32_t galois);

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_POLY_H_
