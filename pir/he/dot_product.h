// The inner loop of the baby-step giant-step product: for one prime q and a run of n slots,
//   out0[c] = sum_i plain[i][c] * c0[i][c] mod q,   out1[c] = sum_i plain[i][c] * c1[i][c] mod q,
// the plaintext diagonals read once for both ciphertext halves, products summed lazily and
// reduced once per slot. Inputs are residues below q.
//   reference  128-bit sums, reduced every time they could overflow (64-bit sums where every
//              sum fits 64 bits);
//   avx512     IFMA52 (q < 2^50): the low and high 52-bit halves of each product are summed in
//              separate 64-bit lanes (2^11 terms cannot overflow them), then combined once;
//              when the combined sum fits 64 bits with a quotient by q below 2^50 (key
//              switching, packing), it is reduced in vectors with a double's quotient estimate;
//   avx2       without IFMA, q <= 2^32 and every sum within 64 bits (dot_product_avx2.cc).
// Bit-equal (fully reduced); tests/pir/he/matvec_test.cc compares them.
//
// And the row kernel of key switching's ModDown and ExpPack's expansion, (x - y) w mod q, with
// the same two paths (IFMA: Shoup's quotient from vpmadd52huq with w'' = w' >> 12, as the NTT's
// IFMA butterflies) and, for q <= 2^32 without IFMA, AVX2 (dot_product_avx2.cc).
#ifndef VEIL_PIR_HE_DOT_PRODUCT_H_
#define VEIL_PIR_HE_DOT_PRODUCT_H_

#include <cstddef>
#include <cstdint>

#include "pir/he/modarith.h"

