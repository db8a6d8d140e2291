// Compressed ciphertexts: a size-2 BFV ciphertext sent to its key's owner with c_0 and c_1
// rounded from Q to the power-of-two moduli 2^b0 and 2^b1 (response modulus switching, as
// Spiral does with its q_1 and q_2: Menon and Wu, "Spiral", IEEE S&P 2022, Sec. 3.5). The
// receiver decrypts with its secret key; nobody computes on a compressed ciphertext.
//
// Rounding. c_i' = round(2^b_i c_i / Q) mod 2^b_i. Writing c_i = Q c_i' / 2^b_i + eps_i with
// |eps_i| <= Q / 2^(b_i + 1), the phase c_0 + c_1 s moves by eps_0 + eps_1 s, at most
// Q / 2^(b0 + 1) + N Q / 2^(b1 + 1) (s is ternary: ||s||_1 <= N). Decryption rounds
// t / Q * phase and is correct while the noise stays below Q / (2t): with t < 2^t_bits,
//   b0 = t_bits + 5,  b1 = t_bits + log2 N + 5
// keep the rounding's worst case below 2^-5 + 2^-5 = 1/16 of that margin, whatever the key and
// the ciphertext (so the noise budget measured after it is at least 4 bits, given a small noise
// before it). At N = 8192, t < 2^58 (the bag's parameters): b0 = 63, b1 = 76, 139 bits per
// coefficient instead of 2 x 174, 142,350 bytes instead of 356,366 (2.5x smaller).
//
// Computing the rounding without composing c_i: with y_j = [c_{i,j} (Q/q_j)^{-1}]_{q_j},
// c_i = sum_j y_j Q / q_j - a Q for an integer a, so 2^b c_i / Q = sum_j y_j 2^b / q_j (mod 2^b):
// per prime an integer part (exact, 128-bit) and a fraction (double precision; an error there
// moves a tie by one unit, which the margin above absorbs).
//
// Decryption, with b = max(b0, b1): v = c_0' 2^(b - b0) + c_1' s 2^(b - b1) (mod 2^b), with
// c_1' centred and the product taken exactly in the first primes of QP whose product has at
// least b1 + log2 N + 2 bits (the secret key's NTT rows), then m = round(t v / 2^b) mod t. The
// noise budget is b - log2 ||[t v]_{2^b}|| - 1, SEAL's invariant noise budget with 2^b in place of
// Q.
#ifndef VEIL_PIR_HE_COMPRESSED_H_
#define VEIL_PIR_HE_COMPRESSED_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pir/he/bfv.h"

namespace veil::he {

struct CompressionBits {
  int c0 = 0;
  int c1 = 0;
};

// b0 = t_bits + 5 and b1 = t_bits + log2 N + 5 (above).
CompressionBits DefaultCompressionBits(const BfvContext& ctx);

struct CompressedCiphertext {
  uint64_t params_id = 0;
  CompressionBits bits;
  std::vector<uint128_t> c0, c1;  // N values each, below 2^bits.c0 and 2^bits.c1
};

// Rounds a size-2 ciphertext. INVALID_ARGUMENT for another size or parameters, or bits outside
// [1, kMaxCompressionBits].
inline constexpr int kMaxCompressionBits = 120;
absl::StatusOr<CompressedCiphertext> Compress(const BfvContext& ctx, const Ciphertext& ct,
                                              CompressionBits bits);
inline absl::StatusOr<CompressedCiphertext> Compress(const BfvContext& ctx, const Ciphertext& ct) {
  return Compress(ctx, ct, DefaultCompressionBits(ctx));
}

// INVALID_ARGUMENT for other parameters, a coefficient count other than N, bits outside
// [1, kMaxCompressionBits] or a value not below 2^bits.
absl::Status CheckCompressedCiphertext(const BfvContext& ctx, const CompressedCiphertext& ct);

// The plaintext, and the noise budget left (0: the result may be wrong). INVALID_ARGUMENT for
// other parameters, sizes or values, or bits.c1 beyond what the context's primes can multiply
// exactly.
struct CompressedDecryption {
  Plaintext m;
  int noise_budget = 0;
};
absl::StatusOr<CompressedDecryption> DecryptCompressed(const BfvContext& ctx, const SecretKey& sk,
                                                       const CompressedCiphertext& ct);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_COMPRESSED_H_
