#include "pir/he/paillier/serialize.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/pir/he/paillier/test_support.h"

namespace veil::he {
namespace {

using ::testing::HasSubstr;
using testing::TestKeys;
using testing::TestSeed;
using testing::VectorsOf;

// Little-endian field writes at byte offsets of a serialized object.
template <class T>
void Put(std::string& bytes, size_t offset, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) bytes[offset + i] = static_cast<char>(v >> (8 * i));
}

CiphertextBatch PackedReport(const PublicKey& pk, uint64_t max_summands) {
  auto packer = Packer::Create(pk, {.value_bits = 12, .max_summands = max_summands});
  TextbookRandomizer fresh(pk);
  std::vector<uint64_t> values(100);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i * 37 % 4096;
  return *EncryptPacked(pk, *packer, values, fresh);
}

TEST(PaillierSerialize, KeysAndBatchesRoundTrip) {
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  const std::string public_bytes = SerializePublicKey(pk);
  EXPECT_EQ(public_bytes.size(), kPublicKeyHeaderBytes + 128);
  auto parsed = ParsePublicKey(public_bytes, true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->n(), pk.n());
  EXPECT_EQ(parsed->id(), pk.id());

  const std::string secret_bytes = SerializeKeyPair(keys);
  EXPECT_EQ(secret_bytes.size(), kKeyPairHeaderBytes + 2 * 64);
  auto pair = ParseKeyPair(secret_bytes, true);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->secret_key.p, keys.secret_key.p);
  EXPECT_EQ(pair->public_key.id(), pk.id());

  const CiphertextBatch batch = PackedReport(pk, 10);
  auto bytes = SerializeBatch(pk, batch);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), kBatchHeaderBytes + batch.ciphertexts.size() * 256);
  auto back = ParseBatch(*bytes, pk);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ciphertexts, batch.ciphertexts);
  EXPECT_EQ(back->packing, batch.packing);
  EXPECT_EQ(back->values, 100u);
  EXPECT_EQ(back->summands, 1u);
}

TEST(PaillierSerialize, MalformedKeysGiveClearErrors) {
  const KeyPair& keys = TestKeys(1024);
  const std::string good = SerializePublicKey(keys.public_key);
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_EQ(ParsePublicKey(good.substr(0, cut), true).status().code(),
              absl::StatusCode::kInvalidArgument)
        << cut;
  }
  auto message = [](absl::StatusOr<PublicKey> r) { return std::string(r.status().message()); };
  EXPECT_THAT(message(ParsePublicKey(good + "x", true)), HasSubstr("1 trailing bytes"));
  EXPECT_THAT(message(ParsePublicKey("VPSK" + good.substr(4), true)), HasSubstr("bad magic"));
  std::string version = good;
  Put<uint16_t>(version, 4, 2);
  EXPECT_THAT(message(ParsePublicKey(version, true)), HasSubstr("unsupported version 2"));
  std::string length = good;
  Put<uint32_t>(length, 8, 127);
  EXPECT_THAT(message(ParsePublicKey(length, true)), HasSubstr("does not match 1024-bit"));
  std::string even = good;
  even.back() = static_cast<char>(even.back() & ~1);
  EXPECT_THAT(message(ParsePublicKey(even, true)), HasSubstr("must be odd"));
  EXPECT_THAT(message(ParsePublicKey(good, false)), HasSubstr("insecure"));
  std::string small = good;
  small[kPublicKeyHeaderBytes] = 0;  // n loses its top bits
  EXPECT_THAT(message(ParsePublicKey(small, true)), HasSubstr("bits, header says 1024"));

  const std::string pair = SerializeKeyPair(keys);
  std::string composite = pair;
  composite[kKeyPairHeaderBytes + 63] ^= 2;  // p + 2 or p - 2: not prime
  EXPECT_THAT(ParseKeyPair(composite, true).status().message(), HasSubstr("not prime"));
  std::string same =
      pair.substr(0, kKeyPairHeaderBytes + 64) + pair.substr(kKeyPairHeaderBytes, 64);
  EXPECT_THAT(ParseKeyPair(same, true).status().message(), HasSubstr("distinct"));
  EXPECT_THAT(ParseKeyPair(pair.substr(0, 100), true).status().message(), HasSubstr("truncated"));
  EXPECT_THAT(ParseKeyPair(good, true).status().message(), HasSubstr("bad magic"));
}

