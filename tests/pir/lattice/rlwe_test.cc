#include "pir/lattice/rlwe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/scratch.h"
#include "pir/lattice/expansion.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

RingContext DefaultContext() { return *RingContext::Create(RingParams::Default()); }

TEST(RingParamsTest, DefaultIsVipirsSetWithinTheStandard) {
  const RingParams p = RingParams::Default();
  EXPECT_EQ(p.log_n, 12);
  EXPECT_EQ(p.primes, (std::vector<uint64_t>{536813569, 536690689, 536641537}));
  // The three largest primes below 2^29 that are 1 mod 2N.
  EXPECT_EQ(*he::GenerateNttPrimes(29, 8192, 3), p.primes);
  EXPECT_THAT(p.SecuritySource(), HasSubstr("128-bit classical security for N = 2^12"));
  // The special prime: the largest prime = 1 mod 2N that keeps QP within the standard.
  EXPECT_EQ(p.special, 4169729u);
  EXPECT_EQ(*he::GenerateNttPrimes(22, 8192, 1), std::vector<uint64_t>{p.special});
  EXPECT_THAT(p.SecuritySource(), HasSubstr("log2 QP = 108.99"));
  EXPECT_THAT(RingParams::Create(12, p.primes)->SecuritySource(), HasSubstr("log2 Q = 86.99"));
  // Four such primes (116 bits) exceed the standard's 109 at N = 4096; so does a 23-bit P.
  const RingParams big = *RingParams::Create(12, *he::GenerateNttPrimes(29, 8192, 4));
  EXPECT_THAT(big.SecuritySource(), HasSubstr("no security claim"));
  const RingParams big_p =
      *RingParams::Create(12, p.primes, *he::GenerateNttPrimes(23, 8192, 1)->begin());
  EXPECT_THAT(big_p.SecuritySource(), HasSubstr("no security claim: log2 QP = 110 exceeds"));
}

TEST(RingParamsTest, RefusesBadParameters) {
  const auto expect_refused = [](int log_n, std::vector<uint64_t> primes, const char* message) {
    const absl::StatusOr<RingParams> p = RingParams::Create(log_n, std::move(primes));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(message));
  };
  expect_refused(9, {536813569}, "log N must be in [10, 16], got 9");
  expect_refused(12, {}, "Q needs 1 to 16 primes, got 0");
  expect_refused(12, {536813571}, "is not a prime = 1 mod 8192 below 2^32");  // not prime
  expect_refused(12, {12289}, "12289 is not a prime = 1 mod 8192");           // 1 mod 2^12 only
  expect_refused(12, {(uint64_t{1} << 32) + 1 + 8192 * 3}, "below 2^32");
  expect_refused(12, {536813569, 536813569}, "prime 536813569 twice");
  EXPECT_THAT(RingParams::Create(12, {536813569}, 536813569).status().message(),
              HasSubstr("the special prime 536813569 is also a prime of Q"));
  EXPECT_THAT(RingParams::Create(12, {536813569}, 12289).status().message(),
              HasSubstr("special prime 12289 is not a prime = 1 mod 8192"));
}

