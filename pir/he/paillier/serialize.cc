#include "pir/he/paillier/serialize.h"

#include <sodium.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

constexpr char kPublicKeyMagic[4] = {'V', 'P', 'P', 'K'};
constexpr char kKeyPairMagic[4] = {'V', 'P', 'S', 'K'};
constexpr char kBatchMagic[4] = {'V', 'P', 'C', 'B'};

static_assert(kPublicKeyHeaderBytes == 4 + 2 + 2 + 4);
static_assert(kKeyPairHeaderBytes == 4 + 2 + 2 + 4);
static_assert(kBatchHeaderBytes == 4 + 2 + 2 + 8 + 4 + 8 + 8 + 8 + 8 + 4);

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void Magic(const char (&m)[4]) { out_.append(m, 4); }
  template <class T>
  void Int(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void Big(const Mpz& x, size_t width) {
    const size_t at = out_.size();
    out_.resize(at + width);
    ToFixedBytes(x, absl::MakeSpan(reinterpret_cast<uint8_t*>(out_.data() + at), width));
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  Reader(std::string_view in, const char* what) : in_(in), what_(what) {}
  absl::Status Magic(const char (&m)[4]) {
    if (in_.size() < 4 || std::memcmp(in_.data(), m, 4) != 0) {
      return Error("bad magic (not a ", std::string(m, 4), " object)");
    }
    in_.remove_prefix(4);
    return absl::OkStatus();
  }
  template <class T>
  absl::Status Int(T& v, const char* field) {
    if (in_.size() < sizeof(T)) return Error("truncated at ", field);
    v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= T(static_cast<uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(sizeof(T));
    return absl::OkStatus();
  }
  // Reads `width` bytes as a big-endian integer into x.
  absl::Status Big(Mpz& x, size_t width, const char* field) {
    if (in_.size() < width) return Error("truncated at ", field);
    mpz_import(x.get(), width, 1, 1, 1, 0, in_.data());
    in_.remove_prefix(width);
    return absl::OkStatus();
  }
  size_t left() const { return in_.size(); }
  absl::Status End() const {
    return in_.empty() ? absl::OkStatus() : Error(in_.size(), " trailing bytes");
  }
  template <class... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": ", args...));
  }

 private:
  std::string_view in_;
  const char* what_;
};

#define PAILLIER_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    absl::Status paillier_status_ = (expr);              \
    if (!paillier_status_.ok()) return paillier_status_; \
  } while (0)

// The common start of the key formats: version, modulus bits, the width of what follows.
// Bytes of each big integer after a key header: n (parts = 1) or each prime (parts = 2).
uint32_t KeyIntegerBytes(int modulus_bits, int parts) { return (modulus_bits / parts + 7) / 8; }

// The common start of the key formats: version, modulus bits, the width of what follows.
void WriteKeyHeader(Writer& w, const char (&magic)[4], int modulus_bits, int parts) {
  w.Magic(magic);
  w.Int(kPaillierFormatVersion);
  w.Int(static_cast<uint16_t>(modulus_bits));
  w.Int(KeyIntegerBytes(modulus_bits, parts));
}

absl::Status ReadKeyHeader(Reader& r, const char (&magic)[4], uint16_t& bits, uint32_t& width,
                           int parts) {
  uint16_t version = 0;
  PAILLIER_RETURN_IF_ERROR(r.Magic(magic));
  PAILLIER_RETURN_IF_ERROR(r.Int(version, "version"));
  if (version != kPaillierFormatVersion) return r.Error("unsupported version ", version);
  PAILLIER_RETURN_IF_ERROR(r.Int(bits, "modulus_bits"));
  PAILLIER_RETURN_IF_ERROR(r.Int(width, "length"));
  const uint32_t expected = KeyIntegerBytes(bits, parts);
  if (width != expected) {
    return r.Error("integer length ", width, " does not match ", bits, "-bit modulus (", expected,
                   ")");
  }
  return absl::OkStatus();
}

// The header fields of a batch other than magic and version, checked against the key.
absl::Status ReadBatchHeader(Reader& r, const PublicKey& key, CiphertextBatch& batch,
                             uint64_t& count) {
  uint16_t version = 0, bits = 0;
  uint32_t width = 0;
  PAILLIER_RETURN_IF_ERROR(r.Magic(kBatchMagic));
  PAILLIER_RETURN_IF_ERROR(r.Int(version, "version"));
  if (version != kPaillierFormatVersion) return r.Error("unsupported version ", version);
  PAILLIER_RETURN_IF_ERROR(r.Int(bits, "modulus_bits"));
  PAILLIER_RETURN_IF_ERROR(r.Int(batch.key_id, "key_id"));
  PAILLIER_RETURN_IF_ERROR(r.Int(batch.packing.value_bits, "value_bits"));
  PAILLIER_RETURN_IF_ERROR(r.Int(batch.packing.max_summands, "max_summands"));
  PAILLIER_RETURN_IF_ERROR(r.Int(batch.values, "values"));
  PAILLIER_RETURN_IF_ERROR(r.Int(batch.summands, "summands"));
  PAILLIER_RETURN_IF_ERROR(r.Int(count, "count"));
  PAILLIER_RETURN_IF_ERROR(r.Int(width, "ciphertext_bytes"));
  if (bits != key.modulus_bits() || batch.key_id != key.id()) {
    return r.Error("encrypted under another key (", bits, "-bit, id ", batch.key_id, ")");
  }
  if (width != key.ciphertext_bytes()) {
    return r.Error("ciphertext_bytes ", width, ", the key's ciphertexts have ",
                   key.ciphertext_bytes());
  }
  if (count == 0 || count > kMaxBatchCiphertexts) {
    return r.Error("count ", count, " outside 1..", kMaxBatchCiphertexts);
  }
  if (r.left() != count * width) {
    return r.Error(r.left(), " bytes of ciphertexts, count and width imply ", count * width);
  }
  if (batch.packing.value_bits == 0) {
    if (batch.packing.max_summands != 0 || batch.values != count || batch.summands == 0) {
      return r.Error("unpacked batch: values must equal count, max_summands be 0, summands >= 1");
    }
    return absl::OkStatus();
  }
  auto packer = Packer::Create(key, batch.packing);
  if (!packer.ok()) return r.Error(packer.status().message());
  if (batch.values == 0 || packer->PlaintextsFor(batch.values) != count) {
    return r.Error(batch.values, " packed values do not take ", count, " ciphertexts");
  }
  if (batch.summands == 0 || batch.summands > batch.packing.max_summands) {
    return r.Error("summands ", batch.summands, " outside 1..", batch.packing.max_summands);
  }
  return absl::OkStatus();
}

}  // namespace

