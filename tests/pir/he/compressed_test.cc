// Compressed ciphertexts: the rounding equals a multi-word reference exactly; compressed
// ciphertexts decrypt to what the full ones hold, with the noise budget compressed.h predicts;
// too few bits fail as predicted (the budget reads 0); the wire format round-trips and is strict.
#include "pir/he/compressed.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/bag.h"
#include "pir/he/encoder.h"
#include "pir/he/multiword.h"
#include "pir/he/rns.h"
#include "pir/he/serialization.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::BagContext;
using testing::Rng;

// N = 16, three 30-bit primes, t of 17 bits: every width differs from the bag's.
std::shared_ptr<const BfvContext> TinyContext() {
  static const auto* ctx = [] {
    const std::vector<uint64_t> q = *GenerateNttPrimes(30, 32, 4);
    const uint64_t t = (*GenerateNttPrimes(17, 32, 1))[0];
    return new std::shared_ptr<const BfvContext>(
        *BfvContext::Create(*BfvParams::Create(4, {q[0], q[1], q[2]}, q[3], t)));
  }();
  return *ctx;
}

// round(2^b c / Q) mod 2^b by long division of multi-word integers.
uint128_t ReferenceRound(const RnsBase& base, const uint64_t* residues, size_t stride, int b) {
  const size_t k = base.size(), w = k + 3;
  std::vector<uint64_t> num(w, 0), q(w, 0), half(w, 0), rem(w, 0), quotient(w, 0);
  base.Compose(residues, stride, absl::MakeSpan(num).first(k));
  std::copy(base.product().begin(), base.product().end(), q.begin());
  half = q;
  multiword::DivWordInPlace(absl::MakeSpan(half), 2);
  for (int left = b; left > 0; left -= 32) {
    multiword::MulWordInPlace(absl::MakeSpan(num), uint64_t{1} << std::min(left, 32));
  }
  multiword::AddInPlace(absl::MakeSpan(num), half);
  for (size_t bit = 64 * w; bit-- > 0;) {
    multiword::MulWordInPlace(absl::MakeSpan(rem), 2);
    const uint64_t one[] = {(num[bit / 64] >> (bit % 64)) & 1};
    multiword::AddInPlace(absl::MakeSpan(rem), one);
    if (multiword::Compare(rem, q) >= 0) {
      multiword::SubInPlace(absl::MakeSpan(rem), q);
      quotient[bit / 64] |= uint64_t{1} << (bit % 64);
    }
  }
  const uint128_t low = (uint128_t{quotient[1]} << 64) | quotient[0];
  return low & ((uint128_t{1} << b) - 1);
}

Ciphertext RandomCiphertext(const BfvContext& ctx, std::mt19937_64& rng) {
  Ciphertext ct{ctx.id(), 2, std::vector<uint64_t>(2 * ctx.q_size() * ctx.n()), std::nullopt};
  for (size_t i = 0; i < 2; ++i) {
    for (size_t j = 0; j < ctx.q_size(); ++j) {
      for (size_t c = 0; c < ctx.n(); ++c) {
        ct.data[(i * ctx.q_size() + j) * ctx.n() + c] = rng() % ctx.modulus(j).value();
      }
    }
  }
  return ct;
}

TEST(Compressed, RoundingEqualsTheMultiWordReference) {
  std::mt19937_64 rng = Rng(1);
  for (const auto& ctx : {BagContext(), TinyContext()}) {
    SCOPED_TRACE(::testing::Message() << "N = " << ctx->n());
    const CompressionBits bits = DefaultCompressionBits(*ctx);
    const Ciphertext ct = RandomCiphertext(*ctx, rng);
    const CompressedCiphertext c = *Compress(*ctx, ct);
    const size_t words = ctx->q_size() * ctx->n();
    for (size_t i = 0; i < std::min<size_t>(ctx->n(), 40); ++i) {
      const size_t coeff = (i * 977) % ctx->n();
      ASSERT_EQ(c.c0[coeff],
                ReferenceRound(ctx->q_base(), ct.poly(0, words) + coeff, ctx->n(), bits.c0))
          << "c_0 coefficient " << coeff;
      ASSERT_EQ(c.c1[coeff],
                ReferenceRound(ctx->q_base(), ct.poly(1, words) + coeff, ctx->n(), bits.c1))
          << "c_1 coefficient " << coeff;
    }
  }
}

