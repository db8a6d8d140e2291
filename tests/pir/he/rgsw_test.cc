// RGSW ciphertexts of bits (pir/he/rgsw.h): CMux selects the ciphertext its bit names, the
// external product's measured noise matches ExternalProductVariance, and the wire form round
// trips and refuses bad input; the same for RGSW over Q converted from RLWE ciphertexts of
// m g_i (ConvertToRgsw), against ConvertedVariance and QRgswProductVariance. Two contexts: BFV's
// standard primes and the lattice ring's shape (three 29-bit primes over a 22-bit special prime),
// whose ModDown lifts differently.
#include "pir/he/rgsw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/poly.h"
#include "pir/he/sampling.h"
#include "pir/he/serialization.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::RandomResidues;
using testing::Rng;

std::shared_ptr<const BfvContext> RingLikeContext() {
  const uint64_t two_n = 2 * 4096;
  const std::vector<uint64_t> q = *GenerateNttPrimes(29, two_n, 3);
  const uint64_t special = (*GenerateNttPrimes(22, two_n, 1))[0];
  const uint64_t t = (*GenerateNttPrimes(17, two_n, 1))[0];
  return *BfvContext::Create(*BfvParams::Create(12, q, special, t));
}

std::shared_ptr<const BfvContext> StandardContext() {
  return *BfvContext::Create(*BfvParams::Standard(12, 20));
}

Plaintext RandomPlaintext(const BfvContext& ctx, std::mt19937_64& rng) {
  return Plaintext{ctx.id(), RandomResidues(ctx.n(), ctx.plain_modulus().value(), rng)};
}

// A ciphertext's two halves in NTT form (c1 included when seeded) and back.
std::vector<uint64_t> ToNtt(const BfvContext& ctx, const Ciphertext& ct) {
  std::vector<uint64_t> out = ct.data;
  const size_t words = ctx.q_size() * ctx.n();
  internal::ForwardNtt(ctx.q_ntt(), out.data());
  internal::ForwardNtt(ctx.q_ntt(), out.data() + words);
  return out;
}

Ciphertext FromNtt(const BfvContext& ctx, std::vector<uint64_t> data) {
  const size_t words = ctx.q_size() * ctx.n();
  internal::InverseNtt(ctx.q_ntt(), data.data());
  internal::InverseNtt(ctx.q_ntt(), data.data() + words);
  Ciphertext ct;
  ct.params_id = ctx.id();
  ct.size = 2;
  ct.data = std::move(data);
  return ct;
}

// Both halves (k rows each, NTT form) uniform: uniform digits, as the noise models assume.
std::vector<uint64_t> UniformCiphertext(const BfvContext& ctx, std::mt19937_64& rng) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  std::vector<uint64_t> x(2 * words);
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < k; ++j) {
      const std::vector<uint64_t> row = RandomResidues(n, ctx.modulus(j).value(), rng);
      std::copy(row.begin(), row.end(), x.begin() + h * words + j * n);
    }
  }
  return x;
}

void ExpectCMuxSelects(const BfvContext& ctx, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  const SecretKey sk = GenerateSecretKey(ctx);
  const Plaintext m0 = RandomPlaintext(ctx, rng), m1 = RandomPlaintext(ctx, rng);
  const Ciphertext c0 = *EncryptSymmetric(ctx, sk, m0), c1 = *EncryptSymmetric(ctx, sk, m1);
  const std::vector<uint64_t> a = ToNtt(ctx, c0), b = ToNtt(ctx, c1);
  const size_t words = ctx.q_size() * ctx.n();
  // What the selection's noise (ExternalProductVariance, 8 sigma) leaves of the budget.
  double log2_q = 0;
  for (size_t j = 0; j < ctx.q_size(); ++j) log2_q += std::log2(ctx.modulus(j).value());
  const double floor_budget = log2_q - std::log2(ctx.plain_modulus().value()) -
                              std::log2(8 * std::sqrt(ExternalProductVariance(ctx))) - 2;
  const int budget = std::min(*NoiseBudget(ctx, sk, c0), *NoiseBudget(ctx, sk, c1));
  for (uint32_t bit : {0u, 1u, 1u, 0u}) {
    const RgswCiphertext g = *EncryptRgswBit(ctx, sk, bit);
    std::vector<uint64_t> out(2 * words);
    internal::CMux(ctx, g, a.data(), a.data() + words, b.data(), b.data() + words, out.data(),
                   out.data() + words);
    const Ciphertext selected = FromNtt(ctx, out);
    EXPECT_EQ(Decrypt(ctx, sk, selected)->coeffs, (bit ? m1 : m0).coeffs) << "bit " << bit;
    // The selection adds two key switches' noise, whatever the bit.
    EXPECT_GE(*NoiseBudget(ctx, sk, selected), floor_budget);
    EXPECT_LE(*NoiseBudget(ctx, sk, selected), budget);
  }
}

