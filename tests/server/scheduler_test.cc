#include <kj/async-io.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dpf/testing/seeded_keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/two_server/query.h"
#include "server/key_batcher.h"

namespace veil::server {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;
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

// A scheduler whose backend holds every pass until `gate` opens: calls submitted while the first
// is held queue behind it.
struct HeldScheduler {
  explicit HeldScheduler(const ServerLimits& limits) : scheduler(limits, stats) {
    backend->gate = &gate;
  }
  // Submits `keys` and waits until the worker holds them in the backend.
  kj::Promise<absl::StatusOr<KeyBatcher::Shares>> SubmitHeld(const std::vector<dpf::DpfKey>& keys) {
    auto promise = scheduler.Submit(backend, keys);
    io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);
    return promise;
  }

  kj::AsyncIoContext io = kj::setupAsyncIo();
  std::shared_ptr<FakeBackend> backend = std::make_shared<FakeBackend>();
  absl::Notification gate;
  ServerStats stats;
  KeyBatcher scheduler;
};

TEST(KeyBatcherTest, CallsGatheredWithinTheWaitShareOnePass) {
  auto io = kj::setupAsyncIo();
  auto backend = std::make_shared<FakeBackend>();
  ServerStats stats;
  ServerLimits limits;
  limits.max_batch_keys = 12;
  limits.max_wait = absl::Seconds(5);
  KeyBatcher scheduler(limits, stats);
  std::vector<std::vector<dpf::DpfKey>> calls;
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<KeyBatcher::Shares>>>(4);
  for (int c = 0; c < 4; ++c) {
    calls.push_back(MakeKeys(3, 100 + c));
    promises.add(scheduler.Submit(backend, calls.back()));
  }
  auto results = kj::joinPromises(promises.finish()).wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  for (int c = 0; c < 4; ++c) {
    ASSERT_TRUE(results[c].ok()) << results[c].status();
    EXPECT_EQ(*results[c], Expected(calls[c]));
  }
  // Before any pass the scheduler does not wait (1/8 of no pass is nothing), so the first call may
  // go alone; every pass stays within the batch bound and every key is answered once.
  EXPECT_THAT(backend->batches, Each(Le(12u)));
  size_t total = 0;
  for (size_t b : backend->batches) total += b;
  EXPECT_EQ(total, 12u);
  EXPECT_EQ(stats.Snapshot().passes, backend->batches.size());
}

TEST(KeyBatcherTest, CallsQueuedDuringAPassAreBatchedTogether) {
  ServerLimits limits;
  limits.max_batch_keys = 64;
  HeldScheduler held(limits);
  auto& [io, backend, gate, stats, scheduler] = held;
  auto first_keys = MakeKeys(1, 1);
  auto first = held.SubmitHeld(first_keys);
  std::vector<std::vector<dpf::DpfKey>> calls;
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<KeyBatcher::Shares>>>(5);
  for (int c = 0; c < 5; ++c) {
    calls.push_back(MakeKeys(2, 10 + c));
    promises.add(scheduler.Submit(backend, calls.back()));
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
  EXPECT_EQ(backend->batches, (std::vector<size_t>{1, 10}));
}

TEST(KeyBatcherTest, CallsAbandonedWhileQueuedAreNeverEvaluated) {
  // A client that disconnects (its calls' promises dropped) left its queued keys to be computed
  // for nobody, as long as its other calls' passes.
  ServerLimits limits;
  limits.max_batch_keys = 3;
  HeldScheduler held(limits);
  auto& [io, backend, gate, stats, scheduler] = held;
  auto first_keys = MakeKeys(3, 1);
  auto first = held.SubmitHeld(first_keys);
  auto abandoned_keys = MakeKeys(3, 2), kept_keys = MakeKeys(2, 3);
  { auto abandoned = scheduler.Submit(backend, abandoned_keys); }
  auto kept = scheduler.Submit(backend, kept_keys);
  gate.Notify();
  EXPECT_TRUE(first.wait(io.waitScope).ok());
  auto result = kept.wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, Expected(kept_keys));
  EXPECT_EQ(backend->batches, (std::vector<size_t>{3, 2}));
}

TEST(KeyBatcherTest, CancelledCallsMakeRoomInAFullQueue) {
  // A client that queues its share, cancels (its connection's counts fall at once) and queues
  // again must not fill the server's queue with calls nobody waits for.
  ServerLimits limits;
  limits.max_queued_keys = 4;
  limits.max_batch_keys = 2;
  HeldScheduler held(limits);
  auto& [io, backend, gate, stats, scheduler] = held;
  auto running = held.SubmitHeld(MakeKeys(2, 1));
  { auto cancelled = scheduler.Submit(backend, MakeKeys(4, 2)); }
  auto kept_keys = MakeKeys(3, 3);
  auto kept = scheduler.Submit(backend, kept_keys);
  auto refused = scheduler.Submit(backend, MakeKeys(2, 4)).wait(io.waitScope);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();  // 3 live + 2
  gate.Notify();
  EXPECT_TRUE(running.wait(io.waitScope).ok());
  auto result = kept.wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, Expected(kept_keys));
  EXPECT_EQ(backend->batches, (std::vector<size_t>{2, 3}));  // the cancelled keys never ran
}

