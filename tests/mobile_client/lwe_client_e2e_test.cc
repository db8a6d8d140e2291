// veil::client::LweClient against real lwe-simple / lwe-double server processes on loopback:
// every lookup decrypts to the table's row bit for bit (row formats, tagged and untagged rows,
// awkward row counts, lookups split across calls and waves), a wrong row key is DATA_LOSS and
// never a wrong row, the hint cache is used and a corrupted cache entry is fetched again, a
// client never talks to a server of another protocol, and a restarted server is reconnected to
// (the same table and hint only; the server reads its hint file back).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/lwe_client.h"
#include "pir/lattice/hint.h"
#include "pir/lattice/params.h"
#include "pir/lattice/shape.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::LweClient;
using client::LweClientOptions;
using ::testing::HasSubstr;

// The table's rows `indices`, data words only (tags excluded).
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

struct Case {
  std::string protocol;
  embedding::RowFormat format;
  uint64_t rows;
  uint32_t dim;
  bool tagged;
};

class LweLookupTest : public ::testing::TestWithParam<Case> {};

TEST_P(LweLookupTest, EveryLookupDecryptsToTheRow) {
  const Case& c = GetParam();
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string name = absl::StrCat("lwe_", c.protocol, "_", c.rows, "_", c.dim, ".veil");
  auto path =
      testing::WriteRandomTable(name, c.format, c.rows, c.dim, 5, 1, c.tagged ? &key : nullptr);
  ASSERT_TRUE(path.ok()) << path.status();
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok()) << table.status();
  auto server = testing::StartLweServer(*path, c.protocol, {"--max_keys_per_call=8"});
  ASSERT_TRUE(server.ok()) << server.status();
  LweClientOptions o;
  o.server = (*server)->address();
  o.protocol = c.protocol;
  if (c.tagged) {
    o.row_key_file = testing::TempPath(name + ".rowkey");
    ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, key).ok());
  }
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().rows, c.rows);
  EXPECT_EQ((*client)->table().protocol, c.protocol);
  EXPECT_LE((*client)->table().log2_failure, -40);

  // Every row, then random rows with repeats: more than one call (8 queries per call).
  std::vector<uint64_t> indices;
  for (uint64_t r = 0; r < c.rows; ++r) indices.push_back(r);
  std::mt19937_64 rng(c.rows);
  for (int i = 0; i < 19; ++i) indices.push_back(rng() % c.rows);
  auto words = (*client)->LookupWords(indices);
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, indices));
  EXPECT_EQ((*client)->last_call().lookups, indices.size());
  EXPECT_GE((*client)->last_call().calls, 3u);

  auto values = (*client)->Lookup({c.rows - 1});
  ASSERT_TRUE(values.ok()) << values.status();
  std::vector<float> expected(c.dim);
  ASSERT_TRUE(embedding::DecodeRow(c.format, (*table)->frac_bits(), c.dim,
                                   PlainWords(**table, {c.rows - 1}), absl::MakeSpan(expected))
                  .ok());
  EXPECT_EQ(*values, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Tables, LweLookupTest,
    ::testing::Values(Case{"lwe-simple", embedding::RowFormat::kInt8RowWise, 300, 16, true},
                      Case{"lwe-double", embedding::RowFormat::kInt8RowWise, 60, 16, true},
                      Case{"lwe-simple", embedding::RowFormat::kFp32, 1, 3, false},
                      Case{"lwe-double", embedding::RowFormat::kFp32, 17, 5, false},
                      Case{"lwe-simple", embedding::RowFormat::kFixed32, 2, 8, true},
                      Case{"lwe-simple", embedding::RowFormat::kFp16, 1000, 7, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat(info.param.protocol == "lwe-simple" ? "Simple" : "Double",
                          embedding::RowFormatName(info.param.format), info.param.rows, "Rows",
                          info.param.tagged ? "Tagged" : "");
    });

class LweClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("lwe.veil", embedding::RowFormat::kInt8RowWise, 200, 16,
                                          3, 1, &key_);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
    key_file_ = testing::TempPath("lwe.rowkey");
    ASSERT_TRUE(embedding::WriteRowKeyFile(key_file_, key_).ok());
    auto server = testing::StartLweServer(path_, "lwe-simple");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  LweClientOptions Options() const {
    LweClientOptions o;
    o.server = server_->address();
    o.row_key_file = key_file_;
    return o;
  }

  embedding::RowKey key_ = embedding::NewRowKey();
  std::string path_, key_file_;
  std::unique_ptr<tools::ServerProcess> server_;
};