TEST(Rgsw, CMuxSelectsStandardPrimes) { ExpectCMuxSelects(*StandardContext(), 60); }
TEST(Rgsw, CMuxSelectsRingPrimes) { ExpectCMuxSelects(*RingLikeContext(), 61); }

// The phase error e = phase(g x) - bit phase(x) modulo q_0, centered: its variance over the N
// coefficients of a uniform x (uniform digits, as the model assumes) against the prediction.
void ExpectNoiseAsPredicted(const BfvContext& ctx, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  const SecretKey sk = GenerateSecretKey(ctx);
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  const std::vector<uint64_t> x = UniformCiphertext(ctx, rng);
  const Modulus& q0 = ctx.modulus(0);
  // Row 0 of c0 + c1 s (NTT form).
  auto phase = [&](const uint64_t* c) {
    std::vector<uint64_t> p(n);
    for (size_t c_ = 0; c_ < n; ++c_) p[c_] = q0.Add(c[c_], q0.Mul(c[words + c_], sk.ntt[c_]));
    return p;
  };
  const double predicted = ExternalProductVariance(ctx);
  for (uint32_t bit : {0u, 1u}) {
    const RgswCiphertext g = *EncryptRgswBit(ctx, sk, bit);
    std::vector<uint64_t> out(2 * words);
    internal::ExternalProduct(ctx, g, x.data(), x.data() + words, out.data(), out.data() + words);
    std::vector<uint64_t> e = phase(out.data());
    const std::vector<uint64_t> input = phase(x.data());
    for (size_t c = 0; c < n; ++c) e[c] = q0.Sub(e[c], bit ? input[c] : 0);
    ctx.ntt(0).Inverse(e.data());
    double sum = 0, worst = 0;
    for (uint64_t v : e) {
      const double centered =
          v > q0.value() / 2 ? -static_cast<double>(q0.value() - v) : static_cast<double>(v);
      sum += centered * centered;
      worst = std::max(worst, std::abs(centered));
    }
    const double measured = sum / static_cast<double>(n);
    EXPECT_GT(measured, 0.7 * predicted) << "bit " << bit;
    EXPECT_LT(measured, 1.3 * predicted) << "bit " << bit;
    // Gaussian tails: nothing beyond 7 sigma among 4,096 samples.
    EXPECT_LT(worst, 7 * std::sqrt(predicted)) << "bit " << bit;
  }
}

TEST(Rgsw, NoiseAsPredictedStandardPrimes) { ExpectNoiseAsPredicted(*StandardContext(), 62); }
TEST(Rgsw, NoiseAsPredictedRingPrimes) { ExpectNoiseAsPredicted(*RingLikeContext(), 63); }

// The m parts of RGSW(bit) over Q as a query's expansion would deliver them, made directly:
// for digit i, (c0, c1) = (-a s + e + bit g_i, a) in NTT form, a uniform, e fresh (variance
// 10.5); bit g_i is the bit in row i and 0 in the others.
std::vector<uint64_t> MParts(const BfvContext& ctx, const SecretKey& sk, uint32_t bit,
                             std::mt19937_64& rng) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  std::vector<uint64_t> parts(k * 2 * words), e(words);
  for (size_t i = 0; i < k; ++i) {
    uint64_t* c0 = parts.data() + i * 2 * words;
    uint64_t* c1 = c0 + words;
    for (size_t j = 0; j < k; ++j) {
      const std::vector<uint64_t> row = RandomResidues(n, ctx.modulus(j).value(), rng);
      std::copy(row.begin(), row.end(), c1 + j * n);
    }
    SampleError(ctx.q_base().moduli(), n, e.data());
    internal::ForwardNtt(ctx.q_ntt(), e.data());
    internal::MultiplyRows(ctx.q_ntt(), c1, sk.ntt.data(), c0);
    internal::SubRows(ctx.q_ntt(), e.data(), c0, c0);
    const Modulus& q = ctx.modulus(i);
    for (size_t c = 0; c < n; ++c) c0[i * n + c] = q.Add(c0[i * n + c], bit);
  }
  return parts;
}

QRgswCiphertext ConvertedBit(const BfvContext& ctx, const SecretKey& sk, uint32_t bit,
                             std::mt19937_64& rng) {
  const RelinKey rk = *GenerateRelinKey(ctx, sk);
  return *ConvertToRgsw(ctx, rk.key, MParts(ctx, sk, bit, rng));
}

