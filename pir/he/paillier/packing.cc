#include "pir/he/paillier/packing.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

// Bits [offset, offset + width) of little-endian words (width <= 64).
uint64_t ReadBits(const std::vector<uint64_t>& words, size_t offset, uint32_t width) {
  const size_t w = offset / 64, shift = offset % 64;
  unsigned __int128 v = words[w];
  if (w + 1 < words.size()) v |= static_cast<unsigned __int128>(words[w + 1]) << 64;
  v >>= shift;
  return width == 64 ? static_cast<uint64_t>(v) : static_cast<uint64_t>(v) & ((1ull << width) - 1);
}

}  // namespace

absl::StatusOr<Packer> Packer::Create(const PublicKey& key, const PackingSpec& spec) {
  if (spec.value_bits < 1 || spec.value_bits > 62) {
    return absl::InvalidArgumentError("packing: value_bits must be in 1..62");
  }
  if (spec.max_summands == 0) return absl::InvalidArgumentError("packing: max_summands is 0");
  const unsigned __int128 largest =
      static_cast<unsigned __int128>(spec.max_summands) * ((uint64_t{1} << spec.value_bits) - 1);
  if (largest >> 64) {
    return absl::InvalidArgumentError(absl::StrCat("packing: ", spec.max_summands, " summands of ",
                                                   spec.value_bits,
                                                   "-bit values need slots wider than 64 bits"));
  }
  const uint32_t slot_bits = static_cast<uint32_t>(std::bit_width(static_cast<uint64_t>(largest)));
  const size_t slots = (static_cast<size_t>(key.modulus_bits()) - 1) / slot_bits;
  if (slots == 0) {
    return absl::InvalidArgumentError("packing: one slot does not fit in a plaintext");
  }
  return Packer(spec, slot_bits, slots);
}

absl::StatusOr<std::vector<Mpz>> Packer::Pack(absl::Span<const uint64_t> values) const {
  const uint64_t limit = uint64_t{1} << spec_.value_bits;
  std::vector<Mpz> plaintexts(PlaintextsFor(values.size()));
  std::vector<uint64_t> words((slots_ * slot_bits_ + 63) / 64 + 1);
  for (size_t p = 0; p < plaintexts.size(); ++p) {
    std::fill(words.begin(), words.end(), 0);
    for (size_t i = 0; i < slots_ && p * slots_ + i < values.size(); ++i) {
      const uint64_t v = values[p * slots_ + i];
      if (v >= limit) {
        return absl::InvalidArgumentError(absl::StrCat("packing: value ", p * slots_ + i, " (", v,
                                                       ") does not fit in ", spec_.value_bits,
                                                       " bits"));
      }
      const size_t offset = i * slot_bits_;
      words[offset / 64] |= v << (offset % 64);
      if (offset % 64 != 0) words[offset / 64 + 1] |= v >> (64 - offset % 64);
    }
    mpz_import(plaintexts[p].get(), words.size(), -1, sizeof(uint64_t), 0, 0, words.data());
  }
  return plaintexts;
}

absl::StatusOr<std::vector<uint64_t>> Packer::Unpack(absl::Span<const Mpz> plaintexts,
                                                     size_t count) const {
  if (plaintexts.size() < PlaintextsFor(count)) {
    return absl::InvalidArgumentError(absl::StrCat("packing: ", count, " values need ",
                                                   PlaintextsFor(count), " plaintexts, got ",
                                                   plaintexts.size()));
  }
  std::vector<uint64_t> values(count);
  std::vector<uint64_t> words((slots_ * slot_bits_ + 63) / 64 + 1);
  for (size_t p = 0; p < PlaintextsFor(count); ++p) {
    const Mpz& m = plaintexts[p];
    if (mpz_sgn(m.get()) < 0 || m.bits() > slots_ * slot_bits_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packing: plaintext ", p, " has bits above its last slot (a carry or a foreign value)"));
    }
    std::fill(words.begin(), words.end(), 0);
    size_t written = 0;
    mpz_export(words.data(), &written, -1, sizeof(uint64_t), 0, 0, m.get());
    for (size_t i = 0; i < slots_ && p * slots_ + i < count; ++i) {
      values[p * slots_ + i] = ReadBits(words, i * slot_bits_, slot_bits_);
    }
  }
  return values;
}

absl::Status Packer::CheckSummands(uint64_t summands) const {
  if (summands <= spec_.max_summands) return absl::OkStatus();
  return absl::OutOfRangeError(
      absl::StrCat("packing: a sum of ", summands, " packed reports exceeds the headroom of ",
                   spec_.max_summands, " (", slot_bits_, "-bit slots for ", spec_.value_bits,
                   "-bit values): a slot could carry into its neighbour"));
}

absl::StatusOr<CiphertextBatch> EncryptPacked(const PublicKey& key, const Packer& packer,
                                              absl::Span<const uint64_t> values,
                                              Randomizer& randomness) {
  auto plaintexts = packer.Pack(values);
  if (!plaintexts.ok()) return plaintexts.status();
  CiphertextBatch batch{key.id(), packer.spec(), values.size(), 1, {}};
  batch.ciphertexts.reserve(plaintexts->size());
  for (const Mpz& m : *plaintexts) {
    auto c = Encrypt(key, m, randomness);
    if (!c.ok()) return c.status();
    batch.ciphertexts.push_back(*std::move(c));
  }
  return batch;
}

absl::StatusOr<std::vector<uint64_t>> DecryptPacked(const KeyPair& keys, const Packer& packer,
                                                    const CiphertextBatch& batch) {
  if (batch.key_id != keys.public_key.id() || !(batch.packing == packer.spec())) {
    return absl::InvalidArgumentError("packed batch belongs to another key or packing");
  }
  if (auto s = packer.CheckSummands(batch.summands); !s.ok()) return s;
  std::vector<Mpz> plaintexts;
  plaintexts.reserve(batch.ciphertexts.size());
  for (const Ciphertext& c : batch.ciphertexts) {
    auto m = Decrypt(keys, c);
    if (!m.ok()) return m.status();
    plaintexts.push_back(*std::move(m));
  }
  return packer.Unpack(plaintexts, batch.values);
}

}  // namespace veil::he