TEST(KeyBatcherTest, FullQueueIsRefusedAndStopFailsQueuedCalls) {
  ServerLimits limits;
  limits.max_queued_keys = 4;
  limits.max_batch_keys = 2;
  HeldScheduler held(limits);
  auto& [io, backend, gate, stats, scheduler] = held;
  auto running = held.SubmitHeld(MakeKeys(2, 1));
  auto queued = scheduler.Submit(backend, MakeKeys(4, 2));
  auto refused = scheduler.Submit(backend, MakeKeys(1, 3)).wait(io.waitScope);
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
  auto late = scheduler.Submit(backend, MakeKeys(1, 4)).wait(io.waitScope);
  EXPECT_TRUE(absl::IsUnavailable(late.status()));
}

// A connection that fills the queue cannot keep another out: the newcomer's call pushes out the
// newest calls of the connection holding the most (which fail RESOURCE_EXHAUSTED), while a call
// that would leave its own connection holding as much as the heaviest is refused instead. The
// pushed-out calls never run; the others are answered.
TEST(KeyBatcherTest, AFullQueueIsSharedBetweenConnections) {
  ServerLimits limits;
  limits.max_queued_keys = 6;
  limits.max_batch_keys = 2;
  HeldScheduler held(limits);
  auto& [io, backend, gate, stats, scheduler] = held;
  int hog = 0, other = 0, late = 0;  // their addresses name three connections
  auto running = held.SubmitHeld(MakeKeys(2, 1));
  std::vector<std::vector<dpf::DpfKey>> hog_keys;
  std::vector<kj::Promise<absl::StatusOr<KeyBatcher::Shares>>> hog_calls;
  for (int c = 0; c < 3; ++c) {  // 6 keys: the queue is full
    hog_keys.push_back(MakeKeys(2, 10 + c));
    hog_calls.push_back(scheduler.Submit(backend, hog_keys.back(), {}, &hog));
  }
  // More of the hog's own is refused, and so is an anonymous call (no connection to weigh).
  auto refused = scheduler.Submit(backend, MakeKeys(1, 20), {}, &hog).wait(io.waitScope);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  auto anonymous = scheduler.Submit(backend, MakeKeys(1, 21)).wait(io.waitScope);
  EXPECT_TRUE(absl::IsResourceExhausted(anonymous.status())) << anonymous.status();
  // Another connection's 3 keys push out the hog's two newest calls (4 keys).
  const std::vector<dpf::DpfKey> other_keys = MakeKeys(3, 30);
  auto other_call = scheduler.Submit(backend, other_keys, {}, &other);
  for (int c : {1, 2}) {
    auto pushed = hog_calls[c].wait(io.waitScope);
    EXPECT_TRUE(absl::IsResourceExhausted(pushed.status())) << pushed.status();
    EXPECT_THAT(pushed.status().message(), HasSubstr("pushed out of the full queue")) << c;
  }
  // Queued now: the hog's 2 and the other's 3. A third connection's 3 keys would leave it
  // holding 3, as much as the heaviest: refused, nothing pushed out.
  auto third = scheduler.Submit(backend, MakeKeys(3, 40), {}, &late).wait(io.waitScope);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("already queued"));
  gate.Notify();
  EXPECT_TRUE(running.wait(io.waitScope).ok());
  auto first = hog_calls[0].wait(io.waitScope);
  auto answered = other_call.wait(io.waitScope);
  scheduler.Stop(io.waitScope, io.provider->getTimer());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, Expected(hog_keys[0]));
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(*answered, Expected(other_keys));
  size_t total = 0;
  for (size_t b : backend->batches) total += b;
  EXPECT_EQ(total, 2u + 2u + 3u);  // the pushed-out keys never ran
}

// The CPU backend, whose first pass waits for `gate` (so that later calls queue up together).
class GatedCpuBackend final : public pir::Backend {
 public:
  GatedCpuBackend(std::unique_ptr<pir::Backend> cpu, absl::Notification& gate)
      : cpu_(std::move(cpu)), gate_(gate) {}
  std::string name() const override { return "gated-cpu"; }
  const dpf::TableView& table() const override { return cpu_->table(); }
  absl::Status Answer(absl::Span<const dpf::DpfKey* const> keys,
                      absl::Span<uint32_t> out) override {
    gate_.WaitForNotification();
    ++passes;
    return cpu_->Answer(keys, out);
  }
  std::atomic<int> passes{0};

 private:
  std::unique_ptr<pir::Backend> cpu_;
  absl::Notification& gate_;
};

