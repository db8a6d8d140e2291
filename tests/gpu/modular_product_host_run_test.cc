// The GPU modular product's phases, run on the host, against GMP: random odd moduli of edge and
// Paillier sizes, edge residues, every tree shape; and real Paillier ciphertexts, whose product
// must equal veil_paillier's aggregate and decrypt to the plaintext sum.
#include <gmp.h>

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gpu/modular_product.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

using ::testing::HasSubstr;

uint64_t Seed() { return testing::TestSeed("gpu_modular_product_host_run_test"); }

void ToWords(mpz_srcptr x, uint32_t* out, size_t limbs) {
  std::fill(out, out + limbs, 0u);
  size_t count = 0;
  mpz_export(out, &count, -1, sizeof(uint32_t), 0, 0, x);
}

void FromWords(const uint32_t* words, size_t limbs, mpz_ptr x) {
  mpz_import(x, limbs, -1, sizeof(uint32_t), 0, 0, words);
}

// rows x columns random residues below a random odd modulus of `limbs` words (top word != 0);
// the first rows hold the edge residues 0, 1 and N - 1. Returns GMP's products per column.
std::vector<std::vector<uint32_t>> MakeCase(size_t limbs, uint64_t rows, uint64_t columns,
                                            std::mt19937_64& rng, std::vector<uint32_t>& modulus,
                                            std::vector<uint32_t>& residues) {
  modulus.resize(limbs);
  for (uint32_t& w : modulus) w = static_cast<uint32_t>(rng());
  modulus[0] |= 1;
  modulus.back() |= 0x80000000u >> (rng() % 31);
  if (limbs == 1 && modulus[0] == 1) modulus[0] = 3;
  mpz_t n, x, acc;
  mpz_inits(n, x, acc, nullptr);
  FromWords(modulus.data(), limbs, n);
  residues.assign(rows * columns * limbs, 0);
  std::vector<std::vector<uint32_t>> expected(columns, std::vector<uint32_t>(limbs));
  for (uint64_t c = 0; c < columns; ++c) {
    mpz_set_ui(acc, 1);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t i = r * columns + c;
      if (i == 0) {
        mpz_set_ui(x, 0);
      } else if (i == 1) {
        mpz_set_ui(x, 1);
      } else if (i == 2) {
        mpz_sub_ui(x, n, 1);
      } else {
        std::vector<uint32_t> words(limbs + 2);
        for (uint32_t& w : words) w = static_cast<uint32_t>(rng());
        FromWords(words.data(), words.size(), x);
        mpz_mod(x, x, n);
      }
      ToWords(x, &residues[i * limbs], limbs);
      mpz_mul(acc, acc, x);
      mpz_mod(acc, acc, n);
    }
    ToWords(acc, expected[c].data(), limbs);
  }
  mpz_clears(n, x, acc, nullptr);
  return expected;
}

TEST(ModularProductHostRun, EqualsGmpOnEdgeAndPaillierSizes) {
  std::mt19937_64 rng(Seed());
  for (size_t limbs : {1, 2, 3, 17, 64, 128, 192}) {
    for (uint64_t rows : {1, 2, 15, 16, 17, 70}) {
      for (uint64_t columns : {1, 3}) {
        for (uint64_t parallel : {1, 7, 1024}) {
          if (limbs >= 128 && rows > 16 && parallel != 7) continue;  // keeps the test fast
          std::vector<uint32_t> modulus, residues;
          const auto expected = MakeCase(limbs, rows, columns, rng, modulus, residues);
          std::vector<uint32_t> out(columns * limbs);
          ASSERT_TRUE(HostRunModularProduct({modulus, residues, rows, columns}, absl::MakeSpan(out),
                                            parallel)
                          .ok());
          for (uint64_t c = 0; c < columns; ++c) {
            EXPECT_EQ(std::vector<uint32_t>(out.begin() + c * limbs, out.begin() + (c + 1) * limbs),
                      expected[c])
                << limbs << " limbs, " << rows << " rows, column " << c << ", parallel "
                << parallel;
          }
        }
      }
    }
  }
}

TEST(ModularProductHostRun, SumsPaillierCiphertextsLikeTheCpuAggregate) {
  auto keys = he::GenerateKeyPair({.modulus_bits = 1024, .insecure_for_comparison = true});
  ASSERT_TRUE(keys.ok()) << keys.status();
  const he::PublicKey& pk = keys->public_key;
  auto fixed = he::FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  const size_t limbs = (pk.n_squared().bits() + 31) / 32;
  std::vector<uint32_t> modulus(limbs), residues;
  ToWords(pk.n_squared().get(), modulus.data(), limbs);
  std::vector<he::Ciphertext> cts;
  uint64_t sum = 0;
  for (uint64_t m = 1; m <= 40; ++m) {
    cts.push_back(*he::Encrypt(pk, he::Mpz(m * m), **fixed));
    sum += m * m;
    residues.resize(cts.size() * limbs);
    ToWords(cts.back().value.get(), &residues[(cts.size() - 1) * limbs], limbs);
  }
  std::vector<uint32_t> out(limbs);
  ASSERT_TRUE(
      HostRunModularProduct({modulus, residues, cts.size(), 1}, absl::MakeSpan(out), 5).ok());
  he::Ciphertext gpu_sum;
  FromWords(out.data(), limbs, gpu_sum.value.get());
  EXPECT_EQ(gpu_sum, *he::Aggregate(pk, cts, 2));
  EXPECT_EQ(*he::Decrypt(*keys, gpu_sum), he::Mpz(sum));
}

TEST(ModularProductHostRun, RejectsBadInput) {
  const std::vector<uint32_t> modulus = {7, 1}, residues = {1, 0, 2, 0};
  std::vector<uint32_t> out(2);
  auto run = [&](std::vector<uint32_t> m, std::vector<uint32_t> r, uint64_t rows, uint64_t columns,
                 size_t out_words) {
    std::vector<uint32_t> o(out_words);
    return std::string(HostRunModularProduct({m, r, rows, columns}, absl::MakeSpan(o)).message());
  };
  EXPECT_THAT(run({8, 1}, residues, 2, 1, 2), HasSubstr("must be odd"));
  EXPECT_THAT(run({7, 0}, residues, 2, 1, 2), HasSubstr("non-zero top word"));
  EXPECT_THAT(run({}, {}, 1, 1, 0), HasSubstr("non-zero top word"));
  EXPECT_THAT(run({1}, {0}, 1, 1, 1), HasSubstr("above 1"));
  EXPECT_THAT(run(modulus, residues, 3, 1, 2), HasSubstr("need 6 words in"));
  EXPECT_THAT(run(modulus, residues, 0, 1, 2), HasSubstr("0 x 1 residues"));
  EXPECT_THAT(run(modulus, residues, 2, 1, 4), HasSubstr("and 2 out"));
  EXPECT_THAT(run(modulus, {7, 1, 2, 0}, 2, 1, 2), HasSubstr("residue 0 is not below"));
  EXPECT_TRUE(HostRunModularProduct({modulus, residues, 2, 1}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{2, 0}));
}

}  // namespace
}  // namespace veil::gpu