TEST(RingContextTest, EncodingAndScalingMatchExactIntegerArithmetic) {
  const RingContext ctx = DefaultContext();
  const he::RnsBase& base = ctx.base();
  ASSERT_EQ(base.product()[2], 0u);  // Q < 2^128: exact arithmetic in 128 bits
  const he::uint128_t q = static_cast<he::uint128_t>(base.product()[1]) << 64 | base.product()[0];
  const uint64_t response = ctx.response_modulus().value();
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  const size_t n = ctx.n();
  for (int trial = 0; trial < 4000; ++trial) {
    // Encoding a word: round(Q m / 2^32), then decoding gives m back.
    const uint32_t m = static_cast<uint32_t>(gen());
    const he::uint128_t encoded = ((q * m) + (he::uint128_t{1} << 31)) >> 32;
    std::vector<uint64_t> residues(ctx.k() * n, 0);
    for (size_t i = 0; i < ctx.k(); ++i) {
      residues[i * n] = ctx.EncodeWord(m, i);
      ASSERT_EQ(residues[i * n], static_cast<uint64_t>(encoded % base[i].value()));
    }
    ASSERT_EQ(ctx.DecodeWord(residues.data()), m);
    // A random x in Z_Q: round(2^32 x / Q) and round(q' x / Q), exactly.
    const he::uint128_t x = ((static_cast<he::uint128_t>(gen()) << 64) | gen()) % q;
    for (size_t i = 0; i < ctx.k(); ++i)
      residues[i * n] = static_cast<uint64_t>(x % base[i].value());
    const uint32_t word = static_cast<uint32_t>(((x << 32) + q / 2) / q);
    const uint64_t switched = static_cast<uint64_t>((x * response + q / 2) / q) % response;
    ASSERT_EQ(ctx.DecodeWord(residues.data()), word);
    ASSERT_EQ(ctx.SwitchResidue(residues.data()), switched);
    const uint64_t y = gen() % response;
    ASSERT_EQ(ctx.DecodeSwitchedWord(y),
              static_cast<uint32_t>(((he::uint128_t{y} << 32) + response / 2) / response));
  }
}

TEST(RlweTest, DecryptsWordsExactlyAndSwitchedWithinTheStatedNoise) {
  const RingContext ctx = DefaultContext();
  const RlweSecret secret = RlweSecret::Generate(ctx);
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 1);
  std::vector<uint32_t> words(ctx.n());
  for (uint32_t& w : words) w = static_cast<uint32_t>(gen());
  const RlweCiphertext ct = *EncryptWords(ctx, secret, words);
  // At Q the error (|e| <= 21) is 2^-50 of a word: decryption is exact.
  EXPECT_EQ(*DecryptWords(ctx, secret, ct), words);

  // Switched to q' ~ 2^29: the rounding r0 + r1 z adds at most 1/2 + N/2 units of q', i.e.
  // (1/2 + N/2) 2^32 / q' + 1/2 words, with standard deviation sqrt(1/12 + N/18) 2^32 / q'.
  const SwitchedCiphertext switched = *ModSwitch(ctx, ct);
  const std::vector<uint32_t> decrypted = *DecryptSwitched(ctx, secret, switched);
  const double scale = std::ldexp(1.0, 32) / static_cast<double>(ctx.response_modulus().value());
  const double bound = (0.5 + ctx.n() / 2.0) * scale + 1.5;
  const double sigma = std::sqrt(1.0 / 12 + ctx.n() / 18.0) * scale;
  double sum_squares = 0, largest = 0;
  for (size_t c = 0; c < ctx.n(); ++c) {
    const double noise = static_cast<int32_t>(decrypted[c] - words[c]);
    sum_squares += noise * noise;
    largest = std::max(largest, std::abs(noise));
  }
  const double measured = std::sqrt(sum_squares / ctx.n());
  EXPECT_LE(largest, bound);
  EXPECT_GT(measured, 0.9 * sigma);
  EXPECT_LT(measured, 1.1 * sigma);
  std::printf("switch noise: sigma %.1f (model %.1f), largest %.0f, bound %.0f words\n", measured,
              sigma, largest, bound);
}

