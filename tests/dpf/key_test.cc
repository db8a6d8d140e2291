// Key wire format, validation of hostile input, and where key generation gets its randomness.
// (The privacy property, that a server's key does not depend on alpha or beta: privacy_test.cc.)
#include <random>

#include "dpf/eval.h"
#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gtest/gtest.h"

namespace veil::dpf {
namespace {

void ExpectInvalid(absl::Span<const uint8_t> bytes, const std::string& message_part) {
  auto key = DpfKey::Parse(bytes);
  ASSERT_FALSE(key.ok()) << "accepted a bad key, expected: " << message_part;
  EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(key.status().message().find(message_part), std::string::npos) << key.status();
}

TEST(KeyFormatTest, SizeAtTwoToTheTwentyIsCompact) {
  DpfParameters params{20, Prg::kAes128, OutputType::kAdditive, 4};
  EXPECT_EQ(DpfKey::SerializedSize(params), 345u);
  auto keys = GenerateKeys(params, 12345, 1);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->first.Serialize().size(), 345u);
  DpfParameters xor_params{20, Prg::kAes128, OutputType::kXor, 0};
  EXPECT_EQ(DpfKey::SerializedSize(xor_params), 7u + 16 + 13 * 16 + 2 + 16);
}

TEST(KeyFormatTest, RoundTripPreservesEvaluation) {
  for (Prg prg : {Prg::kAes128, Prg::kChaCha20, Prg::kSipHash}) {
    for (const char* out : {"add16", "add1", "xor"}) {
      DpfParameters params = *ParseOutput(out, {13, prg});
      auto keys = GenerateKeys(params, 999, 1);
      ASSERT_TRUE(keys.ok());
      for (const DpfKey* key : {&keys->first, &keys->second}) {
        auto parsed = DpfKey::Parse(key->Serialize());
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_EQ(parsed->Serialize(), key->Serialize());
        EXPECT_EQ(*EvalFull(*parsed), *EvalFull(*key));
        EXPECT_EQ(parsed->party(), key->party());
      }
    }
  }
}

TEST(KeyFormatTest, RejectsEveryTruncationAndExtension) {
  auto keys = GenerateKeys({20}, 5, 1);
  std::vector<uint8_t> bytes = keys->second.Serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto key = DpfKey::Parse(absl::MakeConstSpan(bytes.data(), len));
    ASSERT_FALSE(key.ok()) << "accepted a key truncated to " << len;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  }
  ExpectInvalid(absl::MakeConstSpan(bytes.data(), 3), "truncated");
  ExpectInvalid(absl::MakeConstSpan(bytes.data(), 100), "does not match its parameters");
  bytes.push_back(0);
  ExpectInvalid(bytes, "length 346 does not match");
}

TEST(KeyFormatTest, RejectsBadHeaderFields) {
  auto keys = GenerateKeys({20}, 5, 1);
  const std::vector<uint8_t> good = keys->second.Serialize();
  auto with = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> b = good;
    b[offset] = value;
    return b;
  };
  ExpectInvalid(with(0, 'X'), "wrong magic");
  ExpectInvalid(with(2, 9), "version 9 is not supported");
  ExpectInvalid(with(2, 1), "version 1 is not supported (expected 2)");
  ExpectInvalid(with(3, 0), "unknown PRG id 0");
  ExpectInvalid(with(3, 77), "unknown PRG id 77");
  ExpectInvalid(with(4, 0), "log domain 0 out of range");
  ExpectInvalid(with(4, 41), "log domain 41 out of range");
  ExpectInvalid(with(5, 0x43), "unknown output type 3");
  ExpectInvalid(with(5, 0x51), "leaf words log2 5 out of range");
  ExpectInvalid(with(5, 0x12), "nonzero leaf-words field");
  ExpectInvalid(with(6, 2), "party 2 is not 0 or 1");
  ExpectInvalid(with(6, 0), "root control bit contradicts its party");
  auto xor_keys = GenerateKeys(*ParseOutput("xor", {20}), 5, 1);
  std::vector<uint8_t> x = xor_keys->first.Serialize();
  x[kKeyHeaderBytes + 16 + 13 * 16 + 1] |= 0x80;
  ExpectInvalid(x, "nonzero padding bits");
}

TEST(KeyFormatTest, GenerateRejectsBadArguments) {
  EXPECT_EQ(GenerateKeys({10}, 1024, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateKeys({0}, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateKeys(*ParseOutput("xor", {10}), 3, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EvalPoint(GenerateKeys({10}, 3, 1)->first, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParsePrg("aes256").ok());
  EXPECT_FALSE(ParseOutput("add32", {}).ok());
}

TEST(KeyFormatTest, RandomBytesNeverCrashTheParser) {
  std::mt19937_64 gen(3);
  auto keys = GenerateKeys({12}, 5, 1);
  const std::vector<uint8_t> good = keys->first.Serialize();
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + gen() % 4;
    for (int f = 0; f < flips; ++f) b[gen() % b.size()] = static_cast<uint8_t>(gen());
    if (gen() % 4 == 0) b.resize(gen() % (b.size() + 8));
    auto key = DpfKey::Parse(b);
    if (key.ok()) (void)EvalPoint(*key, gen() % 4096);  // accepted keys must evaluate safely
  }
}

TEST(KeyGenerationTest, ProductionKeysDrawFreshRootSeeds) {
  DpfParameters params{10};
  auto a = GenerateKeys(params, 7, 1);
  auto b = GenerateKeys(params, 7, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->first.root(), b->first.root());
  EXPECT_NE(a->second.root(), b->second.root());
  EXPECT_NE(a->first.Serialize(), b->first.Serialize());
}

TEST(KeyGenerationTest, SeededKeysAreReproducible) {
  DpfParameters params{10};
  SeededRandomForTesting rng1(7), rng2(7), rng3(8);
  auto a = GenerateKeys(params, 7, 1, rng1);
  auto b = GenerateKeys(params, 7, 1, rng2);
  auto c = GenerateKeys(params, 7, 1, rng3);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->first.Serialize(), b->first.Serialize());
  EXPECT_EQ(a->second.Serialize(), b->second.Serialize());
  EXPECT_NE(a->first.Serialize(), c->first.Serialize());
  EXPECT_EQ(*EvalPoint(a->first, 7) + *EvalPoint(a->second, 7), 1u);
}

}  // namespace
}  // namespace veil::dpf