std::string SerializePublicKey(const PublicKey& key) {
  std::string out;
  Writer w(out);
  WriteKeyHeader(w, kPublicKeyMagic, key.modulus_bits(), 1);
  w.Big(key.n(), KeyIntegerBytes(key.modulus_bits(), 1));
  return out;
}

absl::StatusOr<PublicKey> ParsePublicKey(std::string_view bytes, bool insecure_for_comparison) {
  Reader r(bytes, "Paillier public key");
  uint16_t bits = 0;
  uint32_t width = 0;
  PAILLIER_RETURN_IF_ERROR(ReadKeyHeader(r, kPublicKeyMagic, bits, width, 1));
  Mpz n;
  PAILLIER_RETURN_IF_ERROR(r.Big(n, width, "n"));
  PAILLIER_RETURN_IF_ERROR(r.End());
  if (n.bits() != bits) return r.Error("n has ", n.bits(), " bits, header says ", bits);
  auto key = PublicKey::FromModulus(n, insecure_for_comparison);
  if (!key.ok()) return r.Error(key.status().message());
  return key;
}

std::string SerializeKeyPair(const KeyPair& keys) {
  const size_t prime_bytes = KeyIntegerBytes(keys.public_key.modulus_bits(), 2);
  std::string out;
  Writer w(out);
  WriteKeyHeader(w, kKeyPairMagic, keys.public_key.modulus_bits(), 2);
  w.Big(keys.secret_key.p, prime_bytes);
  w.Big(keys.secret_key.q, prime_bytes);
  return out;
}

absl::StatusOr<KeyPair> ParseKeyPair(std::string_view bytes, bool insecure_for_comparison) {
  Reader r(bytes, "Paillier key pair");
  uint16_t bits = 0;
  uint32_t width = 0;
  PAILLIER_RETURN_IF_ERROR(ReadKeyHeader(r, kKeyPairMagic, bits, width, 2));
  SecretMpz p, q;
  PAILLIER_RETURN_IF_ERROR(r.Big(p, width, "p"));
  PAILLIER_RETURN_IF_ERROR(r.Big(q, width, "q"));
  PAILLIER_RETURN_IF_ERROR(r.End());
  auto keys = KeyPairFromPrimes(p, q, insecure_for_comparison);
  if (!keys.ok()) return r.Error(keys.status().message());
  if (keys->public_key.modulus_bits() != bits) {
    return r.Error("p q has ", keys->public_key.modulus_bits(), " bits, header says ", bits);
  }
  return keys;
}

absl::StatusOr<std::string> SerializeBatch(const PublicKey& key, const CiphertextBatch& batch) {
  if (batch.key_id != key.id()) {
    return absl::InvalidArgumentError("ciphertext batch belongs to another key");
  }
  const size_t width = key.ciphertext_bytes();
  std::string out;
  out.reserve(kBatchHeaderBytes + batch.ciphertexts.size() * width);
  Writer w(out);
  w.Magic(kBatchMagic);
  w.Int(kPaillierFormatVersion);
  w.Int(static_cast<uint16_t>(key.modulus_bits()));
  w.Int(batch.key_id);
  w.Int(batch.packing.value_bits);
  w.Int(batch.packing.max_summands);
  w.Int(batch.values);
  w.Int(batch.summands);
  w.Int(static_cast<uint64_t>(batch.ciphertexts.size()));
  w.Int(static_cast<uint32_t>(width));
  for (const Ciphertext& c : batch.ciphertexts) {
    if (mpz_sgn(c.value.get()) <= 0 || mpz_cmp(c.value.get(), key.n_squared().get()) >= 0) {
      return absl::InvalidArgumentError("ciphertext batch: a ciphertext is not in [1, n^2)");
    }
    w.Big(c.value, width);
  }
  return out;
}

absl::StatusOr<CiphertextBatch> ParseBatch(std::string_view bytes, const PublicKey& key) {
  Reader r(bytes, "Paillier ciphertext batch");
  CiphertextBatch batch;
  uint64_t count = 0;
  PAILLIER_RETURN_IF_ERROR(ReadBatchHeader(r, key, batch, count));
  batch.ciphertexts.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    Mpz& c = batch.ciphertexts[i].value;
    PAILLIER_RETURN_IF_ERROR(r.Big(c, key.ciphertext_bytes(), "ciphertext"));
    if (mpz_sgn(c.get()) == 0 || mpz_cmp(c.get(), key.n_squared().get()) >= 0) {
      return r.Error("ciphertext ", i, " is not in [1, n^2)");
    }
  }
  return batch;
}

}  // namespace veil::he