namespace veil::he::internal {

// Plaintexts of 64-bit residues, or of 32-bit ones (primes below 2^32: half the bytes to stream,
// as ExpPack's packing matrix); the ciphertext halves likewise (key switching's keys, narrowed:
// NarrowKeySwitchKey in keyswitch.h).
template <typename Plain, typename Cipher = uint64_t>
struct DotProductArgsOf {
  const Modulus* q;
  size_t terms;
  size_t n;
  const Plain* const* plain;
  const Cipher* const* c0;
  const Cipher* const* c1;
  uint64_t* out0;
  uint64_t* out1;
  // out += the sums (out below q) rather than out = the sums.
  bool accumulate = false;
};
using DotProductArgs = DotProductArgsOf<uint64_t>;
using DotProductArgs32 = DotProductArgsOf<uint32_t>;
using DotProductArgsNarrowKeys = DotProductArgsOf<uint64_t, uint32_t>;

// From slot `first` on (the slots before it are left alone).
void PlainDotProductReference(const DotProductArgs& args, size_t first = 0);
void PlainDotProductReference(const DotProductArgs32& args, size_t first = 0);
void PlainDotProductReference(const DotProductArgsNarrowKeys& args, size_t first = 0);
// The fastest this CPU runs for args.q (IFMA where available and q < 2^50, else AVX2 where
// PlainDotProductUsesAvx2, else AVX2 + FMA for 64-bit residues where PlainDotProductUsesAvx2F64;
// narrowed keys have the AVX2 kernel alone, else the reference).
void PlainDotProduct(const DotProductArgs& args);
void PlainDotProduct(const DotProductArgs32& args);
void PlainDotProduct(const DotProductArgsNarrowKeys& args);
// The same sums in a tiled layout (deferred_packing.h's folded matrix), which a core streams in
// order: for each of `tiles` tiles of 8 slots,
//   out[t s][l] = sum_r plain[t][r][l] keys[r][0][l] mod q,
//   out[t s + h][l] = sum_r plain[t][r][l] keys[r][1][l] mod q   (s = out_stride, h = half),
// plain tiles x terms x 8 residues of 32 bits, keys terms x 2 x 8 (the two halves of 8 slots
// side by side), every input below q; the outputs are overwritten. The reference sums each slot
// in 128 bits and reduces once. The IFMA kernel (q of 21 to
// 31 bits and terms <= 2^11) sums the low and high 52-bit halves over all terms, then reduces
// once per slot; four tiles share each load of the keys. (Whole products from vpmuludq, one
// multiply instead of two, with the sums folded every 32 terms, measured no faster: reading the
// plaintexts bounds this kernel.)
struct TileDotProductArgs {
  const Modulus* q;
  size_t terms;
  size_t tiles;
  const uint32_t* plain;
  const uint64_t* keys;
  uint64_t* out;
  size_t out_stride;
  size_t half_stride;
};
void TileDotProductReference(const TileDotProductArgs& args);
void TileDotProduct(const TileDotProductArgs& args);
// Whether this CPU runs AVX2 (the kernels of dot_product_avx2.cc and keyswitch.cc's AVX2 lift).
bool CpuHasAvx2();
// Whether TileDotProduct uses the IFMA kernel for these arguments on this CPU.
bool TileDotProductUsesIfma(const TileDotProductArgs& args);
void TileDotProductIfma(const TileDotProductArgs& args);
// Whether TileDotProduct uses the AVX2 kernel (no IFMA kernel for these arguments, q <= 2^32):
// whole products from vpmuludq, folded into 32-bit halves (dot_product_avx2.cc).
bool TileDotProductUsesAvx2(const TileDotProductArgs& args);
void TileDotProductAvx2(const TileDotProductArgs& args);

// Whether PlainDotProduct uses the IFMA kernel for modulus q on this CPU.
bool PlainDotProductUsesIfma(const Modulus& q);
// avx512 kernels (dot_product_avx512.cc); only after the CPU check.
void PlainDotProductIfma(const DotProductArgs& args);
void PlainDotProductIfma(const DotProductArgs32& args);
// Whether PlainDotProduct uses the AVX2 kernel (dot_product_avx2.cc) for q and `terms`: no IFMA
// kernel, q below 2^32 (residues fit vpmuludq's operands) and every sum of `terms` products
// below 2^64.
bool PlainDotProductUsesAvx2(const Modulus& q, size_t terms);
void PlainDotProductAvx2(const DotProductArgs& args);
void PlainDotProductAvx2(const DotProductArgs32& args);
void PlainDotProductAvx2(const DotProductArgsNarrowKeys& args);
// Whether PlainDotProduct uses the AVX2 + FMA kernel (dot_product_avx2_f64.cc: each product
// from double-precision FMAs, 64-bit sums of 2,048 terms at a time) for 64-bit residues: no IFMA
// kernel, no AVX2 kernel whose sums fit 64 bits, q below 2^50 (BFV's primes).
bool PlainDotProductUsesAvx2F64(const Modulus& q, size_t terms);
void PlainDotProductAvx2F64(const DotProductArgs& args);
// Whether this CPU has AVX2 and FMA, and q is at most 50 bits: MultiplyRows' (poly.h) products
// from FMAs then (RowProductAvx2F64).
bool RowProductUsesAvx2F64(const Modulus& q);
// out[c] = a[c] b[c] mod q for c below n rounded down to a multiple of 4, which it returns;
// every input below q (out may alias a or b).
size_t RowProductAvx2F64(const Modulus& q, size_t n, const uint64_t* a, const uint64_t* b,
                         uint64_t* out);
// acc[c] = (a[c] b[c] + acc[c]) mod q, the same way (MultiplyAccumulateRows); every input below q.
size_t RowMultiplyAddAvx2F64(const Modulus& q, size_t n, const uint64_t* a, const uint64_t* b,
                             uint64_t* acc);
// The steps of the mixed-radix conversions (serialization.cc), on the same condition for q and
// with every y below 2^50: out[c] = (x[c] - (y[c] mod q)) w mod q and
// out[c] = (acc[c] w + (y[c] mod q)) mod q, with x, acc and w below q, for c below n rounded
// down to a multiple of 4, which they return (out may alias x, acc or y).
size_t SubReducedMulAvx2F64(const Modulus& q, uint64_t w, size_t n, const uint64_t* x,
                            const uint64_t* y, uint64_t* out);
size_t MulAddReducedAvx2F64(const Modulus& q, uint64_t w, size_t n, const uint64_t* acc,
                            const uint64_t* y, uint64_t* out);

// out[c] = (x[c] - y[c]) w[c] mod q for c < n, with x, y, w below q and w_shoup[c] =
// ShoupPrecompute(w[c], q); one w (w[0], w_shoup[0]) for every c when w_step is 0, else w_step
// must be 1. out may alias x or y.
void SubMulShoup(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                 const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out);
void SubMulShoupReference(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                          const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out);
// avx512 kernel; only after the CPU check (PlainDotProductUsesIfma(q)).
void SubMulShoupIfma(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                     const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out);
// q <= 2^32, on a CPU with AVX2 (dot_product_avx2.cc).
void SubMulShoupAvx2(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                     const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out);

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_DOT_PRODUCT_H_
