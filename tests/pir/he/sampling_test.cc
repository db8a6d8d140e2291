// Sampling: ternary and CBD(21) values in range with the right frequencies and variance, and the
// seeded expansion deterministic, domain-separated and below every modulus.
#include "pir/he/sampling.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace veil::he {
namespace {

std::vector<Modulus> Moduli() {
  return {*Modulus::Create(0xffffee001), *Modulus::Create(0x1ffffe0001)};
}

// The signed value of residue v (row 0 modulus q), checking that every row agrees.
int64_t Signed(const std::vector<Modulus>& m, const std::vector<uint64_t>& out, size_t n,
               size_t c) {
  const int64_t v = m[0].Centered(out[c]);
  EXPECT_EQ(m[1].Centered(out[n + c]), v) << "rows disagree at " << c;
  return v;
}

TEST(Sampling, TernaryIsUniformOnMinusOneZeroOne) {
  const std::vector<Modulus> m = Moduli();
  constexpr size_t kN = 30000;
  std::vector<uint64_t> out(2 * kN);
  SampleTernary(m, kN, out.data());
  std::map<int64_t, int> counts;
  for (size_t c = 0; c < kN; ++c) ++counts[Signed(m, out, kN, c)];
  ASSERT_EQ(counts.size(), 3u);
  for (int64_t v : {-1, 0, 1}) EXPECT_NEAR(counts[v], kN / 3, 5 * std::sqrt(kN * 2.0 / 9)) << v;
}

TEST(Sampling, ErrorsAreCenteredBinomial21) {
  const std::vector<Modulus> m = Moduli();
  constexpr size_t kN = 30000;
  std::vector<uint64_t> out(2 * kN);
  SampleError(m, kN, out.data());
  double sum = 0, squares = 0;
  for (size_t c = 0; c < kN; ++c) {
    const int64_t v = Signed(m, out, kN, c);
    ASSERT_LE(std::abs(v), kErrorBound);
    sum += v;
    squares += double(v) * v;
  }
  EXPECT_NEAR(sum / kN, 0.0, 0.15);
  EXPECT_NEAR(squares / kN, 10.5, 0.6);  // variance 21 / 2
}

TEST(Sampling, ExpansionIsDeterministicAndDomainSeparated) {
  const std::vector<Modulus> m = Moduli();
  constexpr size_t kN = 1000;
  Seed seed{};
  seed[0] = 7;
  std::vector<uint64_t> a(2 * kN), b(2 * kN), c(2 * kN);
  ExpandUniform(seed, 1, m, kN, a.data());
  ExpandUniform(seed, 1, m, kN, b.data());
  ExpandUniform(seed, 2, m, kN, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (size_t i = 0; i < 2 * kN; ++i) ASSERT_LT(a[i], m[i / kN].value());
  // Roughly uniform: the mean of the residues is about q / 2.
  double mean = 0;
  for (size_t i = 0; i < kN; ++i) mean += double(a[i]) / double(m[0].value());
  EXPECT_NEAR(mean / kN, 0.5, 0.05);
  EXPECT_NE(RandomSeed(), RandomSeed());
}

}  // namespace
}  // namespace veil::he