TEST(Compressed, DecryptsToThePlaintextWithThePredictedBudget) {
  std::mt19937_64 rng = Rng(2);
  for (const auto& ctx : {BagContext(), TinyContext()}) {
    SCOPED_TRACE(::testing::Message() << "N = " << ctx->n());
    const CompressionBits bits = DefaultCompressionBits(*ctx);
    EXPECT_EQ(bits.c0, ctx->plain_modulus().bits() + 5);
    EXPECT_EQ(bits.c1, ctx->plain_modulus().bits() + ctx->log_n() + 5);
    const SecretKey sk = GenerateSecretKey(*ctx);
    for (int trial = 0; trial < 4; ++trial) {
      Plaintext m{ctx->id(), std::vector<uint64_t>(ctx->n())};
      for (uint64_t& v : m.coeffs) v = rng() % ctx->params().t;
      Ciphertext ct = *EncryptSymmetric(*ctx, sk, m);
      if (trial % 2 == 1) ct = *Add(*ctx, ct, ct);  // no seed, twice the values
      const Plaintext want = *Decrypt(*ctx, sk, ct);
      const CompressedDecryption got = *DecryptCompressed(*ctx, sk, *Compress(*ctx, ct));
      EXPECT_EQ(got.m.coeffs, want.coeffs);
      // Each part's rounding moves the phase by less than 1/32 of the margin: with a fresh
      // ciphertext's small noise the budget is at least 4 bits (c_0's rounding, uniform, comes
      // close to 1/32 on some coefficient; c_1's, about sqrt(N/18) of its N/2 worst case, adds
      // little).
      EXPECT_GE(got.noise_budget, 4);
      std::printf("N = %zu: noise budget %d bits full, %d compressed\n", ctx->n(),
                  *NoiseBudget(*ctx, sk, ct), got.noise_budget);
    }
  }
}

TEST(Compressed, TooFewBitsFailAsPredicted) {
  const auto ctx = BagContext();
  const SecretKey sk = GenerateSecretKey(*ctx);
  std::mt19937_64 rng = Rng(3);
  std::vector<uint64_t> slots(ctx->n());
  for (uint64_t& v : slots) v = rng() % ctx->params().t;
  const Plaintext m = *EncodeSlots(*ctx, slots);
  const Ciphertext ct = *EncryptSymmetric(*ctx, sk, m);
  const int t_bits = ctx->plain_modulus().bits();
  // c_1 at t_bits + 2 bits: its rounding moves the phase by about sqrt(N/18) / 4 ~ 5 times the
  // margin; c_0 at t_bits - 2: by up to twice it. Either alone garbles the plaintext.
  for (const CompressionBits bits : {CompressionBits{t_bits + 5, t_bits + 2},
                                     CompressionBits{t_bits - 2, t_bits + ctx->log_n() + 5}}) {
    SCOPED_TRACE(::testing::Message() << bits.c0 << ", " << bits.c1 << " bits");
    const CompressedDecryption got = *DecryptCompressed(*ctx, sk, *Compress(*ctx, ct, bits));
    EXPECT_EQ(got.noise_budget, 0);
    EXPECT_NE(got.m.coeffs, m.coeffs);
  }
  // Two bits fewer on each still decrypts: the default keeps a margin beyond the edge.
  const CompressionBits d = DefaultCompressionBits(*ctx);
  const CompressedDecryption lower =
      *DecryptCompressed(*ctx, sk, *Compress(*ctx, ct, {d.c0 - 2, d.c1 - 2}));
  EXPECT_EQ(lower.m.coeffs, m.coeffs);
  EXPECT_GT(lower.noise_budget, 0);
}

