// Replicas and failover (mobile_client/replicas.h, Transport::Call): address lists, and a client
// with two replicas per party against real veil-server processes on loopback while replicas die,
// stall or serve another table.
#include "mobile_client/replicas.h"

#include <signal.h>

#include <atomic>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"
#include "tools/launcher.h"

namespace veil::client {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kRows = 512;
constexpr uint32_t kDim = 8;

TEST(ParseReplicaListTest, SplitsAndTrims) {
  auto one = ParseReplicaList("127.0.0.1:4000", 0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, ElementsAre("127.0.0.1:4000"));
  auto two = ParseReplicaList(" 127.0.0.1:4000 , host.example:4001,[::1]:4002", 1);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(*two, ElementsAre("127.0.0.1:4000", "host.example:4001", "[::1]:4002"));
}

TEST(ParseReplicaListTest, MalformedListsAreInvalidArgument) {
  for (const char* list :
       {"", " ", "127.0.0.1:4000,", ",127.0.0.1:4000", "127.0.0.1", "127.0.0.1:0",
        "127.0.0.1:65536", "127.0.0.1:http", ":4000", "127.0.0.1:4000,127.0.0.1:4000"}) {
    auto parsed = ParseReplicaList(list, 1);
    ASSERT_FALSE(parsed.ok()) << list;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << list;
    EXPECT_THAT(parsed.status().message(), HasSubstr("server 1")) << list;
  }
  EXPECT_THAT(ParseReplicaList("a:1,a:1", 0).status().message(), HasSubstr("names a:1 twice"));
}

TEST(ParseReplicaListTest, ClientConnectRefusesMalformedListsBeforeConnecting) {
  ClientOptions options;
  options.server0 = "127.0.0.1:4000,,127.0.0.1:4001";
  options.server1 = "127.0.0.1:4002";
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("empty entry"));
}

TEST(LatencyWindowTest, HedgeDelayIsThePercentileWithAFloor) {
  LatencyWindow window;
  EXPECT_EQ(window.HedgeDelay(absl::Seconds(2)), absl::Milliseconds(500));  // no samples yet
  for (int i = 1; i <= 100; ++i) window.Add(absl::Milliseconds(i));
  // The last 64 samples are 37..100 ms; their 95th percentile is the 61st, 97 ms.
  EXPECT_EQ(window.HedgeDelay(absl::Seconds(2)), absl::Milliseconds(97));
  LatencyWindow fast;
  for (int i = 0; i < 20; ++i) fast.Add(absl::Microseconds(300));
  EXPECT_EQ(fast.HedgeDelay(absl::Seconds(2)), kHedgeFloor);
}

TEST(BackoffTest, DoublesUpToTheCeiling) {
  EXPECT_EQ(BackoffAfter(1), kFirstBackoff);
  EXPECT_EQ(BackoffAfter(3), 4 * kFirstBackoff);
  EXPECT_EQ(BackoffAfter(60), kMaxBackoff);
}

// Two replicas of each party: pair[r] holds replica r of party 0 and of party 1.
class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path =
        testing::WriteRandomTable("replicas.veil", embedding::RowFormat::kFp32, kRows, kDim, 7);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
    auto table = embedding::Table::Open(path_);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = *std::move(table);
    for (auto& pair : pair_) {
      auto started = testing::StartTwoServers(path_, path_);
      ASSERT_TRUE(started.ok()) << started.status();
      pair = *std::move(started);
    }
  }

  ClientOptions Options(absl::Duration timeout = absl::Seconds(5)) const {
    ClientOptions options;
    options.server0 = absl::StrCat(pair_[0].address(0), ",", pair_[1].address(0));
    options.server1 = absl::StrCat(pair_[0].address(1), ",", pair_[1].address(1));
    options.timeout = timeout;
    return options;
  }

  // Looks up `n` random rows; counts failed lookups and wrong rows.
  void LookUp(Client& client, int n, std::mt19937_64& rng, int* failed, int* wrong) const {
    for (int i = 0; i < n; ++i) {
      const uint64_t row = rng() % kRows;
      auto words = client.LookupWords({row});
      if (!words.ok()) {
        ++*failed;
        ADD_FAILURE() << "lookup " << i << ": " << words.status();
        continue;
      }
      auto plain = table_->row(row);
      if (!std::equal(plain.begin(), plain.end(), words->begin())) ++*wrong;
    }
  }

  std::string path_;
  std::unique_ptr<embedding::Table> table_;
  testing::TwoServers pair_[2];
};

TEST_F(ReplicasTest, KillingAReplicaCostsNoLookups) {
  auto client = Client::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  std::atomic<int> done{0};
  int failed = 0, wrong = 0;
  std::thread stream([&] {
    std::mt19937_64 rng(1);
    for (int i = 0; i < 120; ++i, ++done) LookUp(**client, 1, rng, &failed, &wrong);
  });
  // Calls go to the first replica that is up: kill party 0's first replica, then party 1's,
  // while the lookups run.
  auto wait_for = [&](int n) {
    while (done.load() < n) absl::SleepFor(absl::Milliseconds(1));
  };
  wait_for(20);
  pair_[0].server[0]->Kill();
  wait_for(60);
  pair_[0].server[1]->Kill();
  stream.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  // At least the call that found its replica gone went to the other one (a replica that lost a
  // hedge race before the kill may not have been asked first, so not necessarily one per kill).
  EXPECT_GT((*client)->totals().failovers, 0u);
  EXPECT_EQ((*client)->totals().lookups, 120u);
}

