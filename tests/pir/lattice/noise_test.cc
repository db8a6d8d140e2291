// Decryption noise measured over many real queries, against the model the correctness rule
// assumes: the first-level noise of an element is its database row times the Gaussian errors,
// standard deviation sigma * sqrt(sum of the row's squared entries), at most sigma * (p/2) *
// sqrt(m); decoding fails beyond Delta / 2 = 2^23. The test reports the observed margin and
// what the measured spread implies at the rule's width limit.
#include <cmath>
#include <cstdio>
#include <random>

#include "gtest/gtest.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

TEST(NoiseTest, MeasuredNoiseMatchesTheRulesModel) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  // D0 = 16384 columns of near worst-case entries (-128 or 127), 16 records of 4 bytes each.
  constexpr uint64_t kColumns = 16384, kPerColumn = 16;
  std::vector<uint8_t> records(kColumns * kPerColumn * 4);
  for (uint8_t& b : records) b = (gen() & 1) ? 0x80 : 0x7f;
  LweServerOptions options;
  options.shape.records_per_column = kPerColumn;
  options.threads = 2;
  auto server =
      LweServer::FromRecords(records, kColumns * kPerColumn, 4, testing::DigestOf(1), options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->shape().d0, kColumns);
  auto client = testing::ClientFor(**server);
  ASSERT_NE(client, nullptr);
  DecodeNoise noise;
  for (int round = 0; round < 5; ++round) {
    std::vector<uint64_t> rows;
    for (int i = 0; i < 8; ++i) rows.push_back(gen() % (kColumns * kPerColumn));
    const std::vector<uint8_t> got = testing::LookUp(**server, *client, rows, &noise);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_TRUE(
          std::equal(got.begin() + 4 * i, got.begin() + 4 * i + 4, records.begin() + 4 * rows[i]));
    }
  }
  const double measured = std::sqrt(noise.first_level_sum_squares / noise.first_level_samples);
  const double model = kErrorSigma * std::sqrt(kColumns * (128.0 * 128 + 127.0 * 127) / 2);
  const double margin_bits = std::log2(double(1 << 23) / noise.first_level);
  // At the width limit (one element per lookup) the same entries would give this spread; the
  // rule's subgaussian tail then bounds a failure by 2^(printed).
  const uint64_t limit = LargestWidth(Protocol::kSimplePir, kPlaintextModulus, 1);
  const double at_limit = measured * std::sqrt(double(limit) / kColumns);
  const double log2_tail = std::log2(2.0) - (std::ldexp(1.0, 23) * std::ldexp(1.0, 23)) /
                                                (2 * at_limit * at_limit) / std::log(2.0);
  std::printf(
      "noise over %llu decryptions at D0 = %llu: std %.0f (model %.0f, ratio %.3f), max %u = "
      "2^%.2f, margin to Delta/2 %.2f bits; at the width limit %llu: std %.0f, Gaussian tail "
      "2^%.1f (rule's bound 2^%.1f)\n",
      static_cast<unsigned long long>(noise.first_level_samples),
      static_cast<unsigned long long>(kColumns), measured, model, measured / model,
      noise.first_level, std::log2(double(noise.first_level)), margin_bits,
      static_cast<unsigned long long>(limit), at_limit, log2_tail,
      Log2FailureBound(kPlaintextModulus, limit, 1));
  EXPECT_NEAR(measured / model, 1.0, 0.1);
  EXPECT_GT(margin_bits, 3.0);
  // The rule's subgaussian parameter sigma * (p/2) * sqrt(m) bounds the spread (up to the
  // estimate's few percent of sampling error), so its 2^-40 at the limit is not optimistic.
  EXPECT_LE(measured, 1.05 * kErrorSigma * 128 * std::sqrt(double(kColumns)));
  // The same tolerance on the tail: its exponent scales as 1 / spread^2 (2^-36.7 was seen at a
  // ratio of 1.047, which the line above accepts and a fixed 2-bit allowance did not).
  EXPECT_LE(log2_tail, kLog2FailureBound / (1.05 * 1.05));
}

TEST(NoiseTest, DoublePirSecondLevelStaysWithinTheBound) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  const uint64_t rows = 4000;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, 4, gen);
  LweServerOptions options;
  options.protocol = Protocol::kDoublePir;
  options.threads = 2;
  auto server = LweServer::FromRecords(records, rows, 4, testing::DigestOf(2), options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = testing::ClientFor(**server);
  ASSERT_NE(client, nullptr);
  DecodeNoise noise;
  std::vector<uint64_t> wanted;
  for (int i = 0; i < 6; ++i) wanted.push_back(gen() % rows);
  const std::vector<uint8_t> got = testing::LookUp(**server, *client, wanted, &noise);
  for (size_t i = 0; i < wanted.size(); ++i) {
    ASSERT_TRUE(
        std::equal(got.begin() + 4 * i, got.begin() + 4 * i + 4, records.begin() + 4 * wanted[i]));
  }
  const Shape& s = (*server)->shape();
  std::printf(
      "DoublePIR %llu x %llu: max noise first level 2^%.2f, second level 2^%.2f "
      "(Delta/2 = 2^23)\n",
      static_cast<unsigned long long>(s.d1), static_cast<unsigned long long>(s.d0),
      std::log2(double(noise.first_level)), std::log2(double(noise.second_level)));
  EXPECT_LT(noise.first_level, 1u << 21);
  EXPECT_LT(noise.second_level, 1u << 21);
}

}  // namespace
}  // namespace veil::lattice