TEST(Compressed, WireFormatRoundTripsAndIsStrict) {
  const auto ctx = BagContext();
  const SecretKey sk = GenerateSecretKey(*ctx);
  const Plaintext m = *EncodeSlots(*ctx, {1, 2, 3});
  const CompressedCiphertext c = *Compress(*ctx, *EncryptSymmetric(*ctx, sk, m));
  const std::vector<uint8_t> bytes = *SerializeCompressedCiphertext(*ctx, c);
  EXPECT_EQ(bytes.size(), CompressedCiphertextBytes(*ctx));
  EXPECT_EQ(bytes.size(), 142350u);  // serialization.h's figure
  const CompressedCiphertext back = *ParseCompressedCiphertext(*ctx, bytes);
  EXPECT_EQ(back.c0, c.c0);
  EXPECT_EQ(back.c1, c.c1);
  EXPECT_EQ(DecryptCompressed(*ctx, sk, back)->m.coeffs, m.coeffs);

  EXPECT_EQ(ParseCompressedCiphertext(*ctx, absl::MakeConstSpan(bytes).first(bytes.size() - 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(ParseCompressedCiphertext(*ctx, longer).status().message(),
            "1 bytes after the end of the compressed ciphertext");
  std::vector<uint8_t> narrow = bytes;
  narrow[kHeHeaderBytes + 1] -= 1;
  EXPECT_EQ(ParseCompressedCiphertext(*ctx, narrow).status().message(),
            "compressed ciphertext of 63 and 75 bits, where these parameters use 63 and 76");
  // A full ciphertext is another kind; a compressed one of other parameters is refused.
  const std::vector<uint8_t> full = *SerializeCiphertext(
      *ctx, *Add(*ctx, *EncryptSymmetric(*ctx, sk, m), *EncryptSymmetric(*ctx, sk, m)));
  EXPECT_EQ(ParseCompressedCiphertext(*ctx, full).status().message(),
            "object kind 1 where kind 7 was expected");
  EXPECT_EQ(ParseCompressedCiphertext(*TinyContext(), bytes).status().code(),
            absl::StatusCode::kInvalidArgument);

  // In memory: bits out of range, a value beyond its bits, a size-3 input.
  CompressedCiphertext bad = c;
  bad.bits = {121, 76};
  EXPECT_EQ(DecryptCompressed(*ctx, sk, bad).status().message(),
            "compressed ciphertext bits 121 and 76 are outside [1, 120]");
  bad = c;
  bad.c0[5] = uint128_t{1} << 63;
  EXPECT_EQ(DecryptCompressed(*ctx, sk, bad).status().message(),
            "compressed ciphertext coefficient 5 is out of range");
  EXPECT_EQ(SerializeCompressedCiphertext(*ctx, bad).status().message(),
            "compressed ciphertext coefficient 5 is out of range");
  EXPECT_EQ(
      SerializeCompressedCiphertext(*ctx, *Compress(*ctx, *EncryptSymmetric(*ctx, sk, m), {62, 76}))
          .status()
          .message(),
      "compressed ciphertext of 62 and 76 bits, where these parameters use 63 and 76");
  // c_1 at 120 bits times s needs 126-bit primes' product; the tiny context's QP has 120 bits.
  const auto tiny = TinyContext();
  const CompressedCiphertext wide =
      *Compress(*tiny, *EncryptSymmetric(*tiny, GenerateSecretKey(*tiny), *EncodeSlots(*tiny, {1})),
                {20, 120});
  EXPECT_EQ(DecryptCompressed(*tiny, GenerateSecretKey(*tiny), wide).status().message(),
            "c_1 at 120 bits is too wide for these parameters' primes to multiply exactly");
  const Ciphertext fresh = *EncryptSymmetric(*ctx, sk, m);
  EXPECT_EQ(Compress(*ctx, *Multiply(*ctx, fresh, fresh)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace veil::he