TEST(KeyBatcherTest, KeysThatCannotShareABackendCallDoNotFailEachOther) {
  // One pass holds additive AES keys, XOR keys and ChaCha keys of both parties (a first call
  // holds the worker until all are queued): each kind is answered as its own group, bit-exact.
  auto io = kj::setupAsyncIo();
  constexpr uint64_t kRows = 100;
  std::vector<uint32_t> data(kRows * kRowWords);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);
  auto cpu = pir::CreateCpuBackend(dpf::TableView{data.data(), kRows, kRowWords, 0}, 1);
  ASSERT_TRUE(cpu.ok());
  absl::Notification gate;
  auto backend = std::make_shared<GatedCpuBackend>(*std::move(cpu), gate);
  ServerStats stats;
  ServerLimits limits;
  limits.max_batch_keys = 64;
  KeyBatcher batcher(limits, stats);
  const std::pair<dpf::Prg, dpf::OutputType> kinds[] = {
      {dpf::Prg::kAes128, dpf::OutputType::kAdditive},
      {dpf::Prg::kAes128, dpf::OutputType::kXor},
      {dpf::Prg::kChaCha12, dpf::OutputType::kAdditive}};
  auto first = batcher.Submit(backend, {pir::MakeQuery(kRows, 0, 1)->key[0]});
  io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);
  std::vector<pir::QueryKeys> queries;
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<KeyBatcher::Shares>>>(6);
  for (int c = 0; c < 3; ++c) {
    auto q = pir::MakeQuery(kRows, 7 * c + 1, 1, kinds[c].first, kinds[c].second);
    ASSERT_TRUE(q.ok());
    queries.push_back(*std::move(q));
    for (int party = 0; party < 2; ++party) {
      promises.add(batcher.Submit(backend, {queries[c].key[party]}));
    }
  }
  gate.Notify();
  ASSERT_TRUE(first.wait(io.waitScope).ok());
  auto answers = kj::joinPromises(promises.finish()).wait(io.waitScope);
  batcher.Stop(io.waitScope, io.provider->getTimer());
  EXPECT_EQ(stats.Snapshot().passes, 2u) << "the six calls shared one pass";
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(answers[2 * c].ok() && answers[2 * c + 1].ok()) << answers[2 * c].status();
    std::vector<uint32_t> row(kRowWords);
    ASSERT_TRUE(
        pir::Reconstruct(kinds[c].second, *answers[2 * c], *answers[2 * c + 1], absl::MakeSpan(row))
            .ok());
    const uint64_t wanted = 7 * c + 1;
    EXPECT_EQ(row, std::vector<uint32_t>(data.begin() + wanted * kRowWords,
                                         data.begin() + (wanted + 1) * kRowWords))
        << "call " << c;
  }
}

TEST(KeyBatcherTest, CallsForDifferentTableVersionsShareAPassButNotABackendCall) {
  // Two table versions (two backends over different rows) queued into one pass: each call is
  // answered from the version it named, never from the other.
  auto io = kj::setupAsyncIo();
  constexpr uint64_t kRows = 64;
  std::vector<uint32_t> data[2];
  for (int v = 0; v < 2; ++v) {
    for (size_t i = 0; i < kRows * kRowWords; ++i) {
      data[v].push_back(static_cast<uint32_t>(i * 2654435761u + v * 977));
    }
  }
  absl::Notification gate;
  std::shared_ptr<GatedCpuBackend> versions[2];
  for (int v = 0; v < 2; ++v) {
    auto cpu = pir::CreateCpuBackend(dpf::TableView{data[v].data(), kRows, kRowWords, 0}, 1);
    ASSERT_TRUE(cpu.ok());
    versions[v] = std::make_shared<GatedCpuBackend>(*std::move(cpu), gate);
  }
  ServerStats stats;
  ServerLimits limits;
  limits.max_batch_keys = 64;
  KeyBatcher batcher(limits, stats);
  auto first = batcher.Submit(versions[0], {pir::MakeQuery(kRows, 0, 1)->key[0]});
  io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);
  constexpr uint64_t kRow = 5;
  auto q = pir::MakeQuery(kRows, kRow, 1);
  ASSERT_TRUE(q.ok());
  auto promises = kj::heapArrayBuilder<kj::Promise<absl::StatusOr<KeyBatcher::Shares>>>(4);
  for (int v = 0; v < 2; ++v) {
    for (int party = 0; party < 2; ++party)
      promises.add(batcher.Submit(versions[v], {q->key[party]}));
  }
  gate.Notify();
  ASSERT_TRUE(first.wait(io.waitScope).ok());
  auto answers = kj::joinPromises(promises.finish()).wait(io.waitScope);
  batcher.Stop(io.waitScope, io.provider->getTimer());
  EXPECT_EQ(stats.Snapshot().passes, 2u) << "the four calls shared one pass";
  EXPECT_EQ(versions[1]->passes.load(), 1) << "version 1's keys went in one backend call";
  for (int v = 0; v < 2; ++v) {
    ASSERT_TRUE(answers[2 * v].ok() && answers[2 * v + 1].ok()) << answers[2 * v].status();
    std::vector<uint32_t> row(kRowWords);
    ASSERT_TRUE(pir::Reconstruct(dpf::OutputType::kAdditive, *answers[2 * v], *answers[2 * v + 1],
                                 absl::MakeSpan(row))
                    .ok());
    EXPECT_EQ(row, std::vector<uint32_t>(data[v].begin() + kRow * kRowWords,
                                         data[v].begin() + (kRow + 1) * kRowWords))
        << "version " << v;
  }
}

}  // namespace
}  // namespace veil::server