TEST(PaillierSerialize, MalformedBatchesGiveClearErrors) {
  const PublicKey& pk = TestKeys(1024).public_key;
  const CiphertextBatch batch = PackedReport(pk, 10);
  const std::string good = *SerializeBatch(pk, batch);
  auto message = [&](const std::string& bytes) {
    return std::string(ParseBatch(bytes, pk).status().message());
  };
  EXPECT_THAT(message(good.substr(0, 30)), HasSubstr("truncated at values"));
  EXPECT_THAT(message(good.substr(0, good.size() - 1)), HasSubstr("count and width imply"));
  EXPECT_THAT(std::string(ParseBatch(good, TestKeys(2048).public_key).status().message()),
              HasSubstr("another key"));
  std::string id = good;
  Put<uint64_t>(id, 8, pk.id() ^ 1);
  EXPECT_THAT(message(id), HasSubstr("another key"));
  std::string bits = good;
  Put<uint32_t>(bits, 16, 0);
  EXPECT_THAT(message(bits), HasSubstr("unpacked batch"));
  Put<uint32_t>(bits, 16, 63);
  EXPECT_THAT(message(bits), HasSubstr("value_bits must be in 1..62"));
  std::string values = good;
  Put<uint64_t>(values, 28, 1000);
  EXPECT_THAT(message(values), HasSubstr("1000 packed values do not take"));
  std::string summands = good;
  Put<uint64_t>(summands, 36, 11);
  EXPECT_THAT(message(summands), HasSubstr("summands 11 outside 1..10"));
  std::string count = good;
  Put<uint64_t>(count, 44, kMaxBatchCiphertexts + 1);
  EXPECT_THAT(message(count), HasSubstr("outside 1.."));
  std::string width = good;
  Put<uint32_t>(width, 52, 255);
  EXPECT_THAT(message(width), HasSubstr("ciphertext_bytes 255"));
  std::string zero = good;
  std::fill(zero.begin() + kBatchHeaderBytes, zero.begin() + kBatchHeaderBytes + 256, '\0');
  EXPECT_THAT(message(zero), HasSubstr("ciphertext 0 is not in [1, n^2)"));
  std::string big = good;
  std::fill(big.end() - 256, big.end(), '\xff');
  EXPECT_THAT(message(big), HasSubstr("is not in [1, n^2)"));

  CiphertextBatch foreign = batch;
  foreign.key_id ^= 1;
  EXPECT_THAT(SerializeBatch(pk, foreign).status().message(), HasSubstr("another key"));
}

// Random corruptions never crash and are either rejected or parse to a valid batch.
TEST(PaillierSerialize, RandomCorruptionsAreRejectedOrValid) {
  std::mt19937_64 rng(TestSeed() + 30);
  const PublicKey& pk = TestKeys(1024).public_key;
  const std::string good = *SerializeBatch(pk, PackedReport(pk, 3));
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    const size_t at = rng() % kBatchHeaderBytes;
    bad[at] = static_cast<char>(rng());
    auto parsed = ParseBatch(bad, pk);
    if (parsed.ok()) {
      EXPECT_EQ(parsed->ciphertexts.size(), 2u);
    } else {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(PaillierSerialize, TheKnownAnswerKeysParseAtEverySize) {
  for (int bits : {2048, 3072}) {
    const KeyPair& keys = TestKeys(bits);
    auto pk = ParsePublicKey(SerializePublicKey(keys.public_key), false);
    ASSERT_TRUE(pk.ok()) << pk.status();
    EXPECT_EQ(pk->modulus_bits(), bits);
    const auto* v = VectorsOf("enc", bits).at(3);
    CiphertextBatch batch{pk->id(), {0, 0}, 1, 1, {{v->numbers[2]}}};
    auto back = ParseBatch(*SerializeBatch(*pk, batch), *pk);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ciphertexts[0].value, v->numbers[2]);
  }
}

}  // namespace
}  // namespace veil::he
