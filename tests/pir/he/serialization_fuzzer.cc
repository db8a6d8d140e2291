// Fuzz target for the BFV wire formats (pir/he/serialization.h: RGSW, compressed ciphertexts and
// ciphertexts with a rounded c_0 included) and protocol bfv-bag's messages (pir/he/bag.h: the
// query a client sends, the table info a server publishes), under a tiny context (N = 16) so that
// an input is a few hundred bytes; the parsers' code is the same at N = 8192. The first byte
// chooses the parser, the rest is its input. Invariants: every parser fails with INVALID_ARGUMENT
// or gives an object that serializes back to exactly the input (one encoding per object); a
// parsed ciphertext decrypts.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pir/he/bag.h"
#include "pir/he/bfv.h"
#include "pir/he/bfv_context.h"
#include "pir/he/encoder.h"
#include "pir/he/modarith.h"
#include "pir/he/rgsw.h"
#include "pir/he/serialization.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

using namespace veil::he;

enum Kind : uint8_t {
  kCiphertext,
  kPublicKey,
  kRelinKey,
  kGaloisKeys,
  kSecretKey,
  kBagQuery,
  kBagTableInfo,
  kRgsw,
  kCompressed,
  kKinds
};
constexpr size_t kMaxBlocks = 4;

// Fixed parameters: a corpus of valid objects stays valid (their params id is in every message).
const BfvContext& Context() {
  static const std::shared_ptr<const BfvContext>* ctx = [] {
    constexpr int kLogN = 4;
    auto primes = GenerateNttPrimes(30, uint64_t{2} << kLogN, 4);
    Check(primes.ok(), "GenerateNttPrimes failed");
    auto t = GenerateNttPrimes(17, uint64_t{2} << kLogN, 1);
    Check(t.ok(), "GenerateNttPrimes failed");
    auto params =
        BfvParams::Create(kLogN, {(*primes)[0], (*primes)[1], (*primes)[2]}, (*primes)[3], (*t)[0]);
    Check(params.ok(), "BfvParams::Create failed");
    auto ctx = BfvContext::Create(*params);
    Check(ctx.ok(), "BfvContext::Create failed");
    return new std::shared_ptr<const BfvContext>(*ctx);
  }();
  return **ctx;
}

// A key to decrypt parsed ciphertexts with: any key must decrypt any well-formed ciphertext (to
// noise, unless it is the key the ciphertext was made with).
const SecretKey& Secret() {
  static const SecretKey* sk = new SecretKey(GenerateSecretKey(Context()));
  return *sk;
}

std::vector<uint8_t> Tagged(Kind kind, absl::StatusOr<std::vector<uint8_t>> bytes) {
  Check(bytes.ok(), "a seed does not serialize");
  bytes->insert(bytes->begin(), kind);
  return *std::move(bytes);
}

