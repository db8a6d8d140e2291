#include "pir/he/paillier/paillier.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/pir/he/paillier/test_support.h"

namespace veil::he {
namespace {

using ::testing::HasSubstr;
using testing::SeededBelow;
using testing::TestKeys;
using testing::TestSeed;
using testing::VectorsOf;

constexpr int kAllSizes[] = {1024, 2048, 3072};

Mpz Minus1(const Mpz& x) {
  Mpz y = x;
  mpz_sub_ui(y.get(), y.get(), 1);
  return y;
}

TEST(PaillierKnownAnswer, EncryptionAndDecryptionMatchThePythonVectors) {
  for (int bits : kAllSizes) {
    const KeyPair& keys = TestKeys(bits);
    ASSERT_EQ(VectorsOf("enc", bits).size(), 5u);
    for (const auto* v : VectorsOf("enc", bits)) {
      const Mpz& m = v->numbers[0];
      auto c = EncryptWithR(keys.public_key, m, v->numbers[1]);
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(c->value, v->numbers[2]) << bits << " bits, m = " << m.ToHex();
      EXPECT_EQ(*Decrypt(keys, *c), m);
      EXPECT_EQ(*DecryptPlain(keys, *c), m);
    }
  }
}

TEST(PaillierKnownAnswer, HomomorphicOperationsMatchThePythonVectors) {
  for (int bits : kAllSizes) {
    const KeyPair& keys = TestKeys(bits);
    const PublicKey& pk = keys.public_key;
    const auto* add = VectorsOf("add", bits).at(0);
    EXPECT_EQ(Add(pk, {add->numbers[0]}, {add->numbers[1]}).value, add->numbers[2]);
    const auto* addp = VectorsOf("addp", bits).at(0);
    EXPECT_EQ(AddPlain(pk, {addp->numbers[0]}, addp->numbers[1])->value, addp->numbers[2]);
    const auto* mulk = VectorsOf("mulk", bits).at(0);
    EXPECT_EQ(MulConst(pk, {mulk->numbers[0]}, mulk->numbers[1])->value, mulk->numbers[2]);
    const auto* dec = VectorsOf("dec", bits).at(0);
    EXPECT_EQ(*Decrypt(keys, {dec->numbers[0]}), dec->numbers[1]);
    EXPECT_EQ(*DecryptPlain(keys, {dec->numbers[0]}), dec->numbers[1]);
  }
}

TEST(PaillierKeys, SizesOtherThan2048And3072NeedTheInsecureSwitch) {
  auto refused = GenerateKeyPair({.modulus_bits = 1024});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("accepted only with insecure_for_comparison"));
  auto odd = GenerateKeyPair({.modulus_bits = 1536, .insecure_for_comparison = true});
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(odd.status().message(), HasSubstr("use 2048 or 3072"));
  const auto* key = VectorsOf("key", 1024).at(0);
  EXPECT_EQ(KeyPairFromPrimes(key->numbers[0], key->numbers[1], false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PaillierKeys, FromPrimesRejectsBadPrimes) {
  const auto* key = VectorsOf("key", 1024).at(0);
  const Mpz& p = key->numbers[0];
  const Mpz& q = key->numbers[1];
  EXPECT_THAT(KeyPairFromPrimes(p, p, true).status().message(), HasSubstr("distinct"));
  EXPECT_THAT(KeyPairFromPrimes(p, Minus1(q), true).status().message(), HasSubstr("not prime"));
  const auto* big = VectorsOf("key", 2048).at(0);
  EXPECT_THAT(KeyPairFromPrimes(p, big->numbers[0], true).status().message(),
              HasSubstr("equal size"));
}

TEST(PaillierKeys, GeneratedKeysHaveExactSizeAndWork) {
  for (int bits : {1024, 2048}) {
    auto keys = GenerateKeyPair({.modulus_bits = bits, .insecure_for_comparison = bits == 1024});
    ASSERT_TRUE(keys.ok()) << keys.status();
    EXPECT_EQ(keys->public_key.modulus_bits(), bits);
    EXPECT_EQ(keys->public_key.n().bits(), static_cast<size_t>(bits));
    EXPECT_EQ(keys->secret_key.p.bits(), static_cast<size_t>(bits / 2));
    EXPECT_EQ(keys->secret_key.q.bits(), static_cast<size_t>(bits / 2));
    TextbookRandomizer fresh(keys->public_key);
    const Mpz m(123456789);
    auto c = Encrypt(keys->public_key, m, fresh);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(*Decrypt(*keys, *c), m);
  }
}

// decrypt(encrypt(m)) = m at every size, with every randomness source, for 0, 1, n - 1 and a
// random plaintext; CRT and plain decryption agree.
TEST(PaillierRoundTrip, EveryKeySizeEveryRandomizerEdgePlaintexts) {
  uint64_t state = TestSeed();
  for (int bits : kAllSizes) {
    const KeyPair& keys = TestKeys(bits);
    const PublicKey& pk = keys.public_key;
    TextbookRandomizer textbook(pk);
    auto pool = RandomnessPool::Create(pk, 4, 2);
    ASSERT_TRUE(pool.ok()) << pool.status();
    auto fixed = FixedBaseRandomizer::Create(pk);
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    Randomizer* sources[] = {&textbook, pool->get(), fixed->get()};
    for (const Mpz& m : {Mpz(0), Mpz(1), Minus1(pk.n()), SeededBelow(pk.n(), state)}) {
      for (Randomizer* source : sources) {
        auto c = Encrypt(pk, m, *source);
        ASSERT_TRUE(c.ok()) << c.status();
        EXPECT_EQ(*Decrypt(keys, *c), m) << bits << " bits";
        EXPECT_EQ(*DecryptPlain(keys, *c), m) << bits << " bits";
      }
    }
  }
}

TEST(PaillierRoundTrip, CrtDecryptionEqualsPlainOnRandomIntegers) {
  uint64_t state = TestSeed() + 1;
  const KeyPair& keys = TestKeys(1024);
  for (int i = 0; i < 50; ++i) {
    Ciphertext c{SeededBelow(keys.public_key.n_squared(), state)};
    if (mpz_sgn(c.value.get()) == 0) continue;
    EXPECT_EQ(*Decrypt(keys, c), *DecryptPlain(keys, c)) << c.value.ToHex();
  }
}

TEST(PaillierRoundTrip, OutOfRangeInputsAreRejected) {
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  TextbookRandomizer fresh(pk);
  Mpz negative(5);
  mpz_neg(negative.get(), negative.get());
  for (const Mpz& m : {pk.n(), negative}) {
    auto c = Encrypt(pk, m, fresh);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr("plaintext must be in [0, n)"));
  }
  EXPECT_THAT(EncryptWithR(pk, Mpz(1), Mpz(0)).status().message(),
              HasSubstr("r must be in [1, n)"));
  for (const Mpz& c : {Mpz(0), pk.n_squared()}) {
    EXPECT_THAT(Decrypt(keys, {c}).status().message(), HasSubstr("ciphertext must be in [1, n^2)"));
    EXPECT_THAT(DecryptPlain(keys, {c}).status().message(), HasSubstr("[1, n^2)"));
  }
  EXPECT_THAT(AddPlain(pk, {Mpz(1)}, pk.n()).status().message(), HasSubstr("[0, n)"));
  EXPECT_THAT(MulConst(pk, {Mpz(1)}, pk.n()).status().message(), HasSubstr("[0, n)"));
}

TEST(PaillierHomomorphic, AddPlainAndMulConstOnRandomValues) {
  uint64_t state = TestSeed() + 2;
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  auto fixed = FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  for (int i = 0; i < 10; ++i) {
    const Mpz a = SeededBelow(pk.n(), state), b = SeededBelow(pk.n(), state);
    auto ca = Encrypt(pk, a, **fixed);
    auto cb = Encrypt(pk, b, **fixed);
    ASSERT_TRUE(ca.ok() && cb.ok());
    Mpz sum, product;
    mpz_add(sum.get(), a.get(), b.get());
    mpz_mod(sum.get(), sum.get(), pk.n().get());
    mpz_mul(product.get(), a.get(), b.get());
    mpz_mod(product.get(), product.get(), pk.n().get());
    EXPECT_EQ(*Decrypt(keys, Add(pk, *ca, *cb)), sum);
    EXPECT_EQ(*Decrypt(keys, *AddPlain(pk, *ca, b)), sum);
    EXPECT_EQ(*Decrypt(keys, *MulConst(pk, *ca, b)), product);
  }
}

TEST(PaillierRandomizer, PoolHandsOutEachValueOnceThenRefuses) {
  const KeyPair& keys = TestKeys(1024);
  auto pool = RandomnessPool::Create(keys.public_key, 3, 2);
  ASSERT_TRUE(pool.ok());
  std::set<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    Mpz rn;
    ASSERT_TRUE((*pool)->Next(rn).ok());
    seen.insert(rn.ToHex());
    EXPECT_EQ((*pool)->remaining(), static_cast<size_t>(2 - i));
  }
  EXPECT_EQ(seen.size(), 3u);
  auto c = Encrypt(keys.public_key, Mpz(7), **pool);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("pool of 3 values is used up"));
  EXPECT_EQ(RandomnessPool::Create(keys.public_key, 3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The table walk (constant-time selection) equals GMP's exponentiation for every window width,
// on edge exponents and random ones.
TEST(PaillierRandomizer, FixedBaseTableEqualsPowm) {
  uint64_t state = TestSeed() + 3;
  const PublicKey& pk = TestKeys(1024).public_key;
  Mpz top;
  mpz_setbit(top.get(), 256);
  for (int w = 1; w <= 8; ++w) {
    auto fixed = FixedBaseRandomizer::Create(pk, {.window_bits = w});
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    for (const Mpz& alpha : {Mpz(0), Mpz(1), Minus1(top), SeededBelow(top, state)}) {
      Mpz table, reference;
      (*fixed)->Power(alpha, table);
      mpz_powm(reference.get(), (*fixed)->base().get(), alpha.get(), pk.n_squared().get());
      EXPECT_EQ(table, reference) << "w = " << w << ", alpha = " << alpha.ToHex();
    }
  }
  EXPECT_EQ(FixedBaseRandomizer::Create(pk, {.window_bits = 9}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FixedBaseRandomizer::Create(pk, {.exponent_bits = 64}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// r^n values are n-th residues mod n^2: (r^n)^lambda = 1 (lambda(n^2) = n lambda).
TEST(PaillierRandomizer, EverySourceGivesNthResidues) {
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  TextbookRandomizer textbook(pk);
  auto fixed = FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  for (Randomizer* source : std::vector<Randomizer*>{&textbook, fixed->get()}) {
    Mpz rn, check;
    ASSERT_TRUE(source->Next(rn).ok());
    mpz_powm(check.get(), rn.get(), keys.secret_key.lambda.get(), pk.n_squared().get());
    EXPECT_EQ(check, Mpz(1));
  }
}

// The side-channel silent product against GMP's ordinary one, on random and edge operands.
TEST(PaillierSecrets, SecureModMulEqualsMpzMulMod) {
  uint64_t state = TestSeed() + 4;
  for (int bits : kAllSizes) {
    const Mpz& modulus = TestKeys(bits).public_key.n_squared();
    SecureModMul mul(modulus);
    const size_t limbs = mul.limbs();
    for (int i = 0; i < 20; ++i) {
      const Mpz a = i == 0 ? Minus1(modulus) : SeededBelow(modulus, state);
      const Mpz b = i == 1 ? Mpz(0) : i == 2 ? Mpz(1) : SeededBelow(modulus, state);
      std::vector<mp_limb_t> la(limbs), lb(limbs);
      ToLimbs(a, la.data(), limbs);
      ToLimbs(b, lb.data(), limbs);
      mul.Mul(la.data(), lb.data(), la.data());
      Mpz secure, reference;
      FromLimbs(la.data(), limbs, secure);
      mpz_mul(reference.get(), a.get(), b.get());
      mpz_mod(reference.get(), reference.get(), modulus.get());
      EXPECT_EQ(secure, reference) << bits << " bits, case " << i;
    }
  }
}

TEST(PaillierSecrets, WipeZeroesEveryAllocatedLimb) {
  SecretMpz x;
  mpz_set_str(x.get(), "123456789abcdef0123456789abcdef0123456789abcdef", 16);
  const mp_limb_t* limbs = x.get()->_mp_d;
  const int alloc = x.get()->_mp_alloc;
  ASSERT_GT(alloc, 0);
  Wipe(x.get());
  for (int i = 0; i < alloc; ++i) EXPECT_EQ(limbs[i], 0u) << "limb " << i;
  EXPECT_EQ(x, Mpz(0));
}

}  // namespace
}  // namespace veil::he
