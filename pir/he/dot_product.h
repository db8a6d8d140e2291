// The inner loop of the baby-step giant-step product: for one prime q and a run of n slots,
//   out0[c] = sum_i plain[i][c] * c0[i][c] mod q,   out1[c] = sum_i plain[i][c] * c1[i][c] mod q,
// the plaintext diagonals read once for both ciphertext halves, products summed lazily and
// reduced once per slot. Inputs are residues below q.
//   reference  128-bit sums, reduced every time they could overflow;
//   avx512     IFMA52 (q < 2^50): the low and high 52-bit halves of each product are summed in
//              separate 64-bit lanes (2^11 terms cannot overflow them), then combined once.
// Bit-equal (fully reduced); tests/pir/he/matvec_test.cc compares them.
#ifndef VEIL_PIR_HE_DOT_PRODUCT_H_
#define VEIL_PIR_HE_DOT_PRODUCT_H_

#include <cstddef>
#include <cstdint>

#include "pir/he/modarith.h"

namespace veil::he::internal {

struct DotProductArgs {
  const Modulus* q;
  size_t terms;
  size_t n;
  const uint64_t* const* plain;
  const uint64_t* const* c0;
  const uint64_t* const* c1;
  uint64_t* out0;
  uint64_t* out1;
};

void PlainDotProductReference(const DotProductArgs& args);
// The fastest this CPU runs for args.q (IFMA where available and q < 2^50).
void PlainDotProduct(const DotProductArgs& args);
// Whether PlainDotProduct uses the IFMA kernel for modulus q on this CPU.
bool PlainDotProductUsesIfma(const Modulus& q);
// avx512 kernel (dot_product_avx512.cc); only after the CPU check.
void PlainDotProductIfma(const DotProductArgs& args);

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_DOT_PRODUCT_H_
