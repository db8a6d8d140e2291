// Key switching's RNS digits (pir/he/keyswitch.h) against their definition, bit for bit: digit i
// is d's row i as integers centered in (-q_i/2, q_i/2], lifted to every QP prime and
// transformed. Two contexts take the two lifting paths: BFV's standard primes (q_i <= 2 q_j) and
// the lattice ring's (three 29-bit primes over a 22-bit special prime, q_i > 2 P); and the
// digits are the same whether or not the caller hands in d's transform. Rotations summed before
// their one ModDown (RotateBeforeModDown) are the rotations' sum up to that rounding.
#include "pir/he/keyswitch.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/dot_product.h"
#include "pir/he/modarith.h"
#include "pir/he/poly.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::RandomResidues;
using testing::Rng;

std::vector<uint64_t> DigitsByDefinition(const BfvContext& ctx, const std::vector<uint64_t>& d) {
  const size_t n = ctx.n(), k = ctx.q_size(), rows = k + 1;
  std::vector<uint64_t> digits(k * rows * n);
  for (size_t i = 0; i < k; ++i) {
    const int64_t q_i = static_cast<int64_t>(ctx.modulus(i).value());
    for (size_t j = 0; j < rows; ++j) {
      const int64_t q_j = static_cast<int64_t>(ctx.modulus(j).value());
      uint64_t* out = digits.data() + (i * rows + j) * n;
      for (size_t c = 0; c < n; ++c) {
        int64_t centered = static_cast<int64_t>(d[i * n + c]);
        if (centered > q_i / 2) centered -= q_i;
        out[c] = static_cast<uint64_t>(((centered % q_j) + q_j) % q_j);
      }
      internal::ForwardReference(ctx.ntt(j), out);
    }
  }
  return digits;
}

void ExpectDigitsByDefinition(const BfvContext& ctx, std::mt19937_64& rng) {
  const size_t n = ctx.n(), k = ctx.q_size();
  std::vector<uint64_t> d(k * n);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t q = ctx.modulus(i).value();
    const std::vector<uint64_t> row = RandomResidues(n, q, rng);
    std::copy(row.begin(), row.end(), d.begin() + i * n);
    d[i * n] = q / 2;          // the largest positive digit
    d[i * n + 1] = q / 2 + 1;  // the most negative
    d[i * n + 2] = q - 1;
    d[i * n + 3] = 0;
  }
  std::vector<uint64_t> d_ntt = d;
  for (size_t i = 0; i < k; ++i) ctx.ntt(i).Forward(d_ntt.data() + i * n);
  const std::vector<uint64_t> expected = DigitsByDefinition(ctx, d);
  std::vector<uint64_t> digits(expected.size()), from_ntt(expected.size());
  internal::DecomposeForKeySwitch(ctx, d.data(), nullptr, digits.data());
  internal::DecomposeForKeySwitch(ctx, d.data(), d_ntt.data(), from_ntt.data());
  EXPECT_EQ(digits, expected);
  EXPECT_EQ(from_ntt, expected);
}

TEST(KeySwitchDigits, StandardPrimes) {
  std::mt19937_64 rng = Rng(40);
  ExpectDigitsByDefinition(**BfvContext::Create(*BfvParams::Standard(12, 20)), rng);
}

// The lattice ring's shape: three 29-bit primes over a 22-bit special prime, N = 4,096.
auto SpecialPrimeFarBelowContext() {
  const uint64_t two_n = 2 * 4096;
  const std::vector<uint64_t> q = *GenerateNttPrimes(29, two_n, 3);
  const uint64_t special = (*GenerateNttPrimes(22, two_n, 1))[0];
  const uint64_t t = (*GenerateNttPrimes(17, two_n, 1))[0];
  return *BfvContext::Create(*BfvParams::Create(12, q, special, t));
}

TEST(KeySwitchDigits, SpecialPrimeFarBelowTheOthers) {
  std::mt19937_64 rng = Rng(41);
  const auto ctx = SpecialPrimeFarBelowContext();
  ASSERT_GT(ctx->modulus(0).value(), 2 * ctx->modulus(3).value());
  ExpectDigitsByDefinition(*ctx, rng);
}

