// Wire formats of BFV objects, version 1 (integers little-endian):
//    0  'V' 'H'        magic
//    2  version        1
//    3  kind           1 ciphertext, 2 public key, 3 relinearisation key, 4 Galois keys,
//                      5 secret key, 6 RGSW ciphertexts, 7 compressed ciphertext
//    4  params id      8 bytes (BfvParams::Id); must equal the reading context's
//   12  body
// A polynomial is its residue rows bit-packed one after the other, row j at bits(q_j) bits per
// residue (LSB first), padded to a whole byte; every residue is checked below q_j on reading.
//   ciphertext      size (1 byte, 2 or 3), flags (1 byte; bit 0: seeded, bit 1: c_0 rounded),
//                   c_0, then c_1 or, if seeded, the 32-byte seed c_1 is expanded from, then c_2
//                   (size 3). A rounded c_0 is its drop bits d (1 byte, 1 to bits(q_0) - 1),
//                   then its mixed-radix digits (x_j < q_j, c_0 = x_0 + q_0 (x_1 + q_1 (...)))
//                   packed as residue rows, x_0 without its d low bits (bits(q_0) - d bits, at
//                   most (q_0 - 1) >> d); the reader puts 2^(d - 1) in their place.
//   public key      p_0 (k rows), 32-byte seed of p_1
//   key switching   32-byte seed of the a_i, then b_0 .. b_{k-1} (k + 1 rows each)
//   relin key       one key-switching key
//   Galois keys     count (4 bytes, at most N), then per key: element (4 bytes; odd, below 2N,
//                   strictly increasing) and a key-switching key
//   secret key      N ternary coefficients, 2 bits each (0, 1, 3 = -1; 2 is rejected)
//   compressed      bits b0 and b1 (1 byte each; DefaultCompressionBits), then c_0' at b0 bits
//                   and c_1' at b1 bits per coefficient, each bit-packed, zero-padded to a whole
//                   byte (compressed.h): 142,350 bytes at N = 8192, t < 2^58
//   RGSW            count (4 bytes, at most kMaxRgswCiphertexts), then per ciphertext two
//                   key-switching keys: from m, then from m s (rgsw.h)
// Seeded halves (the uniform a of symmetric ciphertexts, public and key-switching keys) travel
// as their seeds: half the size. At N = 8192 (k = 4, 174-bit Q, 218-bit QP) a seeded ciphertext
// is 178,222 bytes (a full one 356,366; 145,455 with c_0 rounded by 32 bits), a Galois key
// 892,964 bytes. Parsing is strict: truncated or over-long input, a wrong magic, version, kind or
// parameter id, an out-of-range residue or field all return INVALID_ARGUMENT naming the problem.
#ifndef VEIL_PIR_HE_SERIALIZATION_H_
#define VEIL_PIR_HE_SERIALIZATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/he/compressed.h"
#include "pir/he/rgsw.h"

namespace veil::he {

inline constexpr uint8_t kHeMagic0 = 'V';
inline constexpr uint8_t kHeMagic1 = 'H';
inline constexpr uint8_t kHeVersion = 1;
inline constexpr size_t kHeHeaderBytes = 12;

enum class HeObjectKind : uint8_t {
  kCiphertext = 1,
  kPublicKey = 2,
  kRelinKey = 3,
  kGaloisKeys = 4,
  kSecretKey = 5,
  kRgswCiphertexts = 6,
  kCompressedCiphertext = 7,
};

inline constexpr uint32_t kMaxRgswCiphertexts = 64;

// The check of a nonzero round_c0_bits: INVALID_ARGUMENT outside [1, bits(q_0) - 1].
absl::Status CheckRoundBits(const BfvContext& ctx, int bits);

// Each Serialize returns the errors of the object's checks (other parameters, wrong sizes).
//
// round_c0_bits = d > 0 sends c_0 rounded: the d lowest bits of its lowest mixed-radix digit are
// dropped and the reader puts 2^(d - 1) in their place, so c_0 moves by at most 2^(d - 1) and the
// ciphertext's noise grows by as much; d bits per coefficient fewer (8192 d / 8 bytes at
// N = 8192). For a fresh encryption that is then multiplied by plaintexts (the bag's query,
// kBagQueryRoundBits), whose product's noise leaves budget to spare. INVALID_ARGUMENT for d
// outside [0, bits(q_0) - 1].
absl::StatusOr<std::vector<uint8_t>> SerializeCiphertext(const BfvContext& ctx,
                                                         const Ciphertext& ct,
                                                         int round_c0_bits = 0);
absl::StatusOr<Ciphertext> ParseCiphertext(const BfvContext& ctx, absl::Span<const uint8_t> bytes);
// The round_c0_bits a serialized ciphertext states (0: exact; unchecked: ParseCiphertext checks).
int SerializedRoundBits(absl::Span<const uint8_t> bytes);
// Both refuse bits other than DefaultCompressionBits(ctx).
absl::StatusOr<std::vector<uint8_t>> SerializeCompressedCiphertext(const BfvContext& ctx,
                                                                   const CompressedCiphertext& ct);
absl::StatusOr<CompressedCiphertext> ParseCompressedCiphertext(const BfvContext& ctx,
                                                               absl::Span<const uint8_t> bytes);
absl::StatusOr<std::vector<uint8_t>> SerializePublicKey(const BfvContext& ctx, const PublicKey& pk);
absl::StatusOr<PublicKey> ParsePublicKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes);
absl::StatusOr<std::vector<uint8_t>> SerializeRelinKey(const BfvContext& ctx, const RelinKey& rk);
absl::StatusOr<RelinKey> ParseRelinKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes);
absl::StatusOr<std::vector<uint8_t>> SerializeGaloisKeys(const BfvContext& ctx,
                                                         const GaloisKeys& gk);
absl::StatusOr<GaloisKeys> ParseGaloisKeys(const BfvContext& ctx, absl::Span<const uint8_t> bytes);
// The secret key's bytes are secret: the caller wipes them (sodium_memzero) after use.
absl::StatusOr<std::vector<uint8_t>> SerializeSecretKey(const BfvContext& ctx, const SecretKey& sk);
absl::StatusOr<SecretKey> ParseSecretKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes);
// Also INVALID_ARGUMENT for more than kMaxRgswCiphertexts.
absl::StatusOr<std::vector<uint8_t>> SerializeRgswCiphertexts(
    const BfvContext& ctx, absl::Span<const RgswCiphertext> ciphertexts);
absl::StatusOr<std::vector<RgswCiphertext>> ParseRgswCiphertexts(const BfvContext& ctx,
                                                                 absl::Span<const uint8_t> bytes);

// Bytes of a serialized ciphertext of `size` polynomials (seeded: c_1 as a seed; c_0 rounded by
// round_c0_bits), and of one Galois key inside a GaloisKeys message (element and key).
size_t CiphertextBytes(const BfvContext& ctx, size_t size, bool seeded, int round_c0_bits = 0);
size_t GaloisKeyBytes(const BfvContext& ctx);
// A serialized compressed ciphertext (DefaultCompressionBits).
size_t CompressedCiphertextBytes(const BfvContext& ctx);
size_t RelinKeyBytes(const BfvContext& ctx);
// A message of `count` RGSW ciphertexts.
size_t RgswCiphertextsBytes(const BfvContext& ctx, size_t count);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_SERIALIZATION_H_
