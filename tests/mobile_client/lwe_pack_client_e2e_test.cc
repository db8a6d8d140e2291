// veil::client::LweClient speaking lwe-exppack-s to a real server process on loopback: lookups of
// a tagged table decrypt to the rows bit for bit (first, last, repeated), the bytes on the wire
// follow the formulas (keys once per connection, a query and its ciphertext up, the packed
// response down), every connection uploads its own keys (a replica, a restarted server), the C ABI
// looks rows up the same way, and a server whose config disagrees with what the client recomputes
// is refused before any key or query is sent.
#include <capnp/ez-rpc.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/lwe_client.h"
#include "mobile_client/veil.h"
#include "rpc/veil.capnp.h"
#include "tests/mobile_client/evicting_proxy.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::LweClient;
using client::LweClientOptions;
using ::testing::HasSubstr;

// 4,001 int8 rows of dim 21 with tags: an odd record size.
constexpr uint64_t kRows = 4001;
constexpr uint32_t kDim = 21;
// Cap'n Proto framing around a call's data, each way (generous).
constexpr uint64_t kFraming = 512;

std::vector<uint32_t> PlainWords(const embedding::Table& table,
                                 const std::vector<uint64_t>& indices) {
  const uint32_t data = table.row_words() - embedding::TagWords(table.row_tag());
  std::vector<uint32_t> words;
  for (uint64_t r : indices) {
    absl::Span<const uint32_t> row = table.row(r);
    words.insert(words.end(), row.begin(), row.begin() + data);
  }
  return words;
}

class LwePackClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = testing::WriteRandomTable("lwe_pack.veil", embedding::RowFormat::kInt8RowWise,
                                          kRows, kDim, 21, 1, &Key());
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = table->release();
    table_path_ = new std::string(*path);
    key_file_ = new std::string(testing::TempPath("lwe_pack.rowkey"));
    ASSERT_TRUE(embedding::WriteRowKeyFile(*key_file_, Key()).ok());
    auto server = testing::StartLweServer(*path, "lwe-exppack-s");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete table_;
    delete table_path_;
    delete key_file_;
  }
  static const embedding::RowKey& Key() {
    static const embedding::RowKey key = embedding::NewRowKey();
    return key;
  }

  LweClientOptions Options() const {
    LweClientOptions o;
    o.server = server_->address();
    o.protocol = "lwe-exppack-s";
    o.row_key_file = *key_file_;
    return o;
  }

  // A C ABI client of the server (nullptr on failure: veil_last_error says why).
  static veil_lwe_client* ConnectCAbi() {
    veil_lwe_client_options options;
    std::memset(&options, 0, sizeof(options));
    options.struct_size = sizeof(options);
    const std::string address = server_->address();
    options.server = address.c_str();
    options.protocol = "lwe-exppack-s";
    options.row_key_file = key_file_->c_str();
    veil_lwe_client* c = nullptr;
    return veil_lwe_client_connect(&options, &c) == VEIL_OK ? c : nullptr;
  }

  static embedding::Table* table_;
  static std::string* table_path_;
  static std::string* key_file_;
  static tools::ServerProcess* server_;
};

embedding::Table* LwePackClientTest::table_ = nullptr;
std::string* LwePackClientTest::table_path_ = nullptr;
std::string* LwePackClientTest::key_file_ = nullptr;
tools::ServerProcess* LwePackClientTest::server_ = nullptr;

