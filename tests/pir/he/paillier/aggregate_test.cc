#include "pir/he/paillier/aggregate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/pir/he/paillier/test_support.h"

namespace veil::he {
namespace {

using ::testing::HasSubstr;
using testing::SeededBelow;
using testing::TestKeys;
using testing::TestSeed;

// Random batches: the threaded tree equals the sequential reference bit for bit, and decrypts to
// the plaintext sum, for edge and odd counts and thread numbers.
TEST(PaillierAggregate, RandomBatchesSumToThePlaintextSum) {
  uint64_t state = TestSeed() + 20;
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  auto pool = RandomnessPool::Create(pk, 40, 2);
  ASSERT_TRUE(pool.ok());
  std::vector<Ciphertext> all;
  std::vector<Mpz> plain;
  for (int i = 0; i < 37; ++i) {
    plain.push_back(SeededBelow(pk.n(), state));
    all.push_back(*Encrypt(pk, plain.back(), **pool));
  }
  for (size_t count : {1, 2, 3, 16, 17, 37}) {
    auto batch = absl::MakeConstSpan(all).subspan(0, count);
    Mpz expected;
    for (size_t i = 0; i < count; ++i) mpz_add(expected.get(), expected.get(), plain[i].get());
    mpz_mod(expected.get(), expected.get(), pk.n().get());
    auto reference = AggregateSequential(pk, batch, 1);
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(*Decrypt(keys, *reference), expected) << count;
    for (int threads : {1, 2, 3, 5, 8, 64}) {
      auto sum = Aggregate(pk, batch, threads);
      ASSERT_TRUE(sum.ok()) << sum.status();
      EXPECT_EQ(*sum, *reference) << count << " ciphertexts, " << threads << " threads";
    }
  }
}

TEST(PaillierAggregate, BatchesSumElementWiseLikeTheReference) {
  uint64_t state = TestSeed() + 21;
  const KeyPair& keys = TestKeys(1024);
  const PublicKey& pk = keys.public_key;
  auto fixed = FixedBaseRandomizer::Create(pk);
  ASSERT_TRUE(fixed.ok());
  for (size_t columns : {1, 3}) {
    std::vector<CiphertextBatch> batches;
    std::vector<Mpz> expected(columns);
    for (int b = 0; b < 9; ++b) {
      CiphertextBatch batch{pk.id(), {.value_bits = 0, .max_summands = 0}, columns, 1, {}};
      for (size_t c = 0; c < columns; ++c) {
        const Mpz m = SeededBelow(pk.n(), state);
        mpz_add(expected[c].get(), expected[c].get(), m.get());
        batch.ciphertexts.push_back(*Encrypt(pk, m, **fixed));
      }
      batches.push_back(std::move(batch));
    }
    auto reference = AggregateBatchesSequential(pk, batches, 1);
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(reference->summands, 9u);
    for (size_t c = 0; c < columns; ++c) {
      mpz_mod(expected[c].get(), expected[c].get(), pk.n().get());
      EXPECT_EQ(*Decrypt(keys, reference->ciphertexts[c]), expected[c]);
    }
    for (int threads : {1, 2, 4, 7, 20}) {
      auto sum = AggregateBatches(pk, batches, threads);
      ASSERT_TRUE(sum.ok()) << sum.status();
      EXPECT_EQ(sum->ciphertexts, reference->ciphertexts) << columns << " " << threads;
      EXPECT_EQ(sum->summands, 9u);
    }
  }
}

TEST(PaillierAggregate, RejectsMismatchedOrEmptyInput) {
  const PublicKey& pk = TestKeys(1024).public_key;
  const PublicKey& other = TestKeys(2048).public_key;
  EXPECT_THAT(Aggregate(pk, {}, 1).status().message(), HasSubstr("no ciphertexts"));
  EXPECT_THAT(Aggregate(pk, {Ciphertext{Mpz(1)}}, 0).status().message(),
              HasSubstr("threads must be >= 1"));
  const CiphertextBatch a{pk.id(), {0, 0}, 2, 1, {{Mpz(1)}, {Mpz(2)}}};
  CiphertextBatch foreign = a;
  foreign.key_id = other.id();
  CiphertextBatch shorter = a;
  shorter.ciphertexts.pop_back();
  shorter.values = 1;
  EXPECT_THAT(AggregateBatches(pk, {}, 1).status().message(), HasSubstr("no batches"));
  EXPECT_THAT(AggregateBatches(pk, {a, foreign}, 1).status().message(),
              HasSubstr("batch 1 was encrypted under another key"));
  EXPECT_THAT(AggregateBatches(pk, {a, shorter}, 2).status().message(),
              HasSubstr("batch 1 has another packing or size"));
  EXPECT_THAT(AggregateBatchesSequential(pk, {a, shorter}, 1).status().message(),
              HasSubstr("batch 1 has another packing or size"));
}

}  // namespace
}  // namespace veil::he
