// Packing: k small non-negative values per Paillier plaintext, value i in bits
// [i s, i s + s) of the plaintext, where the slot width s leaves zero headroom above each value
// for a stated number of summands. Adding ciphertexts adds the slots independently as long as no
// slot reaches 2^s, which the headroom guarantees for up to `max_summands` packed plaintexts
// whose values are each below 2^value_bits:
//   s = bit length of max_summands * (2^value_bits - 1),  k = floor((|n| - 1) / s),
// so every sum stays below 2^(k s) < n and no carry crosses a slot or wraps mod n.
// The number of summands travels with every CiphertextBatch and is checked before any addition
// that could exceed the headroom; such an addition is refused, never performed.
#ifndef VEIL_PIR_HE_PAILLIER_PACKING_H_
#define VEIL_PIR_HE_PAILLIER_PACKING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/paillier.h"

namespace veil::he {

struct PackingSpec {
  uint32_t value_bits = 16;   // every packed value is below 2^value_bits
  uint64_t max_summands = 1;  // packed plaintexts that may be added together
  friend bool operator==(const PackingSpec&, const PackingSpec&) = default;
};

class Packer {
 public:
  // Returns INVALID_ARGUMENT if value_bits is not in 1..62, max_summands is 0, or one slot does
  // not fit below n.
  static absl::StatusOr<Packer> Create(const PublicKey& key, const PackingSpec& spec);

  const PackingSpec& spec() const { return spec_; }
  uint32_t slot_bits() const { return slot_bits_; }
  size_t slots() const { return slots_; }  // values per plaintext
  size_t PlaintextsFor(size_t values) const { return (values + slots_ - 1) / slots_; }

  // ceil(values.size() / slots()) plaintexts, the last one zero-filled. Returns INVALID_ARGUMENT
  // (naming the index) for a value >= 2^value_bits.
  absl::StatusOr<std::vector<Mpz>> Pack(absl::Span<const uint64_t> values) const;
  // The first `count` values of `plaintexts`. Returns INVALID_ARGUMENT if there are too few
  // plaintexts for `count`, or a plaintext has bits above its last slot (it was not produced by
  // Pack and additions within the headroom).
  absl::StatusOr<std::vector<uint64_t>> Unpack(absl::Span<const Mpz> plaintexts,
                                               size_t count) const;
  // OK if `summands` packed plaintexts may be added; OUT_OF_RANGE otherwise, with the figures.
  absl::Status CheckSummands(uint64_t summands) const;

 private:
  Packer(const PackingSpec& spec, uint32_t slot_bits, size_t slots)
      : spec_(spec), slot_bits_(slot_bits), slots_(slots) {}
  PackingSpec spec_;
  uint32_t slot_bits_;
  size_t slots_;
};

// Ciphertexts of one key holding `values` packed values (or, with value_bits 0 in the spec, one
// plaintext each), which are the sum of `summands` encrypted reports.
struct CiphertextBatch {
  uint64_t key_id = 0;  // PublicKey::id()
  PackingSpec packing;
  uint64_t values = 0;
  uint64_t summands = 1;
  std::vector<Ciphertext> ciphertexts;
};

// Packs and encrypts `values` (one report: summands = 1). Returns Pack's and Encrypt's errors.
absl::StatusOr<CiphertextBatch> EncryptPacked(const PublicKey& key, const Packer& packer,
                                              absl::Span<const uint64_t> values,
                                              Randomizer& randomness);

// Decrypts and unpacks a batch. Returns INVALID_ARGUMENT if the batch belongs to another key or
// packing, OUT_OF_RANGE if it sums more reports than the headroom allows, and Decrypt's and
// Unpack's errors.
absl::StatusOr<std::vector<uint64_t>> DecryptPacked(const KeyPair& keys, const Packer& packer,
                                                    const CiphertextBatch& batch);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_PACKING_H_
