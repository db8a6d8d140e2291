// The key a server receives says nothing about alpha or beta: for every PRG and output type,
// several domain sizes (with and without tree levels), alpha at both ends and the middle of the
// domain and beta = 0, 1 or uniformly random, every bit of a party's serialized key that is random
// by design must be a fair coin in every (alpha, beta) class, and so must the XOR of structured
// pairs of them: bits within a correction word (with its two control bits), the same bit on
// consecutive levels, and bits of the final word (with the last level's control bits). A per-bit
// test cannot see a leak that keeps each bit fair (bit j := bit i XOR alpha_0); the pair tests can.
//
// Statistic: for n keys of a class, z = |2 * ones - n| / sqrt(n). For a fair coin, Hoeffding's
// inequality bounds P(z >= t) <= 2 exp(-t^2 / 2) with no approximation; over T tests the threshold
// sqrt(2 ln(2T / 1e-9)) keeps the chance of any false alarm in a configuration below 1e-9. A bit
// fixed by a leak in one class gives z = sqrt(n) = 16, far above the threshold (about 8).
// Each statistic is shown to catch a deliberately leaky variant (keys post-processed to leak a
// bit of alpha or beta, at the end of this file).
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gtest/gtest.h"

namespace veil::dpf {
namespace {

constexpr int kKeysPerClass = 256;
constexpr double kFalseAlarm = 1e-9;

enum Family { kPerBit, kWithinCorrectionWord, kAcrossLevels, kFinalWord, kFamilies };
const char* const kFamilyNames[kFamilies] = {"per bit", "within a correction word",
                                             "across levels", "final word"};

// One tested feature: bit a of the serialized key, or bit a XOR bit b.
struct Feature {
  int a, b;
  Family family;
};

// Bit positions of dpf/key.h's wire format.
struct KeyBits {
  explicit KeyBits(const DpfParameters& params)
      : levels(params.levels()),
        final_base(8 * (kKeyHeaderBytes + 16 + 16 * levels + (levels + 7) / 8)),
        final_bits(32 * params.leaf_block_words()) {}
  // Bit k of the root seed (k = 0 is the control bit, fixed by the party).
  int root(int k) const { return 8 * kKeyHeaderBytes + k; }
  // Bit k of level l's correction seed (k = 0 is the left control-bit correction).
  int seed(int l, int k) const { return 8 * (kKeyHeaderBytes + 16 + 16 * l) + k; }
  int t_left(int l) const { return seed(l, 0); }
  int t_right(int l) const { return 8 * (kKeyHeaderBytes + 16 + 16 * levels) + l; }
  int final_word(int j) const { return final_base + j; }

  const int levels, final_base, final_bits;
};

std::vector<Feature> Features(const DpfParameters& params) {
  const KeyBits key(params);
  const int levels = key.levels;
  std::vector<Feature> f;
  for (int k = 1; k < 128; ++k) f.push_back({key.root(k), -1, kPerBit});
  for (int l = 0; l < levels; ++l) {
    for (int k = 0; k < 128; ++k) f.push_back({key.seed(l, k), -1, kPerBit});
    f.push_back({key.t_right(l), -1, kPerBit});
  }
  for (int j = 0; j < key.final_bits; ++j) f.push_back({key.final_word(j), -1, kPerBit});

  for (int l = 0; l < levels; ++l) {
    f.push_back({key.t_left(l), key.t_right(l), kWithinCorrectionWord});
    for (int k = 1; k < 128; ++k) {
      f.push_back({key.t_left(l), key.seed(l, k), kWithinCorrectionWord});
      f.push_back({key.t_right(l), key.seed(l, k), kWithinCorrectionWord});
      if (k < 127) f.push_back({key.seed(l, k), key.seed(l, k + 1), kWithinCorrectionWord});
      if (k < 64) f.push_back({key.seed(l, k), key.seed(l, k + 64), kWithinCorrectionWord});
    }
  }

  for (int l = 0; l < levels; ++l) {
    for (int k = 1; k < 128; ++k) {
      const int above = l == 0 ? key.root(k) : key.seed(l - 1, k);
      f.push_back({above, key.seed(l, k), kAcrossLevels});
    }
    if (l == 0) continue;
    f.push_back({key.t_left(l - 1), key.t_left(l), kAcrossLevels});
    f.push_back({key.t_right(l - 1), key.t_right(l), kAcrossLevels});
    f.push_back({key.t_left(l - 1), key.t_right(l), kAcrossLevels});
    f.push_back({key.t_right(l - 1), key.t_left(l), kAcrossLevels});
  }

  for (int j = 0; j < key.final_bits; ++j) {
    if (j % 32 != 31) f.push_back({key.final_word(j), key.final_word(j + 1), kFinalWord});
    if (j + 32 < key.final_bits) f.push_back({key.final_word(j), key.final_word(j + 32), kFinalWord});
    if (levels > 0) {
      f.push_back({key.t_left(levels - 1), key.final_word(j), kFinalWord});
      f.push_back({key.t_right(levels - 1), key.final_word(j), kFinalWord});
    }
  }
  return f;
}

// The largest z of each family over every class, and the number of tests behind them.
struct Verdict {
  double max_z[kFamilies] = {};
  size_t tests = 0;