TEST_F(LweClientTest, AWrongRowKeyIsDataLossNeverAWrongRow) {
  LweClientOptions o = Options();
  o.row_key_file = testing::TempPath("other.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, embedding::NewRowKey()).ok());
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto words = (*client)->LookupWords({7});
  EXPECT_EQ(words.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(words.status().message(), HasSubstr("row 7 fails its authentication tag"));
}

// With a failure latch the first failed row stops this client and every later one given the
// latch, the right key notwithstanding, until the file is removed.
TEST_F(LweClientTest, AFailedRowTripsTheLatch) {
  const std::string latch = testing::TempPath("lwe.latch");
  LweClientOptions o = Options();
  o.row_key_file = testing::TempPath("other.rowkey");
  o.failure_latch_file = latch;
  ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, embedding::NewRowKey()).ok());
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto words = (*client)->LookupWords({7});
  EXPECT_EQ(words.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(words.status().message(), HasSubstr("lookups stop until " + latch));
  EXPECT_TRUE(absl::IsFailedPrecondition((*client)->LookupWords({8}).status()));
  LweClientOptions right = Options();
  right.failure_latch_file = latch;
  auto refused = LweClient::Connect(right);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("row 7 fails its authentication tag"));
  ASSERT_EQ(std::remove(latch.c_str()), 0);
  auto served = LweClient::Connect(right);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_TRUE((*served)->LookupWords({8}).ok());
}

