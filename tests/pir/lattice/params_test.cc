// The correctness rule: it reproduces SimplePIR's published parameter table (pir/params.csv of
// its source), gives the width limit at p = 2^8, and bites: beyond the width it allows, real LWE
// decryptions fail.
#include "pir/lattice/params.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/lattice/lwe.h"
#include "tests/pir/lattice/seeded_source.h"

namespace veil::lattice {
namespace {

// SimplePIR's pir/params.csv (n = 2^10, log q = 32, sigma = 6.4): log m, floor(log2 p_simple),
// p_simple, p_double. Note the columns: m is the number of LWE samples (the database width),
// the fifth column is floor(log2 p) and not p.
struct PublishedRow {
  int log_m;
  int log_p_simple;
  uint32_t p_simple;
  uint32_t p_double;
};
constexpr PublishedRow kPublished[] = {{13, 9, 991, 929}, {14, 9, 833, 781}, {15, 9, 701, 657},
                                       {16, 9, 589, 552}, {17, 8, 495, 464}, {18, 8, 416, 390},
                                       {19, 8, 350, 328}, {20, 8, 294, 276}, {21, 7, 247, 231}};

TEST(CorrectnessRuleTest, ReproducesSimplePirsTable) {
  for (const PublishedRow& row : kPublished) {
    const uint64_t m = uint64_t{1} << row.log_m;
    const uint32_t p = LargestPlaintextModulus(Protocol::kSimplePir, m);
    EXPECT_EQ(p, row.p_simple) << "m = 2^" << row.log_m;
    EXPECT_EQ(static_cast<int>(std::floor(std::log2(p))), row.log_p_simple);
  }
}

// DoublePIR's column comes from a script its source does not include. Our rule (union bound over
// the (n + 1) * kappa + 1 decryptions of an element) gives the published p or one more on every
// row: the published column is at most 0.4% more conservative.
TEST(CorrectnessRuleTest, DoublePirWithinOneOfTheTable) {
  for (const PublishedRow& row : kPublished) {
    const uint32_t p = LargestPlaintextModulus(Protocol::kDoublePir, uint64_t{1} << row.log_m);
    EXPECT_GE(p, row.p_double) << "m = 2^" << row.log_m;
    EXPECT_LE(p, row.p_double + 1) << "m = 2^" << row.log_m;
  }
}

TEST(CorrectnessRuleTest, WidthLimitAtBytePlaintexts) {
  // One element: 2^20.81 columns (DESIGN.md's ~2^20.8).
  const uint64_t one = LargestWidth(Protocol::kSimplePir, kPlaintextModulus, 1);
  EXPECT_NEAR(std::log2(double(one)), 20.81, 0.01);
  EXPECT_TRUE(CorrectnessHolds(kPlaintextModulus, one, 1));
  EXPECT_FALSE(CorrectnessHolds(kPlaintextModulus, one + 1, 1));
  EXPECT_LE(Log2FailureBound(kPlaintextModulus, one, 1), kLog2FailureBound);
  EXPECT_GT(Log2FailureBound(kPlaintextModulus, one + 1, 1), kLog2FailureBound);
  // More elements per lookup, or DoublePIR's extra decryptions, narrow it.
  EXPECT_LT(LargestWidth(Protocol::kSimplePir, kPlaintextModulus, 64), one);
  EXPECT_LT(LargestWidth(Protocol::kDoublePir, kPlaintextModulus, 64),
            LargestWidth(Protocol::kSimplePir, kPlaintextModulus, 64));
  EXPECT_EQ(DecryptionsPerElement(Protocol::kDoublePir, 256), 1025u * 4 + 1);
  EXPECT_EQ(DecryptionsPerElement(Protocol::kDoublePir, 231), 1025u * 5 + 1);
  EXPECT_EQ(ParseProtocol("lwe-double").value(), Protocol::kDoublePir);
  EXPECT_EQ(ParseProtocol("dpf").status().message(),
            "unknown LWE protocol 'dpf' (simple or double)");
}

// Regev decryption at a plaintext modulus with few allowed columns, p = 4096 (Delta = 2^20), with
// the real public matrix, secrets and errors: worst-case database rows (every entry +-p/2). At the
// width the rule allows nothing fails; at 64 times that width about a third of the decryptions
// do (the noise's standard deviation, 6.4 * 2048 * sqrt(m), passes Delta / 2).
int FailuresAtWidth(uint64_t m, int queries, int rows_per_query) {
  constexpr uint32_t kP = 4096, kDeltaP = uint32_t{1} << 20;
  constexpr uint64_t kN = kLweDimension;
  std::mt19937_64 gen(m);
  SeededSource rng(m);
  const PublicMatrix a(Seed{}, MatrixDomain::kA1, m);
  std::vector<uint32_t> a_rows(m * kN);
  a.ExpandRows(0, m, absl::MakeSpan(a_rows));
  int failures = 0;
  for (int q = 0; q < queries; ++q) {
    const uint64_t hot = gen() % m;
    std::vector<uint32_t> secret(kN), query(m);
    EncryptFreshUnitVectors(a, {hot}, rng, absl::MakeSpan(secret), absl::MakeSpan(query));
    query[hot] += kDeltaP - kDelta;  // the unit vector scaled for p = 4096, not 2^8
    // (DB * A) * s = DB * (A * s): the hint's product with the secret, one dot per column.
    std::vector<uint32_t> a_s(m, 0);
    for (uint64_t c = 0; c < m; ++c) {
      for (uint64_t k = 0; k < kN; ++k) a_s[c] += a_rows[c * kN + k] * secret[k];
    }
    for (int r = 0; r < rows_per_query; ++r) {
      // Row entries +-2048; the answer and the hint row times s, then decryption.
      uint32_t answer = 0, hint_dot_s = 0;
      int32_t wanted = 0;
      for (uint64_t c = 0; c < m; ++c) {
        const int32_t d = (gen() & 1) ? 2047 : -2048;
        if (c == hot) wanted = d;
        answer += static_cast<uint32_t>(d) * query[c];
        hint_dot_s += static_cast<uint32_t>(d) * a_s[c];
      }
      const uint32_t noisy = answer - hint_dot_s;
      const uint32_t decoded = ((noisy + kDeltaP / 2) >> 20) % kP;
      failures += decoded != static_cast<uint32_t>(wanted) % kP;
    }
  }
  return failures;
}

TEST(CorrectnessRuleTest, RuleBitesBeyondItsWidth) {
  const uint64_t allowed = LargestWidth(Protocol::kSimplePir, 4096, 1);
  ASSERT_GE(allowed, 20u);
  ASSERT_LE(allowed, 40u);
  EXPECT_EQ(FailuresAtWidth(allowed, 20, 16), 0);
  const int failures = FailuresAtWidth(64 * allowed, 20, 16);
  std::printf("p = 4096: width %llu allowed, 0 of 320 decryptions fail; at 64x: %d fail\n",
              static_cast<unsigned long long>(allowed), failures);
  EXPECT_GT(failures, 320 / 8) << "of 320 decryptions";
  EXPECT_LT(failures, 320 * 2 / 3) << "of 320 decryptions";
}

}  // namespace
}  // namespace veil::lattice