void ExpectConvertedCMuxSelects(const BfvContext& ctx, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  const SecretKey sk = GenerateSecretKey(ctx);
  const Plaintext m0 = RandomPlaintext(ctx, rng), m1 = RandomPlaintext(ctx, rng);
  const Ciphertext c0 = *EncryptSymmetric(ctx, sk, m0), c1 = *EncryptSymmetric(ctx, sk, m1);
  const std::vector<uint64_t> a = ToNtt(ctx, c0), b = ToNtt(ctx, c1);
  const size_t words = ctx.q_size() * ctx.n();
  for (uint32_t bit : {0u, 1u, 1u, 0u}) {
    const QRgswCiphertext g = ConvertedBit(ctx, sk, bit, rng);
    std::vector<uint64_t> out(2 * words);
    internal::CMux(ctx, g, a.data(), a.data() + words, b.data(), b.data() + words, out.data(),
                   out.data() + words);
    EXPECT_EQ(Decrypt(ctx, sk, FromNtt(ctx, out))->coeffs, (bit ? m1 : m0).coeffs) << "bit " << bit;
  }
}

TEST(QRgsw, ConvertedCMuxSelectsStandardPrimes) {
  ExpectConvertedCMuxSelects(*StandardContext(), 64);
}
TEST(QRgsw, ConvertedCMuxSelectsRingPrimes) { ExpectConvertedCMuxSelects(*RingLikeContext(), 65); }

// The product's error is far above one prime (digits ~q_i times errors ~sqrt(N)), so it is
// measured over all of Q: the phase of each coefficient recombined from its residues (CRT).
void ExpectQNoiseAsPredicted(const BfvContext& ctx, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  const SecretKey sk = GenerateSecretKey(ctx);
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  const std::vector<uint64_t> x = UniformCiphertext(ctx, rng);
  // c0 + c1 s, coefficient form, k rows.
  auto phase = [&](const uint64_t* c) {
    std::vector<uint64_t> p(words);
    internal::MultiplyRows(ctx.q_ntt(), c + words, sk.ntt.data(), p.data());
    internal::AddRows(ctx.q_ntt(), p.data(), c, p.data());
    internal::InverseNtt(ctx.q_ntt(), p.data());
    return p;
  };
  // Q and the CRT basis (Q / q_i) [(Q / q_i)^-1]_{q_i}, in 128 bits (Q < 2^125 here).
  using u128 = unsigned __int128;
  u128 q_all = 1;
  for (size_t i = 0; i < k; ++i) q_all *= ctx.modulus(i).value();
  ASSERT_LT(static_cast<double>(q_all), std::ldexp(1.0, 125));
  std::vector<u128> basis(k);
  for (size_t i = 0; i < k; ++i) {
    const Modulus& q = ctx.modulus(i);
    const u128 rest = q_all / q.value();
    basis[i] = rest * *q.Inverse(static_cast<uint64_t>(rest % q.value()));
  }
  auto centered = [&](const std::vector<uint64_t>& p, size_t c) {
    u128 v = 0;
    for (size_t i = 0; i < k; ++i) v = (v + (basis[i] % q_all) * p[i * n + c] % q_all) % q_all;
    return v > q_all / 2 ? -static_cast<double>(q_all - v) : static_cast<double>(v);
  };
  const double predicted = QRgswProductVariance(ctx, 10.5, ConvertedVariance(ctx, 10.5));
  const std::vector<uint64_t> input = phase(x.data());
  for (uint32_t bit : {0u, 1u}) {
    const QRgswCiphertext g = ConvertedBit(ctx, sk, bit, rng);
    std::vector<uint64_t> out(2 * words);
    internal::ExternalProduct(ctx, g, x.data(), x.data() + words, out.data(), out.data() + words);
    const std::vector<uint64_t> got = phase(out.data());
    double sum = 0, worst = 0;
    for (size_t c = 0; c < n; ++c) {
      const double e = centered(got, c) - (bit ? centered(input, c) : 0);
      sum += e * e;
      worst = std::max(worst, std::abs(e));
    }
    const double measured = sum / static_cast<double>(n);
    std::printf("QRgsw product, bit %u: sigma %.4g measured, %.4g predicted (2^%.1f of Q)\n", bit,
                std::sqrt(measured), std::sqrt(predicted),
                std::log2(std::sqrt(predicted)) - std::log2(static_cast<double>(q_all)));
    EXPECT_GT(measured, 0.7 * predicted) << "bit " << bit;
    EXPECT_LT(measured, 1.3 * predicted) << "bit " << bit;
    EXPECT_LT(worst, 7 * std::sqrt(predicted)) << "bit " << bit;
  }
}

TEST(QRgsw, NoiseAsPredictedRingPrimes) { ExpectQNoiseAsPredicted(*RingLikeContext(), 66); }

