// The Regev layer: the Gaussian's cumulative table and the distribution the constant-time
// sampler draws, the public matrix's expansion (deterministic, domain-separated, VAES equal to
// the portable AES, as is AES-NI), and the encryption of unit vectors.
#include "pir/lattice/lwe.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "pir/lattice/aes_ctr.h"
#include "tests/pir/lattice/seeded_source.h"

namespace veil::lattice {
namespace {

TEST(ErrorSamplerTest, CumulativeTableMatchesLongDoubleRecomputation) {
  const absl::Span<const uint64_t> cdt = ErrorCdtForTesting();
  ASSERT_EQ(cdt.size(), 58u);
  long double total = 0;
  for (int x = -200; x <= 200; ++x) total += std::exp(-(long double)(x * x) / (2 * 6.4L * 6.4L));
  long double cumulative = 0;
  for (size_t k = 0; k < cdt.size(); ++k) {
    cumulative += (k == 0 ? 1 : 2) * std::exp(-(long double)(k * k) / (2 * 6.4L * 6.4L)) / total;
    const long double expected = std::ldexp(cumulative, 64);
    EXPECT_NEAR(static_cast<double>(expected - static_cast<long double>(cdt[k])), 0.0, 4096.0)
        << "k = " << k;
    if (k > 0) EXPECT_GT(cdt[k], cdt[k - 1]);
  }
}

TEST(ErrorSamplerTest, DrawsTheDiscreteGaussian) {
  SeededSource rng(42);
  constexpr int kSamples = 200000;
  std::vector<int32_t> e(kSamples);
  SampleErrors(rng, absl::MakeSpan(e));
  double sum = 0, squares = 0;
  std::map<int, int> counts;
  for (int32_t x : e) {
    ASSERT_LE(std::abs(x), 58);
    sum += x;
    squares += double(x) * x;
    ++counts[std::clamp(x, -20, 20)];
  }
  EXPECT_NEAR(sum / kSamples, 0.0, 0.05);
  EXPECT_NEAR(squares / kSamples, 6.4 * 6.4, 0.6);  // a discrete Gaussian's variance ~ sigma^2
  // Chi-square against rho(x) / S over bins -20..20 (the outer bins hold the tails).
  double total = 0;
  for (int x = -300; x <= 300; ++x) total += std::exp(-double(x) * x / (2 * 6.4 * 6.4));
  double chi = 0;
  for (int bin = -20; bin <= 20; ++bin) {
    double p = 0;
    for (int x = -300; x <= 300; ++x) {
      if (std::clamp(x, -20, 20) == bin) p += std::exp(-double(x) * x / (2 * 6.4 * 6.4)) / total;
    }
    const double expected = p * kSamples;
    chi += (counts[bin] - expected) * (counts[bin] - expected) / expected;
  }
  EXPECT_LT(chi, 90.0);  // 40 degrees of freedom: 90 is a 1e-5 tail
}

TEST(PublicMatrixTest, ExpansionIsDeterministicAndDomainSeparated) {
  Seed seed{};
  seed[3] = 7;
  const PublicMatrix a(seed, MatrixDomain::kA1, 300), b(seed, MatrixDomain::kA1, 300);
  const PublicMatrix other_domain(seed, MatrixDomain::kA2, 300);
  std::vector<uint32_t> all(300 * kLweDimension), again(300 * kLweDimension),
      other(300 * kLweDimension), part(17 * kLweDimension);
  a.ExpandRows(0, 300, absl::MakeSpan(all));
  b.ExpandRows(0, 300, absl::MakeSpan(again));
  other_domain.ExpandRows(0, 300, absl::MakeSpan(other));
  EXPECT_EQ(all, again);
  EXPECT_NE(all, other);
  a.ExpandRows(101, 17, absl::MakeSpan(part));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 101 * kLweDimension));
  seed[3] = 8;
  std::vector<uint32_t> other_seed(300 * kLweDimension);
  PublicMatrix(seed, MatrixDomain::kA1, 300).ExpandRows(0, 300, absl::MakeSpan(other_seed));
  EXPECT_NE(all, other_seed);
}

TEST(PublicMatrixTest, VaesAndAesNiCounterModesEqualPortableAes) {
  const uint8_t key[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const internal::AesCtrKey k = internal::MakeAesCtrKey(key);
  // Block 0 against dpf's AES directly.
  dpf::Block zero{0, 0}, one{1, 0}, e0, e1;
  dpf::AesEncrypt2(k.sliced, zero, one, e0, e1);
  for (uint64_t blocks : {1, 2, 31, 32, 33, 100}) {
    std::vector<uint8_t> portable(16 * blocks), fast(16 * blocks);
    internal::AesCtrPortable(k, (uint64_t{1} << 40) - 5, blocks, portable.data());
    if (internal::CpuHasVaes()) {
      internal::AesCtrVaes(k, (uint64_t{1} << 40) - 5, blocks, fast.data());
      EXPECT_EQ(portable, fast) << "VAES, " << blocks << " blocks";
    }
    if (internal::CpuHasAesNi()) {
      internal::AesCtrAesNi(k, (uint64_t{1} << 40) - 5, blocks, fast.data());
      EXPECT_EQ(portable, fast) << "AES-NI, " << blocks << " blocks";
    }
    std::vector<uint8_t> first(16 * blocks);
    internal::AesCtr(k, 0, blocks, first.data());
    EXPECT_EQ(std::memcmp(first.data(), &e0, 16), 0);
    if (blocks > 1) EXPECT_EQ(std::memcmp(first.data() + 16, &e1, 16), 0);
  }
}

TEST(EncryptionTest, UnitVectorsCarryDeltaAtTheirHotPosition) {
  constexpr uint64_t kM = 70;
  const PublicMatrix a(Seed{}, MatrixDomain::kA1, kM);
  std::vector<uint32_t> rows(kM * kLweDimension);
  a.ExpandRows(0, kM, absl::MakeSpan(rows));
  SeededSource rng(3);
  const std::vector<uint64_t> hots = {0, 69, 33};
  std::vector<uint32_t> secrets(3 * kLweDimension), out(3 * kM);
  std::vector<int32_t> errors(3 * kM);
  SampleSecret(rng, absl::MakeSpan(secrets));
  SampleErrors(rng, absl::MakeSpan(errors));
  EncryptUnitVectors(a, secrets, errors, hots, absl::MakeSpan(out));
  for (size_t j = 0; j < hots.size(); ++j) {
    for (uint64_t c = 0; c < kM; ++c) {
      uint32_t as = 0;
      for (uint64_t k = 0; k < kLweDimension; ++k) {
        as += rows[c * kLweDimension + k] * secrets[j * kLweDimension + k];
      }
      EXPECT_EQ(out[j * kM + c] - as,
                static_cast<uint32_t>(errors[j * kM + c]) + (c == hots[j] ? kDelta : 0));
    }
  }
  EXPECT_EQ(RoundToByte(kDelta * 200 + (kDelta / 2 - 1)), 200);
  EXPECT_EQ(RoundToByte(kDelta * 200 + kDelta / 2), 201);
  EXPECT_EQ(RoundToByte(0u - 5), 0);
  EXPECT_EQ(RoundToByte(kDelta * 255 + kDelta / 2), 0);
}

}  // namespace
}  // namespace veil::lattice
