// RGSW ciphertexts of bits and the external product (issue 15's hybrid protocol, which selects
// one of several RLWE ciphertexts by bits the server cannot read), built on the hybrid key
// switching of keyswitch.h.
//
// RGSW(m) under s is here a pair of key-switching keys (bfv.h's KeySwitchKey): one "from" m and
// one from m s, both to s. Digit i of each is (b_i, a_i) over QP with b_i + a_i s = e_i + P
// [x]_{q_i} for x = m and x = m s. The external product of RGSW(m) with an RLWE ciphertext (c0, c1)
// over Q of phase phi = c0 + c1 s is
//     ModDown( sum_i d_i(c0) (b_i, a_i)[m] + sum_i d_i(c1) (b_i, a_i)[m s] ),
// d_i the RNS digits of keyswitch.h, whose phase is m c0 + m c1 s = m phi plus two key switches'
// noise (sum_i d_i e_i / P and ModDown's rounding; ExternalProductVariance). For a bit m the
// product is phi or 0, and CMux(b, x0, x1) = x0 + RGSW(b) (x1 - x0) is x_b with that noise added:
// the noise does not multiply along a selection tree, it adds (Gentry-Sahai-Waters; the
// "external product" of Chillotti et al.'s TFHE and of Spiral, Menon and Wu, S&P 2022).
//
// Security: the same as a key-switching key's (RLWE over QP, within the HE standard's bound for
// the context's N, bfv_params.h); m s is the usual circular-security assumption.
#ifndef VEIL_PIR_HE_RGSW_H_
#define VEIL_PIR_HE_RGSW_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "pir/he/bfv.h"
#include "pir/he/bfv_context.h"

namespace veil::he {

struct RgswCiphertext {
  uint64_t params_id = 0;
  KeySwitchKey m, ms;  // from m, from m s
};

// RGSW(bit) under sk, with fresh seeds and errors from libsodium; constant time in the bit.
// Returns INVALID_ARGUMENT for a bit other than 0 or 1 and CheckSecretKey's errors.
absl::StatusOr<RgswCiphertext> EncryptRgswBit(const BfvContext& ctx, const SecretKey& sk,
                                              uint32_t bit);

// Ids and sizes (CheckKeySwitchKey of both keys).
absl::Status CheckRgswCiphertext(const BfvContext& ctx, const RgswCiphertext& g, const char* what);

// What one external product adds to a phase, as a variance in units of Z_Q per coefficient:
// 2k digit polynomials (uniform in (-q_i/2, q_i/2], variance q_i^2 / 12) times fresh errors of
// variance 10.5, N terms each, over P^2, plus ModDown's rounding (1 + 2N / 3) / 12 (|r| <= 1/2
// on each half, the second times the ternary s).
double ExternalProductVariance(const BfvContext& ctx);

namespace internal {

// out = g (x0, x1): x and out are k rows each in NTT form over Q, fully reduced; out may alias x.
void ExternalProduct(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* x0,
                     const uint64_t* x1, uint64_t* out0, uint64_t* out1);

// out = a + g (b - a): b's phase when g encrypts 1, a's when it encrypts 0. All k rows in NTT
// form over Q; out may alias a or b.
void CMux(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* a0, const uint64_t* a1,
          const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1);

}  // namespace internal
}  // namespace veil::he

#endif  // VEIL_PIR_HE_RGSW_H_