TEST_F(LwePackClientTest, LookupsDecryptToTheRowsWithTheBytesOfTheFormulas) {
  auto client = LweClient::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  const client::LweTableInfo& t = (*client)->table();
  EXPECT_EQ(t.protocol, "lwe-exppack-s");
  EXPECT_EQ(t.rows, kRows);
  EXPECT_EQ(t.hint_bytes, 0u);
  EXPECT_EQ(t.key_bytes, 3516676u);
  EXPECT_EQ(t.query_bytes, 4 * t.d0 + 49184);
  EXPECT_EQ(t.answer_bytes, (t.d1 + 4095) / 4096 * 32768);
  EXPECT_EQ((*client)->key_uploads(), 1u);
  // Connect: hello, config and the keys once.
  const client::CallStats connect = (*client)->totals();
  EXPECT_GE(connect.bytes_up, t.key_bytes);
  EXPECT_LE(connect.bytes_up, t.key_bytes + 4 * kFraming);

  const std::vector<uint64_t> rows = {0, kRows - 1, 1234, 0};
  auto words = (*client)->LookupWords(rows);
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, rows));
  const client::CallStats s = (*client)->last_call();
  EXPECT_EQ(s.lookups, rows.size());
  EXPECT_EQ(s.calls, rows.size());  // one query per call
  EXPECT_GE(s.bytes_up, rows.size() * t.query_bytes);
  EXPECT_LE(s.bytes_up, rows.size() * (t.query_bytes + kFraming));
  EXPECT_GE(s.bytes_down, rows.size() * t.answer_bytes);
  EXPECT_LE(s.bytes_down, rows.size() * (t.answer_bytes + kFraming));
  EXPECT_EQ((*client)->key_uploads(), 1u);  // not again for later lookups

  auto values = (*client)->Lookup({kRows - 1});
  ASSERT_TRUE(values.ok()) << values.status();
  std::vector<float> expected(kDim);
  ASSERT_TRUE(embedding::DecodeRow(table_->format(), table_->frac_bits(), kDim,
                                   PlainWords(*table_, {kRows - 1}), absl::MakeSpan(expected))
                  .ok());
  EXPECT_EQ(*values, expected);

  // Another client is another connection and session: it uploads its own keys.
  auto second = LweClient::Connect(Options());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->key_uploads(), 1u);
  EXPECT_GE((*second)->totals().bytes_up, t.key_bytes);
  words = (*second)->LookupWords({2000});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {2000}));
}

TEST_F(LwePackClientTest, TheCAbiLooksRowsUp) {
  veil_lwe_client* c = ConnectCAbi();
  ASSERT_NE(c, nullptr) << veil_last_error();
  veil_lwe_table_info info;
  ASSERT_EQ(veil_lwe_client_table_info(c, &info), VEIL_OK);
  EXPECT_EQ(info.rows, kRows);
  EXPECT_EQ(info.hint_bytes, 0u);
  const uint64_t indices[] = {kRows - 1, 0};
  std::vector<uint32_t> words(2 * info.row_words);
  ASSERT_EQ(veil_lwe_lookup_words(c, indices, 2, words.data(), words.size()), VEIL_OK)
      << veil_last_error();
  EXPECT_EQ(words, PlainWords(*table_, {kRows - 1, 0}));
  veil_lwe_client_close(c);
}

TEST_F(LwePackClientTest, PreparedQueriesServeTheNextLookups) {
  auto client = LweClient::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PrepareQueries(3).ok());
  EXPECT_EQ((*client)->prepared_queries(), 3u);
  auto words = (*client)->LookupWords({5, kRows - 2});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {5, kRows - 2}));
  EXPECT_EQ((*client)->last_times().prepared, 2u);
  EXPECT_EQ((*client)->prepared_queries(), 1u);
  // One prepared left: the second row's query is made whole.
  words = (*client)->LookupWords({9, 10});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {9, 10}));
  EXPECT_EQ((*client)->last_times().prepared, 1u);
  EXPECT_EQ((*client)->prepared_queries(), 0u);

  // Bounded: 64 MiB of queries at most.
  const uint64_t max = LweClient::kMaxPreparedBytes / (*client)->table().query_bytes;
  auto refused = (*client)->PrepareQueries(static_cast<uint32_t>(max + 1));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ((*client)->prepared_queries(), 0u);

  // Through the C ABI, while lookups go on.
  veil_lwe_client* c = ConnectCAbi();
  ASSERT_NE(c, nullptr) << veil_last_error();
  uint64_t held = 0;
  ASSERT_EQ(veil_lwe_prepare_queries(c, 2, &held), VEIL_OK) << veil_last_error();
  EXPECT_EQ(held, 2u);
  const uint64_t indices[] = {kRows - 1};
  std::vector<uint32_t> row(table_->row_words() - embedding::TagWords(table_->row_tag()));
  ASSERT_EQ(veil_lwe_lookup_words(c, indices, 1, row.data(), row.size()), VEIL_OK)
      << veil_last_error();
  EXPECT_EQ(row, PlainWords(*table_, {kRows - 1}));
  ASSERT_EQ(veil_lwe_prepare_queries(c, 0, &held), VEIL_OK);
  EXPECT_EQ(held, 1u);
  veil_lwe_client_close(c);
}