TEST_F(ReplicasTest, AStalledReplicaIsHedged) {
  auto client = Client::Connect(Options(absl::Seconds(3)));
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 rng(2);
  int failed = 0, wrong = 0;
  LookUp(**client, 20, rng, &failed, &wrong);  // fills the latency window
  EXPECT_EQ((*client)->totals().hedges, 0u);
  // A stopped process keeps its sockets: connections stay open, replies never come.
  const pid_t stalled = pair_[0].server[0]->pid();
  ASSERT_EQ(kill(stalled, SIGSTOP), 0);
  const absl::Time start = absl::Now();
  LookUp(**client, 30, rng, &failed, &wrong);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(kill(stalled, SIGCONT), 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_GT((*client)->totals().hedges, 0u);
  // Each lookup waited a hedge delay at most, never its timeout.
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(ReplicasTest, ConnectGoesAheadWithoutAStalledReplica) {
  const pid_t stalled = pair_[1].server[1]->pid();  // party 1's second replica
  ASSERT_EQ(kill(stalled, SIGSTOP), 0);
  // Connect waits for the silent replica up to the timeout, then goes ahead without it.
  auto client = Client::Connect(Options(absl::Seconds(1)));
  std::mt19937_64 rng(5);
  int failed = 0, wrong = 0;
  if (client.ok()) LookUp(**client, 20, rng, &failed, &wrong);
  ASSERT_EQ(kill(stalled, SIGCONT), 0);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
}

TEST_F(ReplicasTest, AllReplicasOfAPartyDownIsUnavailableNamingIt) {
  auto client = Client::Connect(Options(absl::Seconds(2)));
  ASSERT_TRUE(client.ok()) << client.status();
  pair_[0].server[1]->Kill();
  pair_[1].server[1]->Kill();
  auto words = (*client)->LookupWords({3});
  ASSERT_FALSE(words.ok());
  EXPECT_EQ(words.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(words.status().message(),
              AllOf(HasSubstr("server 1: all 2 of its replicas failed"),
                    HasSubstr(pair_[0].address(1)), HasSubstr(pair_[1].address(1))));
  auto none = Client::Connect(Options(absl::Seconds(2)));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("server 1: all 2 of its replicas failed"));
}

TEST_F(ReplicasTest, ConnectToleratesADownReplica) {
  pair_[1].server[0]->Kill();  // party 0's second replica
  auto client = Client::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 rng(3);
  int failed = 0, wrong = 0;
  LookUp(**client, 5, rng, &failed, &wrong);
  pair_[0].server[0]->Kill();  // now party 0 has no replica up
  auto words = (*client)->LookupWords({1});
  ASSERT_FALSE(words.ok());
  EXPECT_EQ(words.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(words.status().message(), HasSubstr("server 0: all 2 of its replicas failed"));
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
}

TEST_F(ReplicasTest, ADeadReplicaIsUsedAgainOnceItComesBack) {
  auto client = Client::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 rng(4);
  int failed = 0, wrong = 0;
  const int port = pair_[0].server[0]->port();
  pair_[0].server[0]->Kill();  // party 0's first replica
  LookUp(**client, 5, rng, &failed, &wrong);
  // It comes back on its port; once its backoff has passed, a call reconnects it in the
  // background, and the lookups survive losing party 0's other replica.
  tools::ServerProcessOptions restart;
  restart.binary = VEIL_SERVER_BINARY;
  restart.party = 0;
  restart.table_path = path_;
  restart.listen = absl::StrCat("127.0.0.1:", port);
  auto back = tools::ServerProcess::Start(restart);
  ASSERT_TRUE(back.ok()) << back.status();
  // Its backoff has doubled with each failed reconnection while it was down (at most 1.6 s in
  // the second it takes to come back): three seconds of calls pass it.
  const absl::Time until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < until) {
    LookUp(**client, 1, rng, &failed, &wrong);
    absl::SleepFor(absl::Milliseconds(20));
  }
  pair_[1].server[0]->Kill();
  LookUp(**client, 10, rng, &failed, &wrong);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
}

TEST_F(ReplicasTest, AReplicaOfAnotherTableIsRefusedNamingIt) {
  auto other = testing::WriteRandomTable("other.veil", embedding::RowFormat::kFp32, kRows, kDim, 8);
  ASSERT_TRUE(other.ok()) << other.status();
  auto odd = testing::StartTwoServers(*other, path_);
  ASSERT_TRUE(odd.ok()) << odd.status();
  ClientOptions options = Options();
  options.server0 = absl::StrCat(pair_[0].address(0), ",", odd->address(0));
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      client.status().message(),
      AllOf(HasSubstr(absl::StrCat("server 0 (", odd->address(0), ") serves another table")),
            HasSubstr("replicas of one server must serve the same table")));
}

}  // namespace
}  // namespace veil::client