TEST_F(LweClientTest, PreparedQueriesServeTheNextLookups) {
  auto client = LweClient::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  auto table = embedding::Table::Load(path_, {});
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE((*client)->PrepareQueries(3).ok());
  EXPECT_EQ((*client)->prepared_queries(), 3u);
  // Two rows from prepared lookups, then one of them and two made whole in one wave.
  auto words = (*client)->LookupWords({0, 199});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, {0, 199}));
  EXPECT_EQ((*client)->last_times().prepared, 2u);
  words = (*client)->LookupWords({17, 18, 19});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, {17, 18, 19}));
  EXPECT_EQ((*client)->last_times().prepared, 1u);
  EXPECT_EQ((*client)->prepared_queries(), 0u);
  const uint64_t max = LweClient::kMaxPreparedBytes / (*client)->table().query_bytes;
  EXPECT_EQ((*client)->PrepareQueries(static_cast<uint32_t>(max + 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LweClientTest, ATaggedTableNeedsTheRowKey) {
  LweClientOptions o = Options();
  o.row_key_file.clear();
  auto client = LweClient::Connect(o);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(), HasSubstr("row_key_file"));
}

TEST(LweClientKeyTest, ARowKeyRefusesAnUntaggedTable) {
  // A server answering from another table could else switch the tag check off by serving it
  // untagged.
  auto path =
      testing::WriteRandomTable("untagged-lwe.veil", embedding::RowFormat::kFp32, 100, 8, 6);
  ASSERT_TRUE(path.ok()) << path.status();
  auto server = testing::StartLweServer(*path, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  LweClientOptions o;
  o.server = (*server)->address();
  o.row_key_file = testing::TempPath("untagged-lwe.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, embedding::NewRowKey()).ok());
  auto client = LweClient::Connect(o);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("carries no row authentication tags"));
  o.row_key_file.clear();
  auto keyless = LweClient::Connect(o);
  ASSERT_TRUE(keyless.ok()) << keyless.status();
  EXPECT_TRUE((*keyless)->Lookup({3}).ok());
}

TEST(LweClientKeyTest, AVersionOlderThanMinEpochIsRefused) {
  auto path = testing::WriteRandomTable("epoch-lwe.veil", embedding::RowFormat::kFp32, 100, 8, 6,
                                        /*epoch=*/5);
  ASSERT_TRUE(path.ok()) << path.status();
  auto server = testing::StartLweServer(*path, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  LweClientOptions o;
  o.server = (*server)->address();
  o.min_epoch = 6;
  auto refused = LweClient::Connect(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("table epoch 5, older than the oldest this client accepts (min_epoch 6)"));
  o.min_epoch = 5;
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().epoch, 5u);
  EXPECT_TRUE((*client)->Lookup({3}).ok());
}

TEST(LweClientKeyTest, AnOlderVersionRelabelledAsNewerFailsItsTags) {
  // The server passes epoch 5's rows off as epoch 6 to a client that accepts only 6 or newer: the
  // tags cover the epoch, so no row comes back.
  const embedding::RowKey key = embedding::NewRowKey();
  auto v5 = testing::WriteRandomTable("relabel-lwe.veil", embedding::RowFormat::kFp32, 100, 8, 7,
                                      /*epoch=*/5, &key);
  ASSERT_TRUE(v5.ok()) << v5.status();
  const std::string relabelled = testing::RewriteTable(*v5, "relabelled-lwe.veil", 6,
                                                       embedding::RowTag::kSipHash64Shape, nullptr);
  auto server = testing::StartLweServer(relabelled, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  LweClientOptions o;
  o.server = (*server)->address();
  o.row_key_file = testing::TempPath("relabel-lwe.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, key).ok());
  o.min_epoch = 6;
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto words = (*client)->LookupWords({42});
  EXPECT_EQ(words.status().code(), absl::StatusCode::kDataLoss) << words.status();
  EXPECT_THAT(words.status().message(), HasSubstr("row of the table's epoch 6"));

  // Tags that do not cover the epoch (an older veil table build) cannot back min_epoch.
  const std::string legacy =
      testing::RewriteTable(*v5, "legacy-lwe.veil", 5, embedding::RowTag::kSipHash64, &key);
  auto legacy_server = testing::StartLweServer(legacy, "lwe-simple");
  ASSERT_TRUE(legacy_server.ok()) << legacy_server.status();
  o.server = (*legacy_server)->address();
  o.min_epoch = 5;
  auto refused = LweClient::Connect(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("do not cover its epoch"));
  o.min_epoch = 0;
  auto reader = LweClient::Connect(o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto table = embedding::Table::Load(*v5, {});
  ASSERT_TRUE(table.ok());
  auto rows = (*reader)->LookupWords({42});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, PlainWords(**table, {42}));
}

TEST(LweClientKeyTest, RowsRelabelledToBeReadOtherwiseFailTheirTags) {
  // One server serves a fixed32 table's words and tags as they are, but says its values have 8
  // fractional bits instead of 16: every value would come back 256 times too large, its words and
  // tag intact. The tags cover how the words are read, so no value comes back.
  const embedding::RowKey key = embedding::NewRowKey();
  auto built = testing::WriteRandomTable("refrac.veil", embedding::RowFormat::kFixed32, 100, 4, 3,
                                         /*epoch=*/1, &key);
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string relabelled = testing::RewriteTable(
      *built, "refrac-8.veil", 1, embedding::RowTag::kSipHash64Shape, nullptr, /*frac_bits=*/8);
  auto server = testing::StartLweServer(relabelled, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  LweClientOptions o;
  o.server = (*server)->address();
  o.row_key_file = testing::TempPath("refrac.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(o.row_key_file, key).ok());
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().frac_bits, 8);
  auto values = (*client)->Lookup({7});
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDataLoss) << values.status();
  EXPECT_THAT(values.status().message(), HasSubstr("fails its authentication tag"));

  // Served as built, the same rows pass.
  auto honest = testing::StartLweServer(*built, "lwe-simple");
  ASSERT_TRUE(honest.ok()) << honest.status();
  o.server = (*honest)->address();
  auto reader = LweClient::Connect(o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto table = embedding::Table::Load(*built, {});
  ASSERT_TRUE(table.ok());
  std::vector<float> want(4);
  ASSERT_TRUE((*table)->DecodeRow(7, absl::MakeSpan(want)).ok());
  auto got = (*reader)->Lookup({7});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

TEST_F(LweClientTest, TheHintCacheIsUsedAndACorruptEntryIsFetchedAgain) {
  LweClientOptions o = Options();
  o.hint_cache_dir = testing::TempPath("hints");
  auto first = LweClient::Connect(o);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE((*first)->hint_from_cache());
  const std::string cached =
      (std::filesystem::path(o.hint_cache_dir) / ((*first)->table().hint_digest_hex + ".lwe-hint"))
          .string();
  EXPECT_EQ(std::filesystem::file_size(cached), (*first)->table().hint_bytes);

  auto second = LweClient::Connect(o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE((*second)->hint_from_cache());
  EXPECT_LT((*second)->totals().bytes_down, (*first)->table().hint_bytes / 2);

  {  // Same size, one byte changed: its digest no longer matches.
    std::fstream f(cached, std::ios::in | std::ios::out | std::ios::binary);
    // Flipped, not overwritten: a fixed byte would change nothing where the hint holds it.
    char byte = 0;
    f.seekg(300);
    f.get(byte);
    f.seekp(300);
    f.put(static_cast<char>(byte ^ 0x5a));
    ASSERT_TRUE(f.good());
  }
  auto third = LweClient::Connect(o);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE((*third)->hint_from_cache());
  auto table = embedding::Table::Open(path_);
  ASSERT_TRUE(table.ok());
  auto words = (*third)->LookupWords({0, 199});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, {0, 199}));
}

TEST_F(LweClientTest, AServerOfAnotherProtocolIsRefused) {
  LweClientOptions o = Options();
  o.protocol = "lwe-double";
  auto client = LweClient::Connect(o);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(), HasSubstr("speaks protocol"));
  o.protocol = "dpf2";
  EXPECT_EQ(LweClient::Connect(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LweClientTest, BadArgumentsAreRejectedLocally) {
  auto client = LweClient::Connect(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->LookupWords({}).status().code(), absl::StatusCode::kInvalidArgument);
  auto outside = (*client)->LookupWords({200});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.status().message(), HasSubstr("row 200 is outside the table (200 rows)"));
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(LweClientTest, ARestartedServerIsReconnectedToTheSameTableOnly) {
  // A server keeping its hint file (the fixture's computes it in memory).
  const std::string log1 = testing::TempPath("lwe_first.log");
  auto first = testing::StartLweServer(path_, "lwe-simple", {"--lwe_hint_cache=true"}, log1);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string listen = absl::StrCat("--listen=", (*first)->address());
  LweClientOptions o = Options();
  o.server = (*first)->address();
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto table = embedding::Table::Open(path_);
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE((*client)->LookupWords({4}).ok());
  ASSERT_TRUE((*first)->Stop().ok());
  EXPECT_THAT(ReadText(log1), HasSubstr("hint ready after"));

  // The same table on the same address: the hint is read back from its file, and the client
  // goes on with the hint it holds.
  const std::string log2 = testing::TempPath("lwe_second.log");
  auto second =
      testing::StartLweServer(path_, "lwe-simple", {"--lwe_hint_cache=true", listen}, log2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(ReadText(log2), HasSubstr("read from its file, current"));
  // The call finds the connection lost and goes again on a new one.
  auto words = (*client)->LookupWords({4, 150});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, {4, 150}));
  ASSERT_TRUE((*second)->Stop().ok());

  // Another table there: refused, never decoded with the old hint.
  auto other = testing::WriteRandomTable("lwe_other.veil", embedding::RowFormat::kInt8RowWise, 200,
                                         16, 4, 1, &key_);
  ASSERT_TRUE(other.ok()) << other.status();
  auto third = testing::StartLweServer(*other, "lwe-simple", {listen});
  ASSERT_TRUE(third.ok()) << third.status();
  auto refused = (*client)->LookupWords({4});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("serves another table or hint"));
}

// A TCP proxy on loopback to `upstream_port` that cuts its first connection (both ways) once it
// has passed `cut_after` bytes down to the client; later connections pass everything.
class CuttingProxy {
 public:
  CuttingProxy(int upstream_port, uint64_t cut_after)
      : upstream_port_(upstream_port), cut_after_(cut_after) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = testing::LoopbackAddress(0);
    socklen_t length = sizeof(address);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(listener_, 8) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "proxy: cannot listen";
    }
    port_ = ntohs(address.sin_port);
    accepting_ = std::thread([this] { Accept(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    accepting_.join();
    for (std::thread& t : pumps_) t.join();
    close(listener_);
  }

  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  uint64_t bytes_down() const { return bytes_down_.load(); }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = testing::ConnectLoopback(upstream_port_);
      if (server < 0) {
        close(client);
        continue;
      }
      const bool cut = connections_.fetch_add(1) == 0;
      pumps_.emplace_back([this, client, server, cut] { Pump(client, server, cut); });
    }
  }

  // Both directions of one connection, until either end closes (or the cut).
  void Pump(int client, int server, bool cut) {
    uint64_t down = 0;
    char buffer[16384];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = read(client, buffer, sizeof(buffer));
        if (n <= 0 || write(server, buffer, n) != n) break;
      }
      if (p[1].revents != 0) {
        const ssize_t n = read(server, buffer, sizeof(buffer));
        if (n <= 0 || write(client, buffer, n) != n) break;
        down += n;
        bytes_down_ += n;
        if (cut && down >= cut_after_) break;
      }
    }
    close(client);
    close(server);
  }

  const int upstream_port_;
  const uint64_t cut_after_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> bytes_down_{0};
  std::thread accepting_;
  std::vector<std::thread> pumps_;  // joined at the end (only the accepting thread adds)
};

// A connection lost in the middle of the hint download: the client reconnects and asks again for
// the wave of chunks under way (earlier waves are kept), and its lookups decode. The hint here is
// 6.25 MiB, one wave of 7 chunks of 1 MiB; the first connection is cut after 2.5 MiB down.
TEST(LweHintTest, ADownloadCutMidwayResumesOnANewConnection) {
  embedding::RowKey key = embedding::NewRowKey();
  auto path = testing::WriteRandomTable("lwe_cut.veil", embedding::RowFormat::kInt8RowWise, 65536,
                                        64, 5, 1, &key);
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string key_file = testing::TempPath("lwe_cut.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  auto server = testing::StartLweServer(*path, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  CuttingProxy proxy((*server)->port(), 5 << 19);
  LweClientOptions o;
  o.server = absl::StrCat("127.0.0.1:", proxy.port());
  o.row_key_file = key_file;
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  const uint64_t hint = (*client)->table().hint_bytes;
  ASSERT_GT(hint, uint64_t{5} << 20);
  EXPECT_EQ(proxy.connections(), 2);
  // More than the hint came down (the cut wave again), less than the hint twice.
  EXPECT_GT(proxy.bytes_down(), hint);
  EXPECT_LT(proxy.bytes_down(), 2 * hint);
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto words = (*client)->LookupWords({0, 40000, 65535});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, PlainWords(**table, {0, 40000, 65535}));
}

// A stand-in lwe-simple server whose config is consistent (the client recomputes the shape from
// it) but whose table is as large, or whose hint chunks as small, as it likes.
class LyingLweServer final : public rpc::LweServer::Server {
 public:
  LyingLweServer(uint64_t rows, uint64_t records_per_column, uint64_t chunk)
      : rows_(rows), chunk_(chunk) {
    lattice::ShapeOptions options;
    options.records_per_column = records_per_column;
    shape_ = *lattice::ChooseShape(lattice::Protocol::kSimplePir, rows, 4, options);
  }

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, "lwe-simple");
  }
  kj::Promise<void> config(ConfigContext context) override {
    auto c = context.getResults().initConfig();
    embedding::TableDigestBytes digest{};
    digest[0] = 7;
    c.initTable().setDigest(capnp::Data::Reader(digest.data(), digest.size()));
    c.getTable().setEpoch(1);
    c.setRows(rows_);
    c.setRowWords(1);
    c.setDim(1);
    c.setRowFormat(static_cast<uint8_t>(embedding::RowFormat::kFp32));
    c.setLweProtocol(static_cast<uint8_t>(lattice::Protocol::kSimplePir));
    c.setLweDimension(lattice::kLweDimension);
    c.setLogModulus(lattice::kLogModulus);
    c.setPlaintextModulus(lattice::kPlaintextModulus);
    c.setSigmaMicro(lattice::kSigmaMicro);
    c.setRecordsPerColumn(shape_.records_per_column);
    c.setD0(shape_.d0);
    c.setD1(shape_.d1);
    const auto seed = lattice::DeriveSeed(shape_, digest);
    c.setSeed(capnp::Data::Reader(seed.data(), seed.size()));
    c.setHintBytes(sizeof(lattice::HintHeader) + 4 * shape_.hint_words());
    const uint8_t hint_digest[32] = {1};
    c.setHintDigest(capnp::Data::Reader(hint_digest, sizeof(hint_digest)));
    c.setHintChunkBytes(chunk_);
    c.setQueryWords(shape_.query_words());
    c.setAnswerWords(shape_.answer_words());
    auto limits = c.initLimits();
    limits.setMaxQueriesPerCall(16);
    limits.setMaxMessageBytes(uint64_t{1} << 40);
    limits.setMaxQueuedQueries(16);
    limits.setMaxQueuedQueriesPerConnection(16);
    return kj::READY_NOW;
  }
  kj::Promise<void> hint(HintContext context) override {
    ++hint_calls;
    const uint64_t bytes = sizeof(lattice::HintHeader) + 4 * shape_.hint_words();
    const uint64_t offset = context.getParams().getChunk() * chunk_;
    context.getResults().initData(offset < bytes ? std::min(chunk_, bytes - offset) : 0);
    return kj::READY_NOW;
  }

 public:
  static inline std::atomic<int> hint_calls{0};

 private:
  uint64_t rows_, chunk_;
  lattice::Shape shape_;
};

