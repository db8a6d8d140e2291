// A real veil-server process spoken to at the RPC level, with hostile calls: each gets an error
// reply naming the problem, while a well-behaved client on another thread keeps getting correct
// rows from the same servers.
#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "pir/two_server/query.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::Client;
using client::ClientOptions;
using client::RowRange;
using ::testing::HasSubstr;

constexpr uint64_t kRows = 300;
constexpr uint32_t kDim = 8;
constexpr uint32_t kMaxKeys = 16;

class ServerRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("rpc.veil", embedding::RowFormat::kFp32, kRows, kDim, 7);
    ASSERT_TRUE(path.ok()) << path.status();
    table_path_ = *path;
    auto servers = testing::StartTwoServers(
        table_path_, table_path_,
        {absl::StrCat("--max_keys_per_call=", kMaxKeys), "--max_message_bytes=65536"});
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = *std::move(servers);
    auto table = embedding::Table::Open(table_path_);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
  }

  // Sends `keys` to server 0 in an `answer` call; returns the status of the reply.
  absl::Status Answer0(const std::vector<std::vector<uint8_t>>& keys) {
    capnp::EzRpcClient rpc("127.0.0.1", servers_.server[0]->port());
    auto cap = rpc.getMain<rpc::PirServer>();
    auto request = cap.answerRequest();
    auto list = request.initKeys(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
    }
    try {
      auto reply = request.send().wait(rpc.getWaitScope());
      EXPECT_EQ(reply.getShares().size(), keys.size() * kDim);
      return absl::OkStatus();
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server 0");
    }
  }

  std::vector<uint8_t> GoodKey(int party, uint64_t row = 1, uint64_t rows = kRows,
                               dpf::OutputType output = dpf::OutputType::kAdditive) {
    return pir::MakeQuery(rows, row, 1, dpf::Prg::kAes128, output)->key[party].Serialize();
  }

  std::string table_path_;
  testing::TwoServers servers_;
  std::unique_ptr<embedding::Table> table_;
};

TEST_F(ServerRpcTest, ConfigDescribesTheTableAndLimits) {
  capnp::EzRpcClient rpc("127.0.0.1", servers_.server[1]->port());
  auto reply = rpc.getMain<rpc::PirServer>().configRequest().send().wait(rpc.getWaitScope());
  rpc::Config::Reader c = reply.getConfig();
  auto hello = rpc.getMain<rpc::VeilServer>().helloRequest().send().wait(rpc.getWaitScope());
  EXPECT_EQ(hello.getHello().getProtocolVersion(), rpc::PROTOCOL_VERSION);
  EXPECT_EQ(std::string(hello.getHello().getProtocol().cStr()), "dpf2");
  EXPECT_EQ(c.getParty(), 1);
  EXPECT_EQ(c.getRows(), kRows);
  EXPECT_EQ(c.getDim(), kDim);
  EXPECT_EQ(c.getRowWords(), kDim);
  EXPECT_EQ(c.getRowFormat(), static_cast<uint8_t>(embedding::RowFormat::kFp32));
  EXPECT_EQ(c.getLogDomain(), dpf::LogDomainForRows(kRows));
  EXPECT_EQ(c.getTable().getEpoch(), 1u);
  auto digest = table_->digest();
  EXPECT_EQ(kj::arrayPtr(digest.data(), digest.size()), c.getTable().getDigest());
  EXPECT_EQ(c.getLimits().getMaxKeysPerCall(), kMaxKeys);
  EXPECT_EQ(c.getLimits().getMaxMessageBytes(), 65536u);
  EXPECT_EQ(std::string(c.getBackend().cStr()), "cpu");
  // AES-128 and the ChaCha variants; SipHash only with --prgs.
  ASSERT_EQ(c.getPrgs().size(), 4u);
  for (uint8_t prg : c.getPrgs()) EXPECT_NE(prg, static_cast<uint8_t>(dpf::Prg::kSipHash));
}