TEST(RlweTest, RefusesWrongSizes) {
  const RingContext ctx = DefaultContext();
  const RlweSecret secret = RlweSecret::Generate(ctx);
  const absl::StatusOr<RlweCiphertext> too_long =
      EncryptWords(ctx, secret, std::vector<uint32_t>(ctx.n() + 1));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("at most N = 4096 words, got 4097"));
  RlweCiphertext ct = *EncryptWords(ctx, secret, std::vector<uint32_t>{1, 2, 3});
  ct.c1.pop_back();
  for (const absl::Status& s :
       {DecryptWords(ctx, secret, ct).status(), ModSwitch(ctx, ct).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("halves hold 12288 and 12287 residues, expected 12288"));
  }
  const absl::StatusOr<std::vector<uint32_t>> short_switched =
      DecryptSwitched(ctx, secret, SwitchedCiphertext{std::vector<uint32_t>(4096), {}});
  EXPECT_EQ(short_switched.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RlweTest, SwitchedCiphertextBytesAreEightNAndRoundTrip) {
  const RingContext ctx = DefaultContext();
  const RlweSecret secret = RlweSecret::Generate(ctx);
  const std::vector<uint32_t> words = {0x01000000u, 0xff000000u, 0x7f000000u};
  const SwitchedCiphertext switched = *ModSwitch(ctx, *EncryptWords(ctx, secret, words));
  std::vector<uint8_t> bytes = SerializeSwitched(switched);
  EXPECT_EQ(bytes.size(), 32768u);
  EXPECT_EQ(bytes.size(), SwitchedBytes(ctx));
  const SwitchedCiphertext parsed = *ParseSwitched(ctx, bytes);
  EXPECT_EQ(parsed.c0, switched.c0);
  EXPECT_EQ(parsed.c1, switched.c1);
  const std::vector<uint32_t> decrypted = *DecryptSwitched(ctx, secret, parsed);
  for (size_t c = 0; c < words.size(); ++c) EXPECT_EQ(RoundToByte(decrypted[c]), words[c] >> 24);

  const absl::StatusOr<SwitchedCiphertext> short_bytes =
      ParseSwitched(ctx, absl::MakeConstSpan(bytes).first(100));
  EXPECT_EQ(short_bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_bytes.status().message(), HasSubstr("is 32768 bytes, got 100"));
  const uint32_t too_big = 536813569;  // q' itself
  std::memcpy(bytes.data() + 4 * 4096 + 8, &too_big, 4);
  const absl::StatusOr<SwitchedCiphertext> bad = ParseSwitched(ctx, bytes);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("residue 2 is not below 536813569"));
}

// The 32-bit NTT kernels keep a narrowed copy of their input in this thread's scratch (after an
// inverse transform, its output times N): every transform of the secret, of a message or of a
// decryption's phase is wiped from it before the function returns (tests/pir/he/
// ntt_scratch_wipe_test.cc has the BFV side and the control).
TEST(RlweTest, SecretTransformsWipeTheNttScratch) {
  const RingContext ctx = DefaultContext();
  const size_t n = ctx.n();
  const auto leaves_zero = [n](const auto& fn) {
    using he::internal::GetScratch;
    using he::internal::Scratch;
    std::fill_n(GetScratch(Scratch::kNarrowNtt, n), n, 0xa5a5a5a5a5a5a5a5);
    fn();
    const uint64_t* s = GetScratch(Scratch::kNarrowNtt, n);
    return std::all_of(s, s + n, [](uint64_t w) { return w == 0; });
  };
  std::optional<RlweSecret> secret;
  EXPECT_TRUE(leaves_zero([&] { secret.emplace(RlweSecret::Generate(ctx)); }));
  const std::vector<uint32_t> words = {7, 1u << 31, 12345};
  RlweCiphertext ct;
  EXPECT_TRUE(leaves_zero([&] { ct = *EncryptWords(ctx, *secret, words); }));
  EXPECT_TRUE(leaves_zero([&] {
    EXPECT_TRUE(std::equal(words.begin(), words.end(), DecryptWords(ctx, *secret, ct)->begin()));
  }));
  const SwitchedCiphertext switched = *ModSwitch(ctx, ct);
  EXPECT_TRUE(leaves_zero([&] { (void)*DecryptSwitched(ctx, *secret, switched); }));
  std::vector<uint64_t> message(ctx.k() * n, 1);
  EXPECT_TRUE(leaves_zero([&] { (void)internal::EncryptForExpansion(ctx, *secret, absl::MakeSpan(message)); }));
}

}  // namespace
}  // namespace veil::lattice