  double Threshold() const { return std::sqrt(2 * std::log(2.0 * tests / kFalseAlarm)); }
  bool Sees(Family family) const { return max_z[family] >= Threshold(); }
  std::string Describe() const {
    std::string out = "threshold " + std::to_string(Threshold()) + " over " +
                      std::to_string(tests) + " tests; max z:";
    for (int f = 0; f < kFamilies; ++f) {
      out += std::string(" ") + kFamilyNames[f] + " " + std::to_string(max_z[f]) + ";";
    }
    return out;
  }
};

// Adds the tests of one class of serialized keys (one party) to the verdict.
void AddClass(const std::vector<Feature>& features, const std::vector<std::vector<uint8_t>>& keys,
              Verdict& verdict) {
  const size_t n = keys.size(), words = (n + 63) / 64, bits = 8 * keys[0].size();
  // bit_of[p] = bit p of every key, key i at bit i: one XOR and popcount per pair and word.
  std::vector<uint64_t> bit_of(bits * words, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t p = 0; p < bits; ++p) {
      bit_of[p * words + i / 64] |= uint64_t{(keys[i][p / 8] >> (p % 8)) & 1u} << (i % 64);
    }
  }
  for (const Feature& f : features) {
    int ones = 0;
    for (size_t w = 0; w < words; ++w) {
      const uint64_t b = f.b < 0 ? 0 : bit_of[f.b * words + w];
      ones += __builtin_popcountll(bit_of[f.a * words + w] ^ b);
    }
    const double z = std::abs(2.0 * ones - double(n)) / std::sqrt(double(n));
    verdict.max_z[f.family] = std::max(verdict.max_z[f.family], z);
    ++verdict.tests;
  }
}

// Post-processes party 0's serialized key given the point function it encodes.
using Leak = std::function<void(std::vector<uint8_t>& key, uint64_t alpha, uint32_t beta)>;

// Keys for alpha in {0, N/2, N - 1} times beta in {0, 1, uniform} (XOR: beta = 1), each class
// tested on its own, for both parties.
Verdict Examine(const DpfParameters& params, uint64_t seed, const Leak& leak = nullptr) {
  SeededRandomForTesting rng(seed);
  std::mt19937_64 gen(seed);
  const uint64_t n = params.domain_size();
  const bool xor_output = params.output == OutputType::kXor;
  const std::vector<Feature> features = Features(params);
  Verdict verdict;
  for (uint64_t alpha : {uint64_t{0}, n / 2, n - 1}) {
    for (int beta_kind = xor_output ? 1 : 0; beta_kind <= (xor_output ? 1 : 2); ++beta_kind) {
      std::vector<std::vector<uint8_t>> party[2];
      for (int i = 0; i < kKeysPerClass; ++i) {
        const uint32_t beta = beta_kind < 2 ? beta_kind : static_cast<uint32_t>(gen());
        auto keys = GenerateKeys(params, alpha, beta, rng);
        EXPECT_TRUE(keys.ok()) << keys.status();
        party[0].push_back(keys->first.Serialize());
        party[1].push_back(keys->second.Serialize());
        if (leak) leak(party[0].back(), alpha, beta);
      }
      for (const auto& keys : party) AddClass(features, keys, verdict);
    }
  }
  return verdict;
}

uint64_t TestSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

class KeyPrivacyTest : public ::testing::TestWithParam<Prg> {};

TEST_P(KeyPrivacyTest, NoKeyBitOrPairOfBitsDependsOnAlphaOrBeta) {
  SCOPED_TRACE(::testing::Message() << "seed " << TestSeed());
  uint64_t config = 0;
  for (const char* output : {"add1", "add2", "add4", "add8", "add16", "xor"}) {
    for (int log_domain : {2, 9, 14}) {
      const DpfParameters params = *ParseOutput(output, {log_domain, GetParam()});
      const Verdict verdict = Examine(params, TestSeed() + ++config);
      for (int f = 0; f < kFamilies; ++f) {
        EXPECT_FALSE(verdict.Sees(Family(f)))
            << PrgName(GetParam()) << " " << output << " log domain " << log_domain << ": "
            << kFamilyNames[f] << " statistic; " << verdict.Describe();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPrgs, KeyPrivacyTest,
                         ::testing::Values(Prg::kAes128, Prg::kChaCha8, Prg::kChaCha12,
                                           Prg::kChaCha20, Prg::kSipHash),
                         [](const auto& info) { return std::string(PrgName(info.param)); });

// Deliberately leaky variants: keys whose bits are post-processed to carry one bit of alpha or
// beta. Each must be seen by the statistic it targets; those that keep every bit fair must slip
// past the per-bit statistic, which is why the pair statistics exist.
void SetBit(std::vector<uint8_t>& key, int bit, bool value) {
  key[bit / 8] = static_cast<uint8_t>((key[bit / 8] & ~(1u << (bit % 8))) | (value << (bit % 8)));
}
bool GetBit(const std::vector<uint8_t>& key, int bit) { return (key[bit / 8] >> (bit % 8)) & 1; }

class LeakyKeyTest : public ::testing::Test {
 protected:
  const DpfParameters params_{9, Prg::kAes128};  // add16: 5 levels
  const KeyBits bits_{params_};
  std::mt19937_64 coin_{TestSeed()};
};

TEST_F(LeakyKeyTest, PerBitStatisticSeesABiasedBit) {
  // In 3 keys out of 4, bit 77 of level 0's correction seed is alpha's top bit.
  const Verdict v = Examine(params_, TestSeed(), [&](auto& key, uint64_t alpha, uint32_t) {
    if (coin_() % 4 != 0) SetBit(key, bits_.seed(0, 77), alpha >> 8);
  });
  EXPECT_TRUE(v.Sees(kPerBit)) << v.Describe();
}

TEST_F(LeakyKeyTest, WithinCorrectionWordStatisticSeesAPairLeak) {
  // Level 1: seed bit 9 := bit 8 XOR alpha's lowest bit (each bit stays fair).
  const Verdict v = Examine(params_, TestSeed(), [&](auto& key, uint64_t alpha, uint32_t) {
    SetBit(key, bits_.seed(1, 9), GetBit(key, bits_.seed(1, 8)) ^ (alpha & 1));
  });
  EXPECT_TRUE(v.Sees(kWithinCorrectionWord)) << v.Describe();
  EXPECT_FALSE(v.Sees(kPerBit)) << v.Describe();
}

TEST_F(LeakyKeyTest, WithinCorrectionWordStatisticSeesAControlBitLeak) {
  // Level 0: right control-bit correction := left one XOR alpha's top bit.
  const Verdict v = Examine(params_, TestSeed(), [&](auto& key, uint64_t alpha, uint32_t) {
    SetBit(key, bits_.t_right(0), GetBit(key, bits_.t_left(0)) ^ (alpha >> 8));
  });
  EXPECT_TRUE(v.Sees(kWithinCorrectionWord)) << v.Describe();
  EXPECT_FALSE(v.Sees(kPerBit)) << v.Describe();
}

TEST_F(LeakyKeyTest, AcrossLevelsStatisticSeesALeakBetweenLevels) {
  // Level 3's seed bit 40 := level 2's bit 40 XOR alpha's top bit.
  const Verdict v = Examine(params_, TestSeed(), [&](auto& key, uint64_t alpha, uint32_t) {
    SetBit(key, bits_.seed(3, 40), GetBit(key, bits_.seed(2, 40)) ^ (alpha >> 8));
  });
  EXPECT_TRUE(v.Sees(kAcrossLevels)) << v.Describe();
  EXPECT_FALSE(v.Sees(kPerBit)) << v.Describe();
}

TEST_F(LeakyKeyTest, FinalWordStatisticSeesABetaLeak) {
  // Final word: bit 5 := bit 4 XOR (beta != 0), the leak weight-0 padding must not have.
  const Verdict v = Examine(params_, TestSeed(), [&](auto& key, uint64_t, uint32_t beta) {
    SetBit(key, bits_.final_word(5), GetBit(key, bits_.final_word(4)) ^ (beta != 0));
  });
  EXPECT_TRUE(v.Sees(kFinalWord)) << v.Describe();
  EXPECT_FALSE(v.Sees(kPerBit)) << v.Describe();
}

}  // namespace
}  // namespace veil::dpf
