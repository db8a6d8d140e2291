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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
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

// RGSW(m) over Q alone, with the RNS gadget g_i = (Q/q_i) [(Q/q_i)^-1]_{q_i} (so that
// sum_i [x]_{q_i} g_i = x mod Q, the digits centered): for each digit i an RLWE ciphertext over Q
// of m g_i and one of m s g_i. A server builds it (ConvertToRgsw) from RLWE ciphertexts of
// m g_i that an expanded query delivers (pir/lattice's hybrid selection), with one conversion
// key from s^2 to s (a RelinKey): Spiral's ciphertext conversion (Menon and Wu, S&P 2022), so
// that a bit travels inside one RLWE ciphertext instead of as two key-switching keys over QP.
// The external product sum_i d_i(c0) RLWE(m g_i) + d_i(c1) RLWE(m s g_i) has phase
// m (c0 + c1 s) plus sum_i d_i (e_i + e'_i): nothing divides by P, so its noise is the digits
// (~q_i) times the parts' errors (QRgswProductVariance): for fresh parts at the lattice ring's
// parameters sigma ~2^47.7 units of Q, 2^-39.3 of Q (measured within 2% of the model).
struct QRgswCiphertext {
  uint64_t params_id = 0;
  // [m | m s][digit i < k][c0 | c1][k rows x N residues], NTT form over Q, fully reduced.
  std::vector<uint64_t> parts;
};

// RGSW(m) from its m parts: k RLWE ciphertexts over Q of m g_i (i < k), NTT form, c0 then c1
// (2 k rows each, fully reduced), k x 2 x k x N residues in all; the m s parts are
// (ks0, c0 + ks1) with ks0 + ks1 s ~ c1 s^2 (one key switch each with `conversion`, a key from
// s^2 to s: a RelinKey's). Returns INVALID_ARGUMENT for parts of another size or a residue not
// below its prime, and CheckKeySwitchKey's errors.
absl::StatusOr<QRgswCiphertext> ConvertToRgsw(const BfvContext& ctx, const KeySwitchKey& conversion,
                                              absl::Span<const uint64_t> m_parts);

// The variance (units of Z_Q, per coefficient) of the m s parts' error when the m parts' is
// m_variance: the error times s (N 2/3 m_variance) plus one key switch's.
double ConvertedVariance(const BfvContext& ctx, double m_variance);
// What one external product with a QRgswCiphertext adds: N sum_i E[d_i^2] (m_variance +
// ms_variance), d_i uniform in (-q_i/2, q_i/2].
double QRgswProductVariance(const BfvContext& ctx, double m_variance, double ms_variance);

namespace internal {

// out = g (x0, x1): x and out are k rows each in NTT form over Q, fully reduced; out may alias x.
void ExternalProduct(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* x0,
                     const uint64_t* x1, uint64_t* out0, uint64_t* out1);

void ExternalProduct(const BfvContext& ctx, const QRgswCiphertext& g, const uint64_t* x0,
                     const uint64_t* x1, uint64_t* out0, uint64_t* out1);

// out = a + g (b - a): b's phase when g encrypts 1, a's when it encrypts 0. All k rows in NTT
// form over Q; out may alias a or b.
void CMux(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* a0, const uint64_t* a1,
          const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1);
void CMux(const BfvContext& ctx, const QRgswCiphertext& g, const uint64_t* a0, const uint64_t* a1,
          const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1);

}  // namespace internal
}  // namespace veil::he

#endif  // VEIL_PIR_HE_RGSW_H_
