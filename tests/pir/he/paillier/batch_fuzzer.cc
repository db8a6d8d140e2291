// Fuzz target for the Paillier parsers (cmake/VeilFuzz.cmake): any bytes either fail to parse
// with a Status or give a key or batch that the library then uses safely (a parsed batch is
// aggregated and decrypted; a packed one unpacked), and a parsed batch serializes back to exactly
// its bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/packing.h"
#include "pir/he/paillier/randomizer.h"
#include "pir/he/paillier/serialize.h"
#include "tests/fuzz/fuzz.h"

// The 1024-bit key of data/vectors.txt: fixed, so that a corpus of valid batches stays valid.
constexpr char kP[] =
    "d55d027060df6e9c9775d7e93438c90c1969732a86c05370cde7e01f8e81151c"
    "b2106bdb2847089b4d940069f7032448fece9f0ec4e72f27140dd88096c3ac6d";
constexpr char kQ[] =
    "f797c209b05e5df076428b944c8fba08cfb1eb344538e0feacdeff6414ac6acb"
    "e96b8e3b4bab1118d5d761b4815132e824734d18b6ed8e7baf5a37cac691cb01";

namespace veil::fuzz {

const he::KeyPair* Keys() {
  static const he::KeyPair* keys =
      new he::KeyPair(*he::KeyPairFromPrimes(*he::Mpz::FromHex(kP), *he::Mpz::FromHex(kQ), true));
  return keys;
}

std::vector<std::vector<uint8_t>> Seeds() {
  const he::KeyPair& keys = *Keys();
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  std::vector<std::vector<uint8_t>> seeds = {text(SerializePublicKey(keys.public_key)),
                                             text(SerializeKeyPair(keys))};
  auto randomizer = he::FixedBaseRandomizer::Create(keys.public_key);
  Check(randomizer.ok(), "FixedBaseRandomizer::Create failed");
  for (he::PackingSpec spec : {he::PackingSpec{8, 1}, he::PackingSpec{16, 4}}) {
    auto packer = he::Packer::Create(keys.public_key, spec);
    Check(packer.ok(), "Packer::Create failed");
    auto batch = he::EncryptPacked(keys.public_key, *packer, {1, 2, 3, 200}, **randomizer);
    Check(batch.ok(), "EncryptPacked failed");
    auto bytes = he::SerializeBatch(keys.public_key, *batch);
    Check(bytes.ok(), "SerializeBatch failed");
    seeds.push_back(text(*bytes));
  }
  return seeds;
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::he;
  const KeyPair* keys = veil::fuzz::Keys();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ParsePublicKey(bytes, true);
  (void)ParseKeyPair(bytes, true);
  auto batch = ParseBatch(bytes, keys->public_key);
  if (!batch.ok()) return 0;
  auto again = SerializeBatch(keys->public_key, *batch);
  veil::fuzz::Check(again.ok() && *again == bytes,
                    "ParseBatch then SerializeBatch changed the bytes");
  auto sum = AggregateBatches(keys->public_key, {*batch, *batch}, 2);
  if (batch->packing.value_bits == 0) {
    for (const Ciphertext& c : batch->ciphertexts) (void)Decrypt(*keys, c);
    return 0;
  }
  auto packer = Packer::Create(keys->public_key, batch->packing);
  if (packer.ok()) (void)DecryptPacked(*keys, *packer, *batch);
  if (packer.ok() && sum.ok()) (void)DecryptPacked(*keys, *packer, *sum);
  return 0;
}