// m rotations of random (c0, c1) by different elements, summed over QP and ModDown'ed once,
// against the sum of RotateFromDigits: equal for m = 1 (sigma and ModDown commute, and P c0
// comes back exactly); for m > 1 they differ per coefficient by (sum of the m centred P-rows'
// lifts - the sum's lift) / P, an integer of magnitude at most (m + 1) / 2, the same in every
// prime.
void ExpectRotationsSummedBeforeModDown(const BfvContext& ctx, const GaloisKeys& gk,
                                        const std::vector<uint32_t>& elements,
                                        std::mt19937_64& rng) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n, qp_words = (k + 1) * n;
  std::vector<uint64_t> summed(2 * words, 0), lazy(2 * qp_words, 0);
  std::vector<uint64_t> rotated(2 * words), before(2 * qp_words);
  for (uint32_t g : elements) {
    std::vector<uint64_t> c(2 * words);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t i = 0; i < k; ++i) {
        const std::vector<uint64_t> row = RandomResidues(n, ctx.modulus(i).value(), rng);
        std::copy(row.begin(), row.end(), c.begin() + h * words + i * n);
      }
    }
    std::vector<uint64_t> coefficients(c.begin() + words, c.end());
    internal::InverseNtt(ctx.q_ntt(), coefficients.data());
    std::vector<uint64_t> digits(k * (k + 1) * n);
    internal::DecomposeForKeySwitch(ctx, coefficients.data(), c.data() + words, digits.data());
    const KeySwitchKey& key = gk.keys.at(g);
    internal::RotateFromDigits(ctx, c.data(), digits.data(), g, key, true, rotated.data(),
                               rotated.data() + words);
    internal::RotateBeforeModDown(ctx, c.data(), digits.data(), g, key, before.data(),
                                  before.data() + qp_words);
    for (size_t h = 0; h < 2; ++h) {
      internal::AddRows(ctx.q_ntt(), summed.data() + h * words, rotated.data() + h * words,
                        summed.data() + h * words);
      internal::AddRows(ctx.qp_ntt(), lazy.data() + h * qp_words, before.data() + h * qp_words,
                        lazy.data() + h * qp_words);
    }
  }
  std::vector<uint64_t> once(2 * words);
  for (size_t h = 0; h < 2; ++h) {
    internal::ModDown(ctx, lazy.data() + h * qp_words, true, once.data() + h * words);
  }
  if (elements.size() == 1) {
    EXPECT_EQ(once, summed);
    return;
  }
  EXPECT_NE(once, summed);  // some coefficient rounds differently
  const int64_t bound = static_cast<int64_t>(elements.size() + 1) / 2;
  for (size_t h = 0; h < 2; ++h) {
    std::vector<uint64_t> difference(words);
    internal::SubRows(ctx.q_ntt(), once.data() + h * words, summed.data() + h * words,
                      difference.data());
    internal::InverseNtt(ctx.q_ntt(), difference.data());
    for (size_t c = 0; c < n; ++c) {
      int64_t first = 0;
      for (size_t i = 0; i < k; ++i) {
        const int64_t q = static_cast<int64_t>(ctx.modulus(i).value());
        int64_t d = static_cast<int64_t>(difference[i * n + c]);
        if (d > q / 2) d -= q;
        ASSERT_LE(std::abs(d), bound) << "half " << h << ", coefficient " << c;
        if (i == 0) first = d;
        ASSERT_EQ(d, first) << "half " << h << ", coefficient " << c << ", prime " << i;
      }
    }
  }
}

TEST(KeySwitchRotations, SummedBeforeOneModDown) {
  std::mt19937_64 rng = Rng(42);
  const auto ctx = SpecialPrimeFarBelowContext();
  const std::vector<uint32_t> elements = {3, 9, 2 * 4096 - 1, 4097, 1025};
  const GaloisKeys gk = *GenerateGaloisKeys(*ctx, GenerateSecretKey(*ctx), elements);
  ExpectRotationsSummedBeforeModDown(*ctx, gk, {9}, rng);
  ExpectRotationsSummedBeforeModDown(*ctx, gk, elements, rng);
}

// A key narrowed to 32-bit residues (NarrowKeySwitchKey) switches bit for bit as the 64-bit one,
// over the lattice ring's primes (all below 2^32); where this CPU's kernel reads no such keys,
// or a prime is above 2^32 (BFV's standard primes), the key is left alone. A narrowed key of
// another size is refused.
TEST(KeySwitchKeys, NarrowedKeysSwitchAsTheWideOnes) {
  std::mt19937_64 rng = Rng(43);
  const auto ctx = SpecialPrimeFarBelowContext();
  const size_t n = ctx->n(), k = ctx->q_size(), qp_words = (k + 1) * n;
  const GaloisKeys gk = *GenerateGaloisKeys(*ctx, GenerateSecretKey(*ctx), {3});
  const KeySwitchKey& wide = gk.keys.at(3);
  KeySwitchKey narrow = wide;
  internal::NarrowKeySwitchKey(*ctx, narrow);
  const bool reads_narrow = internal::PlainDotProductUsesAvx2(ctx->modulus(0), k);
  ASSERT_EQ(narrow.b32.empty(), !reads_narrow);
  ASSERT_TRUE(CheckKeySwitchKey(*ctx, narrow, "key").ok());
  if (reads_narrow) {
    ASSERT_EQ(narrow.b32.size(), wide.b.size());
    for (size_t w = 0; w < wide.b.size(); ++w) {
      ASSERT_EQ(narrow.b32[w], wide.b[w]);
      ASSERT_EQ(narrow.a32[w], wide.a[w]);
    }
  }
  std::vector<uint64_t> d(k * n);
  for (size_t i = 0; i < k; ++i) {
    const std::vector<uint64_t> row = RandomResidues(n, ctx->modulus(i).value(), rng);
    std::copy(row.begin(), row.end(), d.begin() + i * n);
  }
  std::vector<uint64_t> digits(k * qp_words);
  internal::DecomposeForKeySwitch(*ctx, d.data(), nullptr, digits.data());
  std::vector<uint64_t> w0(qp_words), w1(qp_words), n0(qp_words), n1(qp_words);
  internal::KeySwitchInnerProduct(*ctx, digits.data(), wide, w0.data(), w1.data());
  internal::KeySwitchInnerProduct(*ctx, digits.data(), narrow, n0.data(), n1.data());
  EXPECT_EQ(n0, w0);
  EXPECT_EQ(n1, w1);

  const auto standard = BfvContext::Create(*BfvParams::Standard(12, 20));
  ASSERT_TRUE(standard.ok());
  KeySwitchKey big =
      (*GenerateGaloisKeys(**standard, GenerateSecretKey(**standard), {3})).keys.at(3);
  internal::NarrowKeySwitchKey(**standard, big);
  EXPECT_TRUE(big.b32.empty());

  narrow.b32.pop_back();
  narrow.a32.pop_back();
  const absl::Status bad = CheckKeySwitchKey(*ctx, narrow, "key");
  if (reads_narrow) {
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.message().find("32-bit form"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace veil::he
