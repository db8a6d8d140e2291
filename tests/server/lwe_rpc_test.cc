// A real lwe-simple / lwe-double server spoken to at the RPC level with hostile calls: queries of
// the wrong size (another protocol's, a partial one, none), too many per call, a stale hint digest,
// hint chunks out of range. Each gets an error reply naming the problem, to that caller only,
// while a well-behaved LweClient on another thread keeps getting its rows bit for bit.
#include <capnp/ez-rpc.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/lwe_client.h"
#include "pir/lattice/client.h"
#include "pir/lattice/server.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRows = 120;
constexpr uint32_t kDim = 8;

// One connection to the server, spoken to call by call.
class RawSession {
 public:
  explicit RawSession(int port) : rpc_("127.0.0.1", port), cap_(rpc_.getMain<rpc::LweServer>()) {}

  capnp::Response<rpc::LweServer::ConfigResults> Config() {
    return cap_.configRequest().send().wait(rpc_.getWaitScope());
  }

  absl::StatusOr<std::vector<uint8_t>> Hint(uint64_t chunk, absl::Span<const uint8_t> digest) {
    auto request = cap_.hintRequest();
    request.setChunk(chunk);
    request.setHintDigest(capnp::Data::Reader(digest.data(), digest.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      return std::vector<uint8_t>(reply.getData().begin(), reply.getData().end());
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

  absl::StatusOr<std::vector<uint32_t>> Answer(absl::Span<const uint32_t> queries,
                                               absl::Span<const uint8_t> digest) {
    auto request = cap_.answerRequest();
    request.setQueries(
        capnp::Data::Reader(reinterpret_cast<const uint8_t*>(queries.data()), 4 * queries.size()));
    request.setHintDigest(capnp::Data::Reader(digest.data(), digest.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      capnp::Data::Reader data = reply.getAnswers();
      std::vector<uint32_t> answers(data.size() / 4);
      std::memcpy(answers.data(), data.begin(), data.size());
      return answers;
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

 private:
  capnp::EzRpcClient rpc_;
  rpc::LweServer::Client cap_;
};

class LweRpcTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable(absl::StrCat("lwe_rpc_", GetParam(), ".veil"),
                                          embedding::RowFormat::kFp32, kRows, kDim, 9);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
    auto server = testing::StartLweServer(*path, GetParam(), {"--max_keys_per_call=4"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<embedding::Table> table_;
  std::unique_ptr<tools::ServerProcess> server_;
};

TEST_P(LweRpcTest, ConfigDescribesTheTableAndTheProtocol) {
  capnp::EzRpcClient rpc("127.0.0.1", server_->port());
  auto hello = rpc.getMain<rpc::VeilServer>().helloRequest().send().wait(rpc.getWaitScope());
  EXPECT_EQ(std::string(hello.getHello().getProtocol().cStr()), GetParam());
  RawSession session(server_->port());
  auto reply = session.Config();
  rpc::LweConfig::Reader c = reply.getConfig();
  const auto protocol = *lattice::ParseProtocol(GetParam());
  auto server = lattice::LweServer::FromTable(*table_, {.protocol = protocol});
  ASSERT_TRUE(server.ok()) << server.status();
  const lattice::LweConfig& expected = (*server)->config();
  EXPECT_EQ(c.getRows(), kRows);
  EXPECT_EQ(c.getRowWords(), kDim);
  EXPECT_EQ(c.getLweProtocol(), static_cast<uint8_t>(protocol));
  EXPECT_EQ(c.getLweDimension(), 1024u);
  EXPECT_EQ(c.getLogModulus(), 32u);
  EXPECT_EQ(c.getPlaintextModulus(), 256u);
  EXPECT_EQ(c.getD0(), expected.shape.d0);
  EXPECT_EQ(c.getD1(), expected.shape.d1);
  EXPECT_EQ(c.getQueryWords(), expected.shape.query_words());
  EXPECT_EQ(c.getAnswerWords(), expected.shape.answer_words());
  EXPECT_EQ(kj::arrayPtr(expected.seed.data(), 32), c.getSeed());
  EXPECT_EQ(kj::arrayPtr(expected.hint_digest.data(), 32), c.getHintDigest());
  EXPECT_EQ(c.getHintBytes(), expected.hint_bytes);
  EXPECT_EQ(c.getLimits().getMaxQueriesPerCall(), 4u);
}

TEST_P(LweRpcTest, HostileCallsGetClearErrorsWhileAGoodClientKeepsWorking) {
  std::atomic<bool> stop{false};
  std::atomic<int> good_lookups{0}, good_failures{0};
  std::thread good([&] {
    client::LweClientOptions options;
    options.server = server_->address();
    options.protocol = GetParam();
    auto client = client::LweClient::Connect(options);
    if (!client.ok()) {
      ADD_FAILURE() << client.status();
      ++good_failures;
      return;
    }
    uint64_t row = 1;
    while (!stop.load()) {
      row = (row * 31 + 7) % kRows;
      auto words = (*client)->LookupWords({row, kRows - 1});
      std::vector<uint32_t> expected(table_->row(row).begin(), table_->row(row).end());
      expected.insert(expected.end(), table_->row(kRows - 1).begin(), table_->row(kRows - 1).end());
      if (!words.ok() || *words != expected) {
        ADD_FAILURE() << words.status();
        ++good_failures;
      }
      ++good_lookups;
    }
  });

  RawSession h(server_->port());
  auto reply = h.Config();
  rpc::LweConfig::Reader c = reply.getConfig();
  const std::vector<uint8_t> digest(c.getHintDigest().begin(), c.getHintDigest().end());
  const uint64_t qw = c.getQueryWords(), aw = c.getAnswerWords();
  std::vector<uint8_t> stale = digest;
  stale[0] ^= 1;

  // Hint chunks: out of range, stale digest, a digest of the wrong length.
  auto chunk = h.Hint(c.getHintBytes() / c.getHintChunkBytes() + 1, digest);
  EXPECT_EQ(chunk.status().code(), absl::StatusCode::kOutOfRange) << chunk.status();
  EXPECT_THAT(chunk.status().message(), HasSubstr("is out of range"));
  chunk = h.Hint(0, stale);
  EXPECT_EQ(chunk.status().code(), absl::StatusCode::kFailedPrecondition) << chunk.status();
  EXPECT_THAT(chunk.status().message(), HasSubstr("stale hint"));
  EXPECT_EQ(h.Hint(0, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  chunk = h.Hint(0, digest);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(chunk->size(), std::min<uint64_t>(c.getHintBytes(), c.getHintChunkBytes()));

  // The hint twice over on one connection, then no more (replies wait in the server's memory
  // until read); another connection still gets it.
  const uint64_t chunks = (c.getHintBytes() + c.getHintChunkBytes() - 1) / c.getHintChunkBytes();
  {
    RawSession greedy(server_->port());
    for (uint64_t i = 0; i < 2 * chunks; ++i) {
      ASSERT_TRUE(greedy.Hint(i % chunks, digest).ok()) << i;
    }
    auto refused = greedy.Hint(0, digest);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("reconnect to download it again"));
  }

  // Queries: none, a partial one, one word too many, another protocol's size, too many per
  // call, a stale hint digest.
  const std::vector<uint32_t> one(qw, 12345);
  for (size_t words : {size_t{0}, size_t{qw - 1}, size_t{qw + 1}, size_t{3 * qw / 2}}) {
    auto answer = h.Answer(std::vector<uint32_t>(words, 7), digest);
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument) << words;
    EXPECT_THAT(
        answer.status().message(),
        HasSubstr(absl::StrCat("a query of this table (", GetParam(), ") is ", 4 * qw, " bytes")));
  }
  auto answer = h.Answer(std::vector<uint32_t>(5 * qw, 7), digest);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(answer.status().message(), HasSubstr("5 queries in one call; the limit is 4"));
  answer = h.Answer(one, stale);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(answer.status().message(), HasSubstr("stale hint"));

  // The same connection still gets answers of the right size (garbage in, garbage out: the
  // server cannot tell a query from noise).
  answer = h.Answer(one, digest);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->size(), aw);

  while (good_lookups.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  good.join();
  EXPECT_EQ(good_failures.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Protocols, LweRpcTest, ::testing::Values("lwe-simple", "lwe-double"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "lwe-simple" ? "Simple" : "Double";
                         });

// A server whose limits no query or answer could meet refuses to start, saying what to raise.
TEST(LweServerStart, LimitsThatNoAnswerFitsAreRefused) {
  auto path =
      testing::WriteRandomTable("lwe_big_rows.veil", embedding::RowFormat::kFp32, 10, 64, 1);
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string log = testing::TempPath("lwe_refused.log");
  auto server = testing::StartLweServer(*path, "lwe-double", {"--max_message_bytes=65536"}, log);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("--max_message_bytes must be at least"));
}

}  // namespace
}  // namespace veil