TEST_F(LwePackClientTest, AConnectionClosedWhileIdleResumesItsKeysInsteadOfSendingThem) {
  // The server closes connections idle for a second (a phone between lookups); the client's next
  // lookup reconnects (it does not fail) and presents the keys' resume token: a few dozen bytes
  // up, not 3.5 MB.
  // With --key_resume_s=0 the keys go with the connection and are sent again.
  for (const bool resume : {true, false}) {
    SCOPED_TRACE(resume ? "resume" : "no resume");
    auto server = testing::StartLweServer(
        *table_path_, "lwe-exppack-s",
        {"--idle_timeout_s=1", absl::StrCat("--key_resume_s=", resume ? 3600 : 0)});
    ASSERT_TRUE(server.ok()) << server.status();
    LweClientOptions o = Options();
    o.server = (*server)->address();
    auto client = LweClient::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->LookupWords({5}).ok());
    absl::SleepFor(absl::Milliseconds(2500));  // past the idle timeout: the server closed it
    // The call finds the connection closed and sends itself again on a new one.
    auto words = (*client)->LookupWords({kRows - 3, 5});
    ASSERT_TRUE(words.ok()) << words.status();
    EXPECT_EQ(*words, PlainWords(*table_, {kRows - 3, 5}));
    EXPECT_EQ((*client)->key_uploads(), resume ? 1u : 2u);
    EXPECT_EQ((*client)->key_resumes(), resume ? 1u : 0u);
    if (resume) {
      EXPECT_LT((*client)->last_call().bytes_up, (*client)->table().key_bytes / 10);
    } else {
      EXPECT_GE((*client)->last_call().bytes_up, (*client)->table().key_bytes);
    }
  }
}

TEST_F(LwePackClientTest, ARestartedReplicaIsSentTheKeysBeforeItsFirstQuery) {
  // Two replicas of the same table, "first,second": the keys go to the replica Connect uses.
  // Both stop and the second's address serves again (a new process): its new connection is sent
  // the keys before its first query.
  auto first = testing::StartLweServer(*table_path_, "lwe-exppack-s");
  auto second = testing::StartLweServer(*table_path_, "lwe-exppack-s");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  LweClientOptions o = Options();
  o.server = absl::StrCat((*first)->address(), ",", (*second)->address());
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->key_uploads(), 1u);
  auto words = (*client)->LookupWords({17});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {17}));
  const uint64_t uploads = (*client)->key_uploads();
  ASSERT_TRUE((*first)->Stop().ok());
  ASSERT_TRUE((*second)->Stop().ok());
  auto again = testing::StartLweServer(*table_path_, "lwe-exppack-s",
                                       {absl::StrCat("--listen=", (*second)->address())});
  ASSERT_TRUE(again.ok()) << again.status();
  // The call finds both connections lost and goes again on new ones: the first replica refuses,
  // the second's new process takes the keys (it holds none to resume) and answers.
  words = (*client)->LookupWords({kRows - 2, 3});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {kRows - 2, 3}));
  EXPECT_EQ((*client)->key_uploads(), uploads + 1);  // the restarted replica's new connection
}