TEST_F(ServerRpcTest, BadCallsGetErrorRepliesWhileAGoodClientKeepsWorking) {
  std::atomic<bool> stop{false};
  std::atomic<int> good_lookups{0};
  std::atomic<int> good_failures{0};
  std::thread good([&] {
    ClientOptions options;
    options.server0 = servers_.address(0);
    options.server1 = servers_.address(1);
    auto client = Client::Connect(options);
    if (!client.ok()) {
      ++good_failures;
      return;
    }
    uint64_t row = 0;
    while (!stop.load()) {
      row = (row * 31 + 7) % kRows;
      auto words = (*client)->LookupWords({row, kRows - 1});
      if (!words.ok()) {
        ++good_failures;
        continue;
      }
      auto a = table_->row(row), b = table_->row(kRows - 1);
      if (!std::equal(a.begin(), a.end(), words->begin()) ||
          !std::equal(b.begin(), b.end(), words->begin() + kDim)) {
        ++good_failures;
      }
      ++good_lookups;
    }
  });

  // Garbage bytes.
  absl::Status s = Answer0({GoodKey(0), {1, 2, 3, 4}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("key 1"));
  // A valid key cut short, and one with a byte appended.
  std::vector<uint8_t> key = GoodKey(0);
  s = Answer0({std::vector<uint8_t>(key.begin(), key.end() - 1)});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  key.push_back(0);
  s = Answer0({key});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  // The other party's key.
  s = Answer0({GoodKey(0), GoodKey(1)});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("key 1 is for party 1 but this server is party 0"));
  // A key for a larger table (wrong domain).
  s = Answer0({GoodKey(0, 5, kRows * 4)});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("key 0"));
  // Too many keys, no keys.
  s = Answer0(std::vector<std::vector<uint8_t>>(kMaxKeys + 1, GoodKey(0)));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("exceed the limit of 16 keys per call"));
  s = Answer0({});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  // Over max_message_bytes (64 KiB) but under the hard bound: an error reply.
  s = Answer0({std::vector<uint8_t>(100000, 0x56)});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("exceeds the limit of 65536 bytes"));
  // Far over the hard bound: the server drops that connection, nothing else.
  s = Answer0({std::vector<uint8_t>(1 << 20, 0x56)});
  EXPECT_FALSE(s.ok());
  // Pooled: XOR keys and inconsistent bags.
  {
    capnp::EzRpcClient rpc("127.0.0.1", servers_.server[0]->port());
    auto cap = rpc.getMain<rpc::PirServer>();
    auto pooled = [&](std::vector<std::vector<uint8_t>> keys, std::vector<uint32_t> bags) {
      auto request = cap.answerPooledRequest();
      auto list = request.initKeys(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
      }
      auto b = request.initBagSizes(bags.size());
      for (size_t i = 0; i < bags.size(); ++i) b.set(i, bags[i]);
      try {
        request.send().wait(rpc.getWaitScope());
        return absl::OkStatus();
      } catch (const kj::Exception& e) {
        return rpc::ExceptionToStatus(e, "server 0");
      }
    };
    s = pooled({GoodKey(0, 1, kRows, dpf::OutputType::kXor)}, {1});
    EXPECT_THAT(s.message(), HasSubstr("pooled answers need additive keys"));
    s = pooled({GoodKey(0), GoodKey(0)}, {1});
    EXPECT_THAT(s.message(), HasSubstr("bag sizes add up to 1 but the call holds 2 keys"));
    s = pooled({GoodKey(0)}, {1, 0});
    EXPECT_THAT(s.message(), HasSubstr("bag 1 is empty"));
    EXPECT_TRUE(pooled({GoodKey(0), GoodKey(0)}, {2}).ok());
  }
  // And a good call on a fresh connection still works.
  EXPECT_TRUE(Answer0({GoodKey(0), GoodKey(0, 0)}).ok());

  absl::SleepFor(absl::Milliseconds(200));
  stop = true;
  good.join();
  EXPECT_EQ(good_failures.load(), 0);
  EXPECT_GT(good_lookups.load(), 0);

  ClientOptions options;
  options.server0 = servers_.address(0);
  options.server1 = servers_.address(1);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  auto stats = (*client)->ServerStats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->errors, 11u);  // every bad call above but the dropped connection
  EXPECT_GT(stats->calls, 0u);
  EXPECT_GT(stats->passes, 0u);
  EXPECT_GT(stats->latency_p50_ms, 0);
}

