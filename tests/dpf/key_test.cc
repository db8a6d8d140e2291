// Key wire format, validation of hostile input, and the privacy property: the key one server
// receives does not depend on alpha.
#include <cmath>
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

// Largest per-bit chi-square statistic (2x2 table, 1 degree of freedom) between two sets of
// serialized keys: a bit whose frequency depends on alpha shows up as a large value.
double MaxBitChiSquare(const std::vector<std::vector<uint8_t>>& a,
                       const std::vector<std::vector<uint8_t>>& b) {
  const size_t bits = a[0].size() * 8;
  double worst = 0;
  for (size_t bit = kKeyHeaderBytes * 8; bit < bits; ++bit) {
    double ones_a = 0, ones_b = 0;
    for (const auto& k : a) ones_a += (k[bit / 8] >> (bit % 8)) & 1;
    for (const auto& k : b) ones_b += (k[bit / 8] >> (bit % 8)) & 1;
    const double na = a.size(), nb = b.size(), n = na + nb;
    const double ones = ones_a + ones_b, zeros = n - ones;
    if (ones == 0 || zeros == 0) continue;  // a constant bit (e.g. the root control bit)
    double chi = 0;
    const double obs[4] = {ones_a, na - ones_a, ones_b, nb - ones_b};
    const double exp[4] = {na * ones / n, na * zeros / n, nb * ones / n, nb * zeros / n};
    for (int i = 0; i < 4; ++i) chi += (obs[i] - exp[i]) * (obs[i] - exp[i]) / exp[i];
    worst = std::max(worst, chi);
  }
  return worst;
}

TEST(KeyPrivacyTest, ServerKeyDoesNotDependOnAlpha) {
  // Two very different alphas; if any key bit's frequency depended on alpha the chi-square of
  // that bit would grow with the number of keys. 1e-7 per-bit false-alarm level, Bonferroni over
  // the ~1,500 bits of a key: critical value 28.4.
  constexpr int kKeys = 3000;
  constexpr double kCritical = 28.4;
  for (const char* out : {"add16", "xor"}) {
    for (int party = 0; party < 2; ++party) {
      DpfParameters params = *ParseOutput(out, {12, Prg::kAes128});
      SeededRandomForTesting rng(42 + party);
      std::vector<std::vector<uint8_t>> a, b, leaky;
      for (int i = 0; i < kKeys; ++i) {
        auto ka = GenerateKeys(params, 5, 1, rng);
        auto kb = GenerateKeys(params, 4000, 1, rng);
        a.push_back(party ? ka->second.Serialize() : ka->first.Serialize());
        b.push_back(party ? kb->second.Serialize() : kb->first.Serialize());
        // A deliberately leaky variant: in 60% of the keys the last bit of the final word is
        // forced to alpha's top bit (1 for alpha = 4000), otherwise it is left as generated.
        std::vector<uint8_t> l = b.back();
        if (i % 10 < 6) l.back() |= 0x80;
        leaky.push_back(l);
      }
      const double honest = MaxBitChiSquare(a, b);
      EXPECT_LT(honest, kCritical) << out << " party " << party;
      EXPECT_GT(MaxBitChiSquare(a, leaky), kCritical) << "the test failed to see a leak";
    }
  }
}

}  // namespace
}  // namespace veil::dpf
