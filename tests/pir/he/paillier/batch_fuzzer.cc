// libFuzzer target for the Paillier parsers: any bytes either fail to parse with a Status or give
// a key or batch that the library then uses safely (a parsed batch is aggregated and decrypted;
// a packed one unpacked). Build with Clang (the CMake rule adds -fsanitize=fuzzer), e.g.
//   CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DVEIL_SANITIZE=ON \
//     "-DVEIL_COMPONENTS=dpf;pir;tests/pir"
//   ninja -C build-fuzz he_paillier_batch_fuzzer &&
//     build-fuzz/bin/he_paillier_batch_fuzzer -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/serialize.h"

// The 1024-bit key of data/vectors.txt: fixed, so that a corpus of valid batches stays valid.
constexpr char kP[] =
    "d55d027060df6e9c9775d7e93438c90c1969732a86c05370cde7e01f8e81151c"
    "b2106bdb2847089b4d940069f7032448fece9f0ec4e72f27140dd88096c3ac6d";
constexpr char kQ[] =
    "f797c209b05e5df076428b944c8fba08cfb1eb344538e0feacdeff6414ac6acb"
    "e96b8e3b4bab1118d5d761b4815132e824734d18b6ed8e7baf5a37cac691cb01";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::he;
  static const KeyPair* keys =
      new KeyPair(*KeyPairFromPrimes(*Mpz::FromHex(kP), *Mpz::FromHex(kQ), true));
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ParsePublicKey(bytes, true);
  (void)ParseKeyPair(bytes, true);
  auto batch = ParseBatch(bytes, keys->public_key);
  if (!batch.ok()) return 0;
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
