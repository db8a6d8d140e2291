// Versioned wire formats of Paillier keys and ciphertext batches. Integers in headers are
// little-endian; big integers are big-endian, fixed width. Every field is validated on parsing,
// and a parse consumes the whole input.
//
//   public key   "VPPK" u16 version u16 modulus_bits u32 n_bytes | n
//   key pair     "VPSK" u16 version u16 modulus_bits u32 prime_bytes | p | q
//   batch        "VPCB" u16 version u16 modulus_bits u64 key_id u32 value_bits u64 max_summands
//                u64 values u64 summands u64 count u32 ciphertext_bytes | count ciphertexts
// n_bytes, prime_bytes and ciphertext_bytes must be exactly what modulus_bits implies. A batch
// with value_bits = 0 holds one value per ciphertext (max_summands must then be 0).
#ifndef VEIL_PIR_HE_PAILLIER_SERIALIZE_H_
#define VEIL_PIR_HE_PAILLIER_SERIALIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/packing.h"

namespace veil::he {

inline constexpr uint16_t kPaillierFormatVersion = 1;
inline constexpr size_t kPublicKeyHeaderBytes = 12;
inline constexpr size_t kKeyPairHeaderBytes = 12;
inline constexpr size_t kBatchHeaderBytes = 56;
// Bounds a parser checks before it allocates.
inline constexpr uint64_t kMaxBatchCiphertexts = uint64_t{1} << 24;

std::string SerializePublicKey(const PublicKey& key);
// Returns INVALID_ARGUMENT (saying which field) for a wrong magic, version, size, a modulus
// PublicKey::FromModulus rejects (1024 bits only with `insecure_for_comparison`) or trailing bytes.
absl::StatusOr<PublicKey> ParsePublicKey(std::string_view bytes, bool insecure_for_comparison);

// The secret key (p and q). The caller owns the secret bytes: wipe them (sodium_memzero) after use.
std::string SerializeKeyPair(const KeyPair& keys);
// Returns INVALID_ARGUMENT as ParsePublicKey, and KeyPairFromPrimes's errors.
absl::StatusOr<KeyPair> ParseKeyPair(std::string_view bytes, bool insecure_for_comparison);

// Returns INVALID_ARGUMENT if the batch does not belong to `key` or a ciphertext is not in
// [1, n^2).
absl::StatusOr<std::string> SerializeBatch(const PublicKey& key, const CiphertextBatch& batch);
// Returns INVALID_ARGUMENT (saying which field) for a wrong magic or version, a batch of another
// key or size, an invalid packing (Packer::Create), a ciphertext count that does not match the
// values, summands outside [1, max_summands], more than kMaxBatchCiphertexts ciphertexts, a
// length that is not exactly the header plus the ciphertexts, or a ciphertext not in [1, n^2).
absl::StatusOr<CiphertextBatch> ParseBatch(std::string_view bytes, const PublicKey& key);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_SERIALIZE_H_