TEST(QRgsw, ConversionRefusesBadPartsAndKeys) {
  const auto ctx = RingLikeContext();
  std::mt19937_64 rng = Rng(67);
  const SecretKey sk = GenerateSecretKey(*ctx);
  const RelinKey rk = *GenerateRelinKey(*ctx, sk);
  std::vector<uint64_t> parts = MParts(*ctx, sk, 1, rng);
  EXPECT_TRUE(ConvertToRgsw(*ctx, rk.key, parts).ok());
  EXPECT_EQ(ConvertToRgsw(*ctx, rk.key, absl::MakeConstSpan(parts).first(parts.size() - 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint64_t> above = parts;
  above[5] = ctx->modulus(0).value();
  EXPECT_EQ(ConvertToRgsw(*ctx, rk.key, above).status().code(), absl::StatusCode::kInvalidArgument);
  KeySwitchKey short_key = rk.key;
  short_key.a.pop_back();
  EXPECT_EQ(ConvertToRgsw(*ctx, short_key, parts).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Rgsw, RejectsBadBitsAndKeys) {
  const auto ctx = RingLikeContext();
  const SecretKey sk = GenerateSecretKey(*ctx);
  EXPECT_EQ(EncryptRgswBit(*ctx, sk, 2).status().code(), absl::StatusCode::kInvalidArgument);
  const auto other = StandardContext();
  EXPECT_FALSE(EncryptRgswBit(*other, sk, 1).ok());
  RgswCiphertext g = *EncryptRgswBit(*ctx, sk, 1);
  EXPECT_TRUE(CheckRgswCiphertext(*ctx, g, "g").ok());
  EXPECT_FALSE(CheckRgswCiphertext(*other, g, "g").ok());
  g.ms.b.pop_back();
  EXPECT_EQ(CheckRgswCiphertext(*ctx, g, "g").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RgswSerialization, RoundTripsAndActsTheSame) {
  const auto ctx = RingLikeContext();

  const SecretKey sk = GenerateSecretKey(*ctx);
  const std::vector<RgswCiphertext> gs = {*EncryptRgswBit(*ctx, sk, 1),
                                          *EncryptRgswBit(*ctx, sk, 0)};
  const std::vector<uint8_t> bytes = *SerializeRgswCiphertexts(*ctx, gs);
  ASSERT_EQ(bytes.size(), RgswCiphertextsBytes(*ctx, 2));
  const std::vector<RgswCiphertext> parsed = *ParseRgswCiphertexts(*ctx, bytes);
  ASSERT_EQ(parsed.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(parsed[i].m.b, gs[i].m.b);
    EXPECT_EQ(parsed[i].m.a, gs[i].m.a);
    EXPECT_EQ(parsed[i].ms.b, gs[i].ms.b);
    EXPECT_EQ(parsed[i].ms.a, gs[i].ms.a);
  }
  // Seeded and bit-packed: 2 keys of k (k + 1) N residues at 29 or 22 bits, each with a seed.
  const size_t n = ctx->n(), k = ctx->q_size();
  EXPECT_EQ(RgswCiphertextsBytes(*ctx, 1),
            kHeHeaderBytes + 4 + 2 * (32 + k * n * (3 * 29 + 22) / 8));
}

TEST(RgswSerialization, RefusesBadInput) {
  const auto ctx = RingLikeContext();
  const SecretKey sk = GenerateSecretKey(*ctx);
  std::vector<uint8_t> bytes = *SerializeRgswCiphertexts(*ctx, {*EncryptRgswBit(*ctx, sk, 1)});
  auto code = [&](std::vector<uint8_t> b) { return ParseRgswCiphertexts(*ctx, b).status().code(); };
  EXPECT_EQ(code({bytes.begin(), bytes.end() - 1}), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(code(longer), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> many = bytes;
  many[kHeHeaderBytes] = 65;  // count above kMaxRgswCiphertexts
  EXPECT_EQ(code(many), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> kind = bytes;
  kind[3] = static_cast<uint8_t>(HeObjectKind::kGaloisKeys);
  EXPECT_EQ(code(kind), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> residue(bytes.begin(), bytes.end());
  const size_t first = kHeHeaderBytes + 4 + 32;  // the first residues of the first key's b
  ASSERT_GT(residue.size(), first + 8);
  for (size_t i = first; i < first + 8; ++i) residue.at(i) = 0xff;
  EXPECT_EQ(code(residue), absl::StatusCode::kInvalidArgument);  // 2^29 - 1 is above q_0
  EXPECT_EQ(ParseRgswCiphertexts(*StandardContext(), bytes).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<RgswCiphertext> too_many(kMaxRgswCiphertexts + 1);
  EXPECT_EQ(SerializeRgswCiphertexts(*ctx, too_many).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace veil::he