TEST(LweHintTest, AServerCannotMakeTheClientHoldOrWaitWithoutBound) {
  const auto connect = [](uint64_t rows, uint64_t records_per_column, uint64_t chunk,
                          uint64_t max_hint_bytes = uint64_t{1} << 30) {
    testing::StandInServer server([=] {
      return capnp::Capability::Client(kj::heap<LyingLweServer>(rows, records_per_column, chunk));
    });
    LweClientOptions o;
    o.server = server.address();
    o.max_hint_bytes = max_hint_bytes;
    return LweClient::Connect(o).status();
  };
  LyingLweServer::hint_calls = 0;
  // 2^20 rows all in one column: a hint of gigabytes, refused before anything is allocated.
  absl::Status status = connect(uint64_t{1} << 20, uint64_t{1} << 20, 1 << 20);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("max_hint_bytes"));
  // Within the client's bound, but in chunks of 1 byte: hours of calls, refused.
  status = connect(4096, 64, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("chunks of 1 bytes"));
  // The bound is the client's choice: the same hint in good chunks, under a smaller bound.
  status = connect(4096, 64, 1 << 16, 1000);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_EQ(LyingLweServer::hint_calls, 0) << "no hint chunk was asked for";
  // Accepted, the download runs, and the stand-in's zero hint fails its digest.
  status = connect(4096, 64, 1 << 16);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("digest"));
  EXPECT_GT(LyingLweServer::hint_calls, 0);
}