// Serializes what `parse` returned, or nothing if it failed.
template <typename T, typename Serialize>
void CheckRoundTrip(const absl::StatusOr<T>& parsed, absl::Span<const uint8_t> bytes,
                    Serialize serialize) {
  if (!parsed.ok()) {
    Check(parsed.status().code() == absl::StatusCode::kInvalidArgument,
          "a parser returned another code than INVALID_ARGUMENT");
    return;
  }
  absl::StatusOr<std::vector<uint8_t>> again = serialize(*parsed);
  Check(again.ok(), "a parsed object does not serialize");
  Check(*again == std::vector<uint8_t>(bytes.begin(), bytes.end()),
        "Parse then Serialize changed the bytes");
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  const BfvContext& ctx = Context();
  const SecretKey& sk = Secret();
  const Plaintext m = *EncodeSlots(ctx, {1, 2, 3, 4, 5});
  const Ciphertext seeded = *EncryptSymmetric(ctx, sk, m);
  const Ciphertext full = *Add(ctx, seeded, seeded);
  const Ciphertext three = *Multiply(ctx, full, full);
  std::vector<std::vector<uint8_t>> seeds = {
      Tagged(kCiphertext, SerializeCiphertext(ctx, seeded)),
      Tagged(kCiphertext, SerializeCiphertext(ctx, full)),
      Tagged(kCiphertext, SerializeCiphertext(ctx, three)),
      Tagged(kCiphertext, SerializeCiphertext(ctx, seeded, 20)),
      Tagged(kPublicKey, SerializePublicKey(ctx, *GeneratePublicKey(ctx, sk))),
      Tagged(kRelinKey, SerializeRelinKey(ctx, *GenerateRelinKey(ctx, sk))),
      Tagged(kGaloisKeys, SerializeGaloisKeys(ctx, *GenerateGaloisKeys(ctx, sk, {3, 31}))),
      Tagged(kSecretKey, SerializeSecretKey(ctx, sk)),
      Tagged(kBagQuery, SerializeBagQuery(ctx, BagQuery{{seeded, full}})),
      Tagged(kBagQuery, SerializeBagQuery(ctx, BagQuery{{seeded, full}, 12})),
      Tagged(kBagTableInfo, SerializeBagTableInfo({ctx.params().Id(), 100, 8, 1000})),
      Tagged(kRgsw, SerializeRgswCiphertexts(
                        ctx, {*EncryptRgswBit(ctx, sk, 0), *EncryptRgswBit(ctx, sk, 1)})),
      Tagged(kCompressed, SerializeCompressedCiphertext(ctx, *Compress(ctx, full))),
  };
  return seeds;
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::he;
  using namespace veil::fuzz;
  if (size < 1) return 0;
  const BfvContext& ctx = Context();
  const absl::Span<const uint8_t> bytes(data + 1, size - 1);
  switch (data[0] % kKinds) {
    case kCiphertext: {
      auto ct = ParseCiphertext(ctx, bytes);
      CheckRoundTrip(ct, bytes, [&](const Ciphertext& c) {
        return SerializeCiphertext(ctx, c, SerializedRoundBits(bytes));
      });
      if (ct.ok()) Check(Decrypt(ctx, Secret(), *ct).ok(), "a parsed ciphertext does not decrypt");
      break;
    }
    case kPublicKey:
      CheckRoundTrip(ParsePublicKey(ctx, bytes), bytes,
                     [&](const PublicKey& k) { return SerializePublicKey(ctx, k); });
      break;
    case kRelinKey:
      CheckRoundTrip(ParseRelinKey(ctx, bytes), bytes,
                     [&](const RelinKey& k) { return SerializeRelinKey(ctx, k); });
      break;
    case kGaloisKeys:
      CheckRoundTrip(ParseGaloisKeys(ctx, bytes), bytes,
                     [&](const GaloisKeys& k) { return SerializeGaloisKeys(ctx, k); });
      break;
    case kSecretKey:
      CheckRoundTrip(ParseSecretKey(ctx, bytes), bytes,
                     [&](const SecretKey& k) { return SerializeSecretKey(ctx, k); });
      break;
    case kBagQuery:
      CheckRoundTrip(ParseBagQuery(ctx, bytes, kMaxBlocks), bytes,
                     [&](const BagQuery& q) { return SerializeBagQuery(ctx, q); });
      break;
    case kBagTableInfo:
      CheckRoundTrip(ParseBagTableInfo(bytes), bytes,
                     [](const BagTableInfo& info) -> absl::StatusOr<std::vector<uint8_t>> {
                       return SerializeBagTableInfo(info);
                     });
      break;
    case kRgsw:
      CheckRoundTrip(
          ParseRgswCiphertexts(ctx, bytes), bytes,
          [&](const std::vector<RgswCiphertext>& g) { return SerializeRgswCiphertexts(ctx, g); });
      break;
    case kCompressed: {
      auto ct = ParseCompressedCiphertext(ctx, bytes);
      CheckRoundTrip(ct, bytes, [&](const CompressedCiphertext& c) {
        return SerializeCompressedCiphertext(ctx, c);
      });
      if (ct.ok()) {
        Check(DecryptCompressed(ctx, Secret(), *ct).ok(),
              "a parsed compressed ciphertext does not decrypt");
      }
      break;
    }
  }
  return 0;
}
