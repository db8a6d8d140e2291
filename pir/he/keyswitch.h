// Hybrid key switching with one special prime P (internal to pir/he, and to pir/lattice's ExpPack
// expansion, which keys its automorphisms in the NTT domain): the pieces that relinearisation,
// rotations and the hoisted baby steps of the matrix-vector product share.
#ifndef VEIL_PIR_HE_KEYSWITCH_H_
#define VEIL_PIR_HE_KEYSWITCH_H_

#include <cstdint>
#include <vector>

#include "pir/he/bfv.h"
#include "pir/he/bfv_context.h"

namespace veil::he::internal {

// The RNS digits of d (coefficient form, k rows): digit i = row i as integers centered in
// (-q_i/2, q_i/2], lifted to every QP row and transformed, into `digits` (k x (k + 1) x N
// residues). d_ntt, if not null, is d's NTT form (ctx.ntt(i) of row i, fully reduced), which is
// digit i's transform modulo q_i (k of the k (k + 1) transforms saved). With to_special false the
// digits are lifted to the Q rows only (k x k x N residues), for gadgets over Q (rgsw.h).
void DecomposeForKeySwitch(const BfvContext& ctx, const uint64_t* d, const uint64_t* d_ntt,
                           uint64_t* digits, bool to_special = true);
// The same into this thread's Scratch::kDigits buffer (scratch.h), returned.
uint64_t* DecomposeToScratch(const BfvContext& ctx, const uint64_t* d,
                             const uint64_t* d_ntt = nullptr);

// Noise of the key switching above, as variances per coefficient in units of Z_Q:
// DigitMeanSquare = sum_i E[d_i^2], the digits uniform in (-q_i/2, q_i/2] (sum_i q_i^2 / 12);
// KeyErrorVariance = N 10.5 DigitMeanSquare / P^2, the key's fresh errors (variance 10.5)
// through the digits, over P; KeySwitchVariance = that plus ModDown's rounding
// (1 + 2N / 3) / 12 (|r| <= 1/2 on each half, the second times the ternary s).
double DigitMeanSquare(const BfvContext& ctx);
double KeyErrorVariance(const BfvContext& ctx);
double KeySwitchVariance(const BfvContext& ctx);

// out0, out1 (QP rows, NTT form) = sum_i digit_i o (b_i, a_i) (dot_product.h kernels), from the
// key's 32-bit form where it has one.
void KeySwitchInnerProduct(const BfvContext& ctx, const uint64_t* digits, const KeySwitchKey& key,
                           uint64_t* out0, uint64_t* out1);

// Gives `key` (of ctx, checked) its 32-bit form where the inner product's AVX2 kernel would read
// it (every prime of QP below 2^32, on a CPU without IFMA: PlainDotProductUsesAvx2), else leaves
// it alone: key switching then streams 393 KB instead of 786 KB of key at N = 4,096 over four
// 29-bit primes (ExpPack's expansion: 153 switches a query at 2^24 x 64 B), for half again the
// key's memory.
void NarrowKeySwitchKey(const BfvContext& ctx, KeySwitchKey& key);

// round(c / P) for c over QP in NTT form (c is overwritten): out gets k rows, in coefficient
// form, or in NTT form when to_ntt.
void ModDown(const BfvContext& ctx, uint64_t* c, bool to_ntt, uint64_t* out);

// Key switching of a whole polynomial d (coefficient form): (ks0, ks1) over Q in coefficient
// form with ks0 + ks1 s = d s' + small, for a key from s' to s.
void SwitchKey(const BfvContext& ctx, const uint64_t* d, const KeySwitchKey& key, uint64_t* ks0,
               uint64_t* ks1);

// The rotation by sigma = `galois` of (c0, c1) (k rows each) whose c1 was decomposed into
// `digits`, with its Galois key (which switches s to sigma^-1(s)): key switching first,
// (d0, d1) with d0 + d1 sigma^-1(s) ~ c1 s, then the automorphism, out = (sigma(c0 + d0),
// sigma(d1)). The digits need no permutation, so every rotation of one ciphertext shares them
// (hoisting). ntt: c0 and out in NTT form (else coefficient form). out may not alias c0.
void RotateFromDigits(const BfvContext& ctx, const uint64_t* c0, const uint64_t* digits,
                      uint32_t galois, const KeySwitchKey& key, bool ntt, uint64_t* out0,
                      uint64_t* out1);

// RotateFromDigits before its ModDown, for sums of rotations of different ciphertexts: out0,
// out1 (k + 1 rows each, QP, NTT form) get sigma(P c0 + e0), sigma(e1) with (e0, e1) the key
// switch's sums over QP, so that ModDown of a sum of such pairs is the sum of the rotations with
// one rounding instead of one per rotation (ModDown commutes with sigma: the centred lift of
// the P row commutes with the signed permutation). 8 of a key switch's 20 transforms saved per
// rotation but one. c0 and out are in NTT form; out may not alias c0.
void RotateBeforeModDown(const BfvContext& ctx, const uint64_t* c0, const uint64_t* digits,
                         uint32_t galois, const KeySwitchKey& key, uint64_t* out0, uint64_t* out1);

// The key of `galois` in gk, checked. INVALID_ARGUMENT for keys of other parameters or sizes,
// NOT_FOUND if gk has no key for `galois`.
absl::StatusOr<const KeySwitchKey*> FindGaloisKey(const BfvContext& ctx, const GaloisKeys& gk,
                                                  uint32_t galois);

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_KEYSWITCH_H_