// Two replicas of one LWE server (the same table, hence the same seed and hint): lookups go on
// with no failure while one replica is down, and a replica of another table is refused.
TEST_F(LweClientTest, ReplicasTakeOverWhileOneIsDown) {
  auto replica = testing::StartLweServer(path_, "lwe-simple");
  ASSERT_TRUE(replica.ok()) << replica.status();
  LweClientOptions o = Options();
  o.server = absl::StrCat(server_->address(), ",", (*replica)->address());
  o.timeout = absl::Seconds(10);
  auto client = LweClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto table = embedding::Table::Open(path_);
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE((*client)->LookupWords({1}).ok());
  for (int round = 0; round < 2; ++round) {
    // Round 0 stops the first replica, round 1 brings it back and stops the second.
    if (round == 0) {
      ASSERT_TRUE(server_->Stop().ok());
    } else {
      auto back = testing::StartLweServer(path_, "lwe-simple",
                                          {absl::StrCat("--listen=", server_->address())});
      ASSERT_TRUE(back.ok()) << back.status();
      server_ = *std::move(back);
      ASSERT_TRUE((*client)->LookupWords({2}).ok());
      ASSERT_TRUE((*replica)->Stop().ok());
    }
    for (uint64_t row : {0, 77, 199}) {
      auto words = (*client)->LookupWords({row, (row + 1) % 200});
      ASSERT_TRUE(words.ok()) << "round " << round << ": " << words.status();
      EXPECT_EQ(*words, PlainWords(**table, {row, (row + 1) % 200}));
    }
  }
  EXPECT_GE((*client)->totals().failovers, 1u);

  // Replicas of different tables: Connect refuses them rather than mixing hints.
  auto other = testing::WriteRandomTable("lwe_replica_other.veil",
                                         embedding::RowFormat::kInt8RowWise, 200, 16, 9, 1, &key_);
  ASSERT_TRUE(other.ok()) << other.status();
  auto stranger = testing::StartLweServer(*other, "lwe-simple");
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  o.server = absl::StrCat(server_->address(), ",", (*stranger)->address());
  auto refused = LweClient::Connect(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("serves another table or hint"));
}

}  // namespace
}  // namespace veil
