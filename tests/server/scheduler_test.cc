#include "server/scheduler.h"

#include <kj/async-io.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dpf/testing/seeded_keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::server {
namespace {

using ::testing::Each;
using ::testing::Le;

constexpr uint32_t kRowWords = 3;

// Answers each key with its root seed's low word plus the word index, and records batch sizes.
class FakeBackend final : public pir::Backend {
 public:
  FakeBackend() {
    view_.words = table_;
    view_.rows = 2;
    view_.row_words = kRowWords;
  }
  std::string name() const override { return "fake"; }
  const dpf::TableView& table() const override { return view_; }
  absl::Status Answer(absl::Span<const dpf::DpfKey* const> keys,
                      absl::Span<uint32_t> out) override {
    if (gate != nullptr) gate->WaitForNotification();
    batches.push_back(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      for (uint32_t j = 0; j < kRowWords; ++j) {
        out[k * kRowWords + j] = static_cast<uint32_t>(keys[k]->root().lo) + j;
      }
    }
    return absl::OkStatus();
  }

  std::vector<size_t> batches;  // written by the worker, read after Stop()
  absl::Notification* gate = nullptr;

 private:
  uint32_t table_[2 * kRowWords] = {};
  dpf::TableView view_;
};

std::vector<dpf::DpfKey> MakeKeys(int n, uint64_t seed) {
  dpf::SeededRandomForTesting rng(seed);
  dpf::DpfParameters params;
  params.log_domain = 1;
  std::vector<dpf::DpfKey> keys;
  for (int i = 0; i < n; ++i) keys.push_back(dpf::GenerateKeys(params, 0, 1, rng)->first);
  return keys;
}

std::vector<uint32_t> Expected(const std::vector<dpf::DpfKey>& keys) {
  std::vector<uint32_t> out;
  for (const dpf::DpfKey& key : keys) {
    for (uint32_t j = 0; j < kRowWords; ++j)
      out.push_back(static_cast<uint32_t>(key.root().lo) + j);
  }
  return out;
}

TEST(BatchSchedulerTest, CallsGatheredWithinTheWaitShareOnePass) {
  auto io = kj::setupAsyncIo();
  FakeBackend backend;
  ServerStats stats;
  ServerLimits limits;
  limits.max_batch_keys = 12;
  limits.max_wait = absl::Seconds(5);
  BatchScheduler scheduler(backend, limits, stats);
  std::vector<std::vector<dpf::DpfKey>> calls;
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<BatchScheduler::Shares>>>(4);
  for (int c = 0; c < 4; ++c) {
    calls.push_back(MakeKeys(3, 100 + c));
    promises.add(scheduler.Submit(calls.back()));
  }
  auto results = kj::joinPromises(promises.finish()).wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  for (int c = 0; c < 4; ++c) {
    ASSERT_TRUE(results[c].ok()) << results[c].status();
    EXPECT_EQ(*results[c], Expected(calls[c]));
  }
  // Before any pass the scheduler does not wait (1/8 of no pass is nothing), so the first call may
  // go alone; every pass stays within the batch bound and every key is answered once.
  EXPECT_THAT(backend.batches, Each(Le(12u)));
  size_t total = 0;
  for (size_t b : backend.batches) total += b;
  EXPECT_EQ(total, 12u);
  EXPECT_EQ(stats.Snapshot().passes, backend.batches.size());
}

TEST(BatchSchedulerTest, CallsQueuedDuringAPassAreBatchedTogether) {
  auto io = kj::setupAsyncIo();
  FakeBackend backend;
  absl::Notification gate;
  backend.gate = &gate;
  ServerStats stats;
  ServerLimits limits;
  limits.max_batch_keys = 64;
  BatchScheduler scheduler(backend, limits, stats);
  auto first_keys = MakeKeys(1, 1);
  auto first = scheduler.Submit(first_keys);
  // Let the worker take the first call and block in the backend.
  io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);
  std::vector<std::vector<dpf::DpfKey>> calls;
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<BatchScheduler::Shares>>>(5);
  for (int c = 0; c < 5; ++c) {
    calls.push_back(MakeKeys(2, 10 + c));
    promises.add(scheduler.Submit(calls.back()));
  }
  EXPECT_EQ(stats.Snapshot().queued_keys, 10u);
  gate.Notify();
  EXPECT_TRUE(first.wait(io.waitScope).ok());
  auto results = kj::joinPromises(promises.finish()).wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  for (int c = 0; c < 5; ++c) {
    ASSERT_TRUE(results[c].ok());
    EXPECT_EQ(*results[c], Expected(calls[c]));
  }
  EXPECT_EQ(backend.batches, (std::vector<size_t>{1, 10}));
}

TEST(BatchSchedulerTest, FullQueueIsRefusedAndStopFailsQueuedCalls) {
  auto io = kj::setupAsyncIo();
  FakeBackend backend;
  absl::Notification gate;
  backend.gate = &gate;
  ServerStats stats;
  ServerLimits limits;
  limits.max_queued_keys = 4;
  limits.max_batch_keys = 2;
  BatchScheduler scheduler(backend, limits, stats);
  auto running = scheduler.Submit(MakeKeys(2, 1));
  io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);
  auto queued = scheduler.Submit(MakeKeys(4, 2));
  auto refused = scheduler.Submit(MakeKeys(1, 3)).wait(io.waitScope);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(50));
    gate.Notify();
  });
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  release.join();
  EXPECT_TRUE(running.wait(io.waitScope).ok());
  auto failed = queued.wait(io.waitScope);
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  auto late = scheduler.Submit(MakeKeys(1, 4)).wait(io.waitScope);
  EXPECT_TRUE(absl::IsUnavailable(late.status()));
}

}  // namespace
}  // namespace veil::server
