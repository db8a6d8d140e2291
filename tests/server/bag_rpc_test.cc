// A real bfv-bag server spoken to at the RPC level with hostile calls: queries before keys, key
// uploads that are truncated, out of order, oversized, of other parameters or other rotations,
// malformed queries, too many queries in flight. Each gets an error reply naming the problem,
// while a well-behaved BagClient on another thread keeps getting exact pooled sums.
#include <capnp/ez-rpc.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/bag_client.h"
#include "pir/he/bag.h"
#include "pir/he/serialization.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRows = 300;
constexpr uint32_t kDim = 8;
constexpr uint64_t kMaxMessage = 256 * 1024;

// One connection to the server, spoken to call by call.
class RawSession {
 public:
  explicit RawSession(int port) : rpc_("127.0.0.1", port), cap_(rpc_.getMain<rpc::BagServer>()) {}

  capnp::Response<rpc::BagServer::ConfigResults> Config() {
    return cap_.configRequest().send().wait(rpc_.getWaitScope());
  }

  // One uploadGaloisKeys call; returns whether the keys were installed.
  absl::StatusOr<bool> Chunk(uint64_t offset, absl::Span<const uint8_t> chunk) {
    auto request = cap_.uploadGaloisKeysRequest();
    request.setOffset(offset);
    request.setChunk(capnp::Data::Reader(chunk.data(), chunk.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      EXPECT_EQ(reply.getReceivedBytes(), offset + chunk.size());
      return reply.getInstalled();
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

  // The whole key upload in chunks of `chunk` bytes: the status of the first failing call.
  absl::Status Upload(const std::vector<uint8_t>& keys, size_t chunk) {
    for (size_t offset = 0; offset < keys.size(); offset += chunk) {
      auto installed = Chunk(offset, absl::MakeConstSpan(keys).subspan(offset, chunk));
      if (!installed.ok()) return installed.status();
      EXPECT_EQ(*installed, offset + chunk >= keys.size());
    }
    return absl::OkStatus();
  }

  kj::Promise<capnp::Response<rpc::BagServer::AnswerResults>> SendAnswer(
      const std::vector<uint8_t>& query) {
    auto request = cap_.answerRequest();
    request.setQuery(capnp::Data::Reader(query.data(), query.size()));
    return request.send();
  }

  absl::StatusOr<std::vector<uint8_t>> Answer(const std::vector<uint8_t>& query) {
    return Wait(SendAnswer(query));
  }

  absl::StatusOr<std::vector<uint8_t>> Wait(
      kj::Promise<capnp::Response<rpc::BagServer::AnswerResults>> promise) {
    try {
      auto reply = promise.wait(rpc_.getWaitScope());
      return std::vector<uint8_t>(reply.getAnswer().begin(), reply.getAnswer().end());
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

 private:
  capnp::EzRpcClient rpc_;
  rpc::BagServer::Client cap_;
};

class BagRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path =
        testing::WriteRandomTable("bag_rpc.veil", embedding::RowFormat::kFixed32, kRows, kDim, 3);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
    auto server = testing::StartBagServer(*path, {absl::StrCat("--max_message_bytes=", kMaxMessage),
                                                  "--max_queued_ciphertexts_per_connection=1"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ctx_ = *he::BfvContext::Create(*he::BagParams(13));
  }

  // A client's side of a session for the server's table (from its config).
  std::unique_ptr<he::BagClient> HeClient() {
    RawSession session(server_->port());
    auto config = session.Config();
    auto info = he::ParseBagTableInfo(absl::MakeConstSpan(
        config.getConfig().getTableInfo().begin(), config.getConfig().getTableInfo().size()));
    EXPECT_TRUE(info.ok()) << info.status();
    return *he::BagClient::Create(ctx_, *info);
  }

  std::vector<int64_t> PlainSum(const std::vector<uint64_t>& rows,
                                const std::vector<int64_t>& weights) const {
    std::vector<int64_t> sum(kDim, 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (uint32_t j = 0; j < kDim; ++j) {
        sum[j] += weights[i] * static_cast<int32_t>(table_->row(rows[i])[j]);
      }
    }
    return sum;
  }

  std::unique_ptr<embedding::Table> table_;
  std::unique_ptr<tools::ServerProcess> server_;
  std::shared_ptr<const he::BfvContext> ctx_;
};

TEST_F(BagRpcTest, ConfigDescribesTheTableParametersAndLimits) {
  capnp::EzRpcClient rpc("127.0.0.1", server_->port());
  auto hello = rpc.getMain<rpc::VeilServer>().helloRequest().send().wait(rpc.getWaitScope());
  EXPECT_EQ(std::string(hello.getHello().getProtocol().cStr()), "bfv-bag");
  RawSession session(server_->port());
  auto reply = session.Config();
  rpc::BagConfig::Reader c = reply.getConfig();
  EXPECT_EQ(c.getRows(), kRows);
  EXPECT_EQ(c.getDim(), kDim);
  EXPECT_EQ(c.getFracBits(), 16);
  EXPECT_EQ(c.getLogN(), 13);
  auto digest = table_->digest();
  EXPECT_EQ(kj::arrayPtr(digest.data(), digest.size()), c.getTable().getDigest());
  auto info =
      he::ParseBagTableInfo(absl::MakeConstSpan(c.getTableInfo().begin(), c.getTableInfo().size()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->params_id, ctx_->id());
  EXPECT_EQ(info->rows, kRows);
  EXPECT_EQ(info->dim, kDim);
  EXPECT_GT(info->max_abs, 0u);
  const he::BagSizes sizes = he::SizesOf(*ctx_, *he::MatVecPlan::Create(*ctx_, kDim, kRows));
  EXPECT_EQ(c.getQueryBlocks(), 1u);
  EXPECT_EQ(c.getGaloisKeyBytes(), sizes.galois_key_bytes);
  EXPECT_EQ(c.getMaxChunkBytes(), kMaxMessage - 1024);
  EXPECT_EQ(c.getLimits().getMaxMessageBytes(), kMaxMessage);
  EXPECT_EQ(c.getLimits().getMaxQueuedCiphertextsPerConnection(), 1u);
  EXPECT_EQ(c.getLimits().getMaxGaloisKeyBytes(), uint64_t{2} << 30);
}

TEST_F(BagRpcTest, HostileCallsGetClearErrorsWhileAGoodClientKeepsWorking) {
  std::atomic<bool> stop{false};
  std::atomic<int> good_lookups{0}, good_failures{0};
  std::thread good([&] {
    client::BagClientOptions options;
    options.server = server_->address();
    auto client = client::BagClient::Connect(options);
    if (!client.ok()) {
      ADD_FAILURE() << client.status();
      ++good_failures;
      return;
    }
    uint64_t row = 1;
    while (!stop.load()) {
      row = (row * 31 + 7) % kRows;
      const std::vector<uint64_t> rows = {row, kRows - 1};
      const std::vector<int64_t> weights = {3, -1};
      auto sums = (*client)->LookupPooledSums(rows, std::vector<uint32_t>{2}, weights);
      if (!sums.ok() || *sums != PlainSum(rows, weights)) ++good_failures;
      ++good_lookups;
    }
  });

  const std::unique_ptr<he::BagClient> he_client = HeClient();
  const std::vector<uint8_t> keys = *he::SerializeGaloisKeys(*ctx_, *he_client->MakeGaloisKeys());
  const size_t chunk = kMaxMessage - 1024;
  const std::vector<uint64_t> rows = {5, 17, 5 + 200};
  const std::vector<int64_t> weights = {2, 1, -7};
  const std::vector<uint8_t> query =
      *he::SerializeBagQuery(*ctx_, *he_client->Query(rows, weights));

  RawSession h(server_->port());
  // Queries before keys, chunks out of order, a truncated upload, an oversized call.
  absl::Status s = h.Answer(query).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("no Galois keys on this connection"));
  s = h.Chunk(5, absl::MakeConstSpan(keys).subspan(5, 10)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("without an upload in progress"));
  ASSERT_TRUE(h.Chunk(0, absl::MakeConstSpan(keys).first(100)).ok());
  s = h.Chunk(150, absl::MakeConstSpan(keys).subspan(150, 10)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("Galois key chunk at offset 150; the next one starts at 100"));
  s = h.Answer(query).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("not installed yet (100 of ", keys.size())));
  s = h.Chunk(100, absl::MakeConstSpan(keys).subspan(100, kMaxMessage)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("the limit is ", kMaxMessage, " bytes")));

  // Whole uploads of bad keys: each is refused when its last chunk arrives, naming the problem.
  auto refused = [&](std::vector<uint8_t> bad, const std::string& why) {
    const absl::Status status = h.Upload(bad, chunk);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(why));
    EXPECT_THAT(h.Answer(query).status().message(), HasSubstr("no Galois keys"));
  };
  refused(std::vector<uint8_t>(keys.size(), 0x56), "Galois keys: ");
  std::vector<uint8_t> bad = keys;
  bad[5] ^= 1;  // the parameter id
  refused(bad, "belongs to parameters");
  bad = keys;
  const uint32_t first_element = bad[16] | bad[17] << 8;
  ASSERT_GT(first_element, 1u);
  bad[16] = 1;  // element 1 (the identity) instead of the table's first rotation
  bad[17] = 0;
  refused(bad, "this table's product rotates by elements {");
  bad = keys;
  for (size_t i = 52; i < 60; ++i) bad[i] = 0xff;  // the first residues of the first key's b_0
  refused(bad, "Galois keys: ");

  // The good keys; then bad queries.
  ASSERT_TRUE(h.Upload(keys, chunk).ok());
  s = h.Answer({1, 2, 3}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("query: not a version 1 bag query"));
  s = h.Answer(std::vector<uint8_t>(query.begin(), query.end() - 1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("query: truncated bag query"));
  std::vector<uint8_t> foreign = query;
  foreign[16] ^= 1;  // the ciphertext's parameter id
  s = h.Answer(foreign).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("query: "));
  EXPECT_THAT(s.message(), HasSubstr("belongs to parameters"));
  // Two queries at once on a connection allowed one ciphertext in flight.
  auto first = h.SendAnswer(query);
  auto second = h.SendAnswer(query);
  s = h.Wait(kj::mv(second)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("already has 1 query ciphertexts waiting"));
  auto answer = h.Wait(kj::mv(first));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(*he_client->Decode(*he::ParseCompressedCiphertext(*ctx_, *answer)), PlainSum(rows, weights));

  absl::SleepFor(absl::Milliseconds(300));
  stop = true;
  good.join();
  EXPECT_EQ(good_failures.load(), 0);
  EXPECT_GT(good_lookups.load(), 0);
}

}  // namespace
}  // namespace veil