// Sends `keys` with `ranges` ({first_row, rows} per key) to server `party` in an `answer` call;
// returns its shares or the error reply.
absl::StatusOr<std::vector<uint32_t>> AnswerInRanges(
    int port, const std::vector<std::vector<uint8_t>>& keys,
    const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  capnp::EzRpcClient rpc("127.0.0.1", port);
  auto cap = rpc.getMain<rpc::PirServer>();
  auto request = cap.answerRequest();
  auto list = request.initKeys(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
  }
  auto r = request.initRanges(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    r[i].setFirstRow(ranges[i].first);
    r[i].setRows(ranges[i].second);
  }
  try {
    auto reply = request.send().wait(rpc.getWaitScope());
    std::vector<uint32_t> shares;
    for (uint32_t w : reply.getShares()) shares.push_back(w);
    return shares;
  } catch (const kj::Exception& e) {
    return rpc::ExceptionToStatus(e, "server");
  }
}

TEST_F(ServerRpcTest, RangeKeysAreAnsweredOverTheirRangeAndBadRangesAreRefused) {
  capnp::EzRpcClient config_rpc("127.0.0.1", servers_.server[0]->port());
  auto config =
      config_rpc.getMain<rpc::PirServer>().configRequest().send().wait(config_rpc.getWaitScope());
  EXPECT_TRUE(config.getConfig().getRangeQueries());

  // Good: keys over three ranges (one of them the whole table) in one call, bit-exact.
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {100, 32}, {0, kRows}, {268, 32}, {100, 32}, {299, 1}};
  const std::vector<uint64_t> index = {5, 250, 31, 0, 0};
  std::vector<std::vector<uint8_t>> keys[2];
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto q = pir::MakeQuery(ranges[i].second, index[i], 1);
    ASSERT_TRUE(q.ok()) << q.status();
    for (int p = 0; p < 2; ++p) keys[p].push_back(q->key[p].Serialize());
  }
  auto s0 = AnswerInRanges(servers_.server[0]->port(), keys[0], ranges);
  auto s1 = AnswerInRanges(servers_.server[1]->port(), keys[1], ranges);
  ASSERT_TRUE(s0.ok()) << s0.status();
  ASSERT_TRUE(s1.ok()) << s1.status();
  ASSERT_EQ(s0->size(), ranges.size() * kDim);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto plain = table_->row(ranges[i].first + index[i]);
    for (uint32_t j = 0; j < kDim; ++j) {
      EXPECT_EQ((*s0)[i * kDim + j] + (*s1)[i * kDim + j], plain[j]) << "key " << i;
    }
  }

  const int port = servers_.server[0]->port();
  // Past the end, ending past the end, empty, and a count that does not match the keys.
  absl::Status s = AnswerInRanges(port, {GoodKey(0, 1, 32)}, {{kRows, 32}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("range 0"));
  s = AnswerInRanges(port, {GoodKey(0, 1, 32)}, {{kRows - 31, 32}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("outside the table"));
  s = AnswerInRanges(port, {GoodKey(0, 1, 32), GoodKey(0, 1, 32)}, {{0, 32}, {0, 0}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("range 1: the row range is empty"));
  s = AnswerInRanges(port, {GoodKey(0, 1, 32), GoodKey(0, 1, 32)}, {{0, 32}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("1 row ranges for 2 keys"));
  // A key whose domain does not fit its range: a whole-table key on 32 rows, a 32-row key on 64.
  s = AnswerInRanges(port, {GoodKey(0, 1, 32), GoodKey(0, 1)}, {{0, 32}, {0, 32}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("key 1"));
  s = AnswerInRanges(port, {GoodKey(0, 1, 32)}, {{0, 64}}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("key 0"));

  // The server keeps serving: whole-table and range lookups through the client.
  ClientOptions options;
  options.server0 = servers_.address(0);
  options.server1 = servers_.address(1);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto whole = (*client)->LookupWords({7, kRows - 1});
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto a = table_->row(7);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), whole->begin()));
  auto ranged = (*client)->LookupWordsInRanges({3}, {RowRange{64, 32}});
  ASSERT_TRUE(ranged.ok()) << ranged.status();
  auto b = table_->row(67);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), ranged->begin()));
  auto stats = (*client)->ServerStats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->errors, 6u);
}

