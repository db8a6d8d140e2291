#include "pir/he/paillier/pipeline.h"

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/randomizer.h"
#include "tests/pir/he/paillier/test_support.h"

namespace veil::he {
namespace {

using ::testing::HasSubstr;
using testing::TestKeys;
using testing::TestSeed;

// A stand-in for encryption that returns its input after a random pause, or blocks until the
// gate opens, or fails on one item.
struct FakeWork {
  std::shared_future<void> gate;
  std::atomic<int> started{0};
  uint64_t fail_on = UINT64_MAX;

  PipelinedEncryptor::EncryptFn Fn(uint64_t seed) {
    return [this, seed](const Mpz& m) -> absl::StatusOr<Ciphertext> {
      started.fetch_add(1);
      if (gate.valid()) gate.wait();
      std::mt19937_64 rng(seed + mpz_get_ui(m.get()));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      if (mpz_get_ui(m.get()) == fail_on) return absl::InternalError("boom at item 5");
      return Ciphertext{m};
    };
  }
};

std::vector<Mpz> Counting(int n) {
  std::vector<Mpz> out;
  for (int i = 0; i < n; ++i) out.emplace_back(static_cast<uint64_t>(i));
  return out;
}

TEST(PaillierPipeline, ResultsComeInSubmissionOrder) {
  FakeWork work;
  auto pipeline = PipelinedEncryptor::Create(work.Fn(TestSeed()), {.workers = 4, .capacity = 8});
  ASSERT_TRUE(pipeline.ok());
  const std::vector<Mpz> in = Counting(200);
  auto out = (*pipeline)->EncryptAll(in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ((*out)[i].value, in[i]) << i;
  EXPECT_EQ((*pipeline)->Next().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*pipeline)->Submit(Mpz(1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PaillierPipeline, EncryptsWithARealKey) {
  const KeyPair& keys = TestKeys(1024);
  auto fixed = FixedBaseRandomizer::Create(keys.public_key);
  ASSERT_TRUE(fixed.ok());
  auto pipeline = PipelinedEncryptor::Create(keys.public_key, **fixed, {.workers = 3});
  ASSERT_TRUE(pipeline.ok());
  const std::vector<Mpz> in = Counting(25);
  auto out = (*pipeline)->EncryptAll(in);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(*Decrypt(keys, (*out)[i]), in[i]);
}

// With every worker stuck, the producer gets exactly `capacity` items in and then waits.
TEST(PaillierPipeline, BackpressureBoundsTheItemsInFlight) {
  std::promise<void> open;
  FakeWork work;
  work.gate = open.get_future().share();
  auto pipeline = PipelinedEncryptor::Create(work.Fn(TestSeed()), {.workers = 2, .capacity = 3});
  ASSERT_TRUE(pipeline.ok());
  std::atomic<int> submitted{0};
  std::thread producer([&] {
    for (const Mpz& m : Counting(10)) {
      ASSERT_TRUE((*pipeline)->Submit(m).ok());
      submitted.fetch_add(1);
    }
    (*pipeline)->Close();
  });
  while (work.started.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(submitted.load(), 3);
  open.set_value();
  for (uint64_t i = 0; i < 10; ++i) {
    auto c = (*pipeline)->Next();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->value, Mpz(i));
  }
  producer.join();
  EXPECT_EQ(submitted.load(), 10);
}

TEST(PaillierPipeline, CancelReleasesABlockedProducerAndConsumer) {
  std::promise<void> open;
  FakeWork work;
  work.gate = open.get_future().share();
  auto pipeline = PipelinedEncryptor::Create(work.Fn(TestSeed()), {.workers = 1, .capacity = 2});
  ASSERT_TRUE(pipeline.ok());
  std::promise<absl::Status> producer_status;
  std::thread producer([&] {
    absl::Status s;
    for (const Mpz& m : Counting(5)) {
      s = (*pipeline)->Submit(m);
      if (!s.ok()) break;
    }
    producer_status.set_value(s);
  });
  std::promise<absl::Status> consumer_status;
  std::thread consumer([&] { consumer_status.set_value((*pipeline)->Next().status()); });
  while (work.started.load() < 1) std::this_thread::yield();
  (*pipeline)->Cancel();
  EXPECT_EQ(producer_status.get_future().get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(consumer_status.get_future().get().code(), absl::StatusCode::kCancelled);
  producer.join();
  consumer.join();
  EXPECT_EQ((*pipeline)->Submit(Mpz(1)).code(), absl::StatusCode::kCancelled);
  open.set_value();  // the worker finishes its item; the destructor joins it
}

TEST(PaillierPipeline, AnErrorIsReportedInOrderAndStopsThePipeline) {
  FakeWork work;
  work.fail_on = 5;
  auto pipeline = PipelinedEncryptor::Create(work.Fn(TestSeed()), {.workers = 3, .capacity = 4});
  ASSERT_TRUE(pipeline.ok());
  std::thread producer([&] {
    for (const Mpz& m : Counting(50)) {
      if (!(*pipeline)->Submit(m).ok()) return;
    }
  });
  for (uint64_t i = 0; i < 5; ++i) {
    auto c = (*pipeline)->Next();
    ASSERT_TRUE(c.ok()) << i << ": " << c.status();
    EXPECT_EQ(c->value, Mpz(i));
  }
  auto failed = (*pipeline)->Next();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(), HasSubstr("boom at item 5"));
  producer.join();
  EXPECT_EQ((*pipeline)->Next().status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*pipeline)->Submit(Mpz(1)).code(), absl::StatusCode::kInternal);
}

TEST(PaillierPipeline, AnEmptyPoolFailsEncryptAll) {
  const KeyPair& keys = TestKeys(1024);
  auto pool = RandomnessPool::Create(keys.public_key, 3, 1);
  ASSERT_TRUE(pool.ok());
  auto pipeline =
      PipelinedEncryptor::Create(keys.public_key, **pool, {.workers = 2, .capacity = 2});
  ASSERT_TRUE(pipeline.ok());
  auto out = (*pipeline)->EncryptAll(Counting(8));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(PaillierPipeline, CreateRejectsBadOptions) {
  FakeWork work;
  EXPECT_EQ(PipelinedEncryptor::Create(work.Fn(1), {.workers = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PipelinedEncryptor::Create(work.Fn(1), {.workers = 1, .capacity = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace veil::he