// Serves `config` (an LwePackConfig message) and hello "lwe-exppack-s"; every other call is
// unimplemented.
class ConfigOnly final : public rpc::LwePackServer::Server {
 public:
  explicit ConfigOnly(kj::Array<capnp::word> config) : config_(kj::mv(config)) {}

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, "lwe-exppack-s");
  }
  kj::Promise<void> config(ConfigContext context) override {
    capnp::FlatArrayMessageReader reader(config_);
    context.getResults().setConfig(reader.getRoot<rpc::LwePackConfig>());
    return kj::READY_NOW;
  }

 private:
  kj::Array<capnp::word> config_;
};

TEST_F(LwePackClientTest, AConfigThatDisagreesWithTheClientsIsRefused) {
  capnp::EzRpcClient rpc("127.0.0.1", server_->port());
  auto reply = rpc.getMain<rpc::LwePackServer>().configRequest().send().wait(rpc.getWaitScope());
  // The real config with one figure changed, each refused with a message naming it.
  const auto refused = [&](const std::function<void(rpc::LwePackConfig::Builder)>& tamper,
                           const std::string& why) {
    capnp::MallocMessageBuilder message;
    message.setRoot(reply.getConfig());
    tamper(message.getRoot<rpc::LwePackConfig>());
    auto flat = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(message));
    testing::StandInServer stand_in([flat] {
      return capnp::Capability::Client(
          kj::heap<ConfigOnly>(kj::heapArray<capnp::word>(flat->asPtr())));
    });
    LweClientOptions o = Options();
    o.server = stand_in.address();
    auto client = LweClient::Connect(o);
    ASSERT_FALSE(client.ok()) << why;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
    EXPECT_THAT(client.status().message(), HasSubstr(why));
  };
  refused([](auto c) { c.setSpecialPrime(c.getSpecialPrime() + 2 * 4096); },
          "ring parameters (N = 2^12");
  refused([](auto c) { c.getPrimes().set(1, 536870909); }, "ring parameters");
  refused([](auto c) { c.setLogN(13); }, "ring parameters (N = 2^13");
  refused([](auto c) { c.setResponseBytes(c.getResponseBytes() + 1); }, "responses of");
  refused([](auto c) { c.setExpansionKeyBytes(1); }, "expansion keys of 1 bytes");
  refused([](auto c) { c.getLwe().setD0(c.getLwe().getD0() + 1); }, "the table's shape is");
  refused([](auto c) { c.getLwe().getSeed()[0] ^= 1; }, "seed");
  refused([](auto c) { c.getLwe().setLweProtocol(2); }, "LWE parameters (protocol 2");
  // Chunks of a byte would be 3.5 million upload calls.
  refused([](auto c) { c.setMaxChunkBytes(1); }, "keys in chunks of 1 bytes");
}

TEST_F(LwePackClientTest, AKeyUploadAfterAnEvictionEndsWithinTheLookupsTimeout) {
  // The answer comes after 1.4 s of the 2 s timeout: keys evicted. Before, the upload that
  // follows had a timeout of its own, and the lookup took 3.4 s; now it ends with the lookup's.
  auto armed = std::make_shared<std::atomic<bool>>(false);
  const std::string real = server_->address();
  testing::StandInServer proxy([real, armed] {
    return capnp::Capability::Client(kj::heap<testing::EvictingProxy<rpc::LwePackServer>>(
        real, armed, 1400 * kj::MILLISECONDS, [](auto from, auto to) {
          to.setQuery(from.getQuery());
          to.setCiphertext(from.getCiphertext());
          to.setSelection(from.getSelection());
        }));
  });
  LweClientOptions o = Options();
  o.server = proxy.address();
  o.timeout = absl::Seconds(2);
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto words = (*client)->LookupWords({5});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(*table_, {5})) << "through the proxy, before it turns";
  armed->store(true);
  const absl::Time start = absl::Now();
  words = (*client)->LookupWords({6});
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(words.status().code(), absl::StatusCode::kDeadlineExceeded) << words.status();
  EXPECT_GE(took, absl::Milliseconds(1400));
  EXPECT_LT(took, o.timeout + absl::Milliseconds(600));
}

}  // namespace
}  // namespace veil