TEST_F(ServerRpcTest, GarbageOnTheSocketOnlyClosesThatConnection) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(servers_.server[0]->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // A segment table claiming 2^31 segments, then noise.
  std::vector<uint8_t> garbage(4096, 0xA5);
  garbage[0] = garbage[1] = garbage[2] = 0xff;
  garbage[3] = 0x7f;
  ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  // The server may send an Abort message, then hangs up.
  char buf[4096];
  ssize_t n;
  size_t total = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) total += static_cast<size_t>(n);
  EXPECT_LT(total, sizeof(buf));
  close(fd);
  EXPECT_TRUE(Answer0({GoodKey(0)}).ok());
}

TEST(ServerLimitsTest, ConnectionsBeyondTheLimitAreRefused) {
  auto path = testing::WriteRandomTable("conn.veil", embedding::RowFormat::kFp32, 10, 4, 1);
  ASSERT_TRUE(path.ok());
  auto servers = testing::StartTwoServers(*path, *path, {"--max_connections=1"});
  ASSERT_TRUE(servers.ok()) << servers.status();
  ClientOptions options;
  options.server0 = servers->address(0);
  options.server1 = servers->address(1);
  options.timeout = absl::Seconds(2);
  auto first = Client::Connect(options);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Client::Connect(options);
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE((*first)->Lookup({1}).ok());
  first->reset();
  absl::SleepFor(absl::Milliseconds(100));  // the server notices the first client left
  EXPECT_TRUE(Client::Connect(options).ok());
}

TEST(ServerLimitsTest, OneConnectionCannotFillTheQueue) {
  constexpr uint64_t kBigRows = 1 << 16;
  auto path = testing::WriteRandomTable("q.veil", embedding::RowFormat::kFp32, kBigRows, 16, 1);
  ASSERT_TRUE(path.ok());
  auto servers = testing::StartTwoServers(
      *path, *path, {"--max_keys_per_call=16", "--max_queued_keys_per_connection=16"});
  ASSERT_TRUE(servers.ok()) << servers.status();
  capnp::EzRpcClient rpc("127.0.0.1", servers->server[0]->port());
  auto cap = rpc.getMain<rpc::PirServer>();
  std::vector<std::vector<uint8_t>> keys;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(pir::MakeQuery(kBigRows, i, 1)->key[0].Serialize());
  }
  // Five calls sent at once: the first is queued, the others exceed this connection's share.
  std::vector<kj::Promise<absl::Status>> replies;
  for (int c = 0; c < 5; ++c) {
    auto request = cap.answerRequest();
    auto list = request.initKeys(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
    }
    replies.push_back(request.send().then(
        [](auto) { return absl::OkStatus(); },
        [](kj::Exception&& e) { return rpc::ExceptionToStatus(e, "server 0"); }));
  }
  // Meanwhile another client is served normally.
  ClientOptions options;
  options.server0 = servers->address(0);
  options.server1 = servers->address(1);
  auto other = Client::Connect(options);
  ASSERT_TRUE(other.ok());
  int ok = 0, refused = 0;
  for (auto& reply : replies) {
    absl::Status s = reply.wait(rpc.getWaitScope());
    if (s.ok()) {
      ++ok;
    } else {
      EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
      EXPECT_THAT(s.message(), HasSubstr("per connection"));
      ++refused;
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1);
  EXPECT_TRUE((*other)->Lookup({1, 2, 3}).ok());
}

TEST(ServerLimitsTest, ADisconnectedClientsQueuedCallsAreNotComputed) {
  // A client sends four calls of 1,024 keys (each its own pass on one thread) and disconnects
  // while the first runs. Before, capnp kept every call running without a caller (services did
  // not allow cancellation), so all four passes ran for nobody, and a client could fill the
  // server's queue one connection at a time. Now the queued calls are dropped.
  constexpr uint64_t kBigRows = 1 << 18;
  auto path = testing::WriteRandomTable("big.veil", embedding::RowFormat::kFp32, kBigRows, 16, 1);
  ASSERT_TRUE(path.ok());
  auto servers = testing::StartTwoServers(*path, *path);
  ASSERT_TRUE(servers.ok()) << servers.status();
  const int port = servers->server[0]->port();
  std::vector<std::vector<uint8_t>> keys;
  for (int i = 0; i < 1024; ++i) {
    keys.push_back(pir::MakeQuery(kBigRows, i, 1)->key[0].Serialize());
  }
  struct Counts {
    uint64_t passes, queued_keys, connections;
  };
  const auto stats = [port] {
    capnp::EzRpcClient rpc("127.0.0.1", port);
    auto reply = rpc.getMain<rpc::PirServer>().statsRequest().send().wait(rpc.getWaitScope());
    const rpc::Stats::Reader s = reply.getStats();
    return Counts{s.getPasses(), s.getQueuedKeys(), s.getConnections()};
  };
  {
    capnp::EzRpcClient rpc("127.0.0.1", port);
    auto cap = rpc.getMain<rpc::PirServer>();
    std::vector<kj::Promise<void>> calls;
    for (int c = 0; c < 4; ++c) {
      auto request = cap.answerRequest();
      auto list = request.initKeys(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
      }
      calls.push_back(request.send().ignoreResult());
    }
    // Answered after the four calls were read: they are queued or running.
    auto queued = cap.statsRequest().send().wait(rpc.getWaitScope());
    ASSERT_GE(queued.getStats().getQueuedKeys() + 1024 * queued.getStats().getPasses(), 3 * 1024u);
  }
  for (int i = 0; i < 300; ++i) {
    const Counts now = stats();
    if (now.queued_keys == 0 && now.connections <= 1) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Seconds(1));  // a pass still running ends (~0.2 s each here)
  const Counts after = stats();
  EXPECT_EQ(after.queued_keys, 0u);
  EXPECT_LE(after.passes, 2u) << "the calls queued when their client went were computed";
}

TEST_F(ServerRpcTest, SigtermStopsCleanly) {
  EXPECT_TRUE(servers_.server[0]->Stop().ok());
  EXPECT_TRUE(servers_.server[1]->Stop().ok());
}

TEST(ServerStartTest, BadOptionsFailWithAMessage) {
  tools::ServerProcessOptions options;
  options.binary = VEIL_SERVER_BINARY;
  options.party = 0;
  options.table_path = testing::TempPath("missing.veil");
  EXPECT_FALSE(tools::ServerProcess::Start(options).ok());
  auto path = testing::WriteRandomTable("ok.veil", embedding::RowFormat::kFp32, 10, 4, 1);
  ASSERT_TRUE(path.ok());
  options.table_path = *path;
  options.backend = "tpu";
  EXPECT_FALSE(tools::ServerProcess::Start(options).ok());
  options.backend = "cpu";
  options.party = 2;
  EXPECT_FALSE(tools::ServerProcess::Start(options).ok());
}

}  // namespace
}  // namespace veil
