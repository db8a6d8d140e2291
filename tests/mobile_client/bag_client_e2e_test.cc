// veil::client::BagClient against a real bfv-bag server process on loopback: pooled sums equal the
// plaintext sums exactly, bad arguments and unusable servers are clear errors, a client never
// talks to a server of the other protocol, the server's key memory bound is enforced (evicted
// sessions upload their keys again), and a restarted server is a new session (same table only).

#include <atomic>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/row_format.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "pir/he/bag.h"
#include "pir/he/bfv_context.h"
#include "pir/he/serialization.h"
#include "rpc/veil.capnp.h"
#include "tests/mobile_client/evicting_proxy.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using client::BagClient;
using client::BagClientOptions;
using client::PoolingMode;
using ::testing::HasSubstr;

constexpr uint32_t kDim = 8;
constexpr uint64_t kRows = 300;

// The plaintext pooled sums of the fixed-point table at `path` (repeated rows add up).
std::vector<int64_t> PlainSums(const embedding::Table& table, const std::vector<uint64_t>& indices,
                               const std::vector<uint32_t>& bag_sizes,
                               const std::vector<int64_t>& weights) {
  std::vector<int64_t> sums(bag_sizes.size() * table.dim(), 0);
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    for (uint32_t k = 0; k < bag_sizes[b]; ++k, ++next) {
      absl::Span<const uint32_t> row = table.row(indices[next]);
      const int64_t w = weights.empty() ? 1 : weights[next];
      for (uint32_t j = 0; j < table.dim(); ++j) {
        sums[b * table.dim() + j] += w * static_cast<int32_t>(row[j]);
      }
    }
  }
  return sums;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class BagClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path =
        testing::WriteRandomTable("bag.veil", embedding::RowFormat::kFixed32, kRows, kDim, 11);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
    auto table = embedding::Table::Open(path_);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
  }

  BagClientOptions Options(const tools::ServerProcess& server) const {
    BagClientOptions options;
    options.server = server.address();
    return options;
  }

  std::string path_;
  std::unique_ptr<embedding::Table> table_;
};

TEST_F(BagClientTest, PooledSumsEqualThePlaintextSumsExactly) {
  // Three queries in flight per connection: a lookup of more bags goes in waves.
  auto server = testing::StartBagServer(path_, {"--max_queued_ciphertexts_per_connection=3"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = BagClient::Connect(Options(**server));
  ASSERT_TRUE(client.ok()) << client.status();
  const client::BagTableInfo& t = (*client)->table();
  EXPECT_EQ(t.rows, kRows);
  EXPECT_EQ(t.dim, kDim);
  EXPECT_EQ(t.frac_bits, 16);
  EXPECT_EQ(t.log_n, 13);
  EXPECT_EQ(t.query_blocks, 1u);
  // The server reads queries with c_0 rounded: 145,455 bytes a block instead of 178,222.
  EXPECT_EQ(t.query_round_bits, he::kBagQueryRoundBits);
  EXPECT_EQ(t.query_bytes, 8u + 4 + 145455);
  EXPECT_EQ((*client)->key_uploads(), 1u);
  EXPECT_GE((*client)->totals().bytes_up, t.galois_key_bytes);

  // A single row, a weighted bag with a repeated row and negative weights, large weights, and
  // the whole table.
  std::vector<uint64_t> indices = {42, 1, 7, 1, 299, 0, 5, 9};
  std::vector<uint32_t> bag_sizes = {1, 4, 3};
  std::vector<int64_t> weights = {3, -2, 5, 7, 1, int64_t{1} << 30, -(int64_t{1} << 29), 12345};
  for (uint64_t r = 0; r < kRows; ++r) indices.push_back(r);
  for (uint64_t r = 0; r < kRows; ++r) weights.push_back(static_cast<int64_t>(r % 7) - 3);
  bag_sizes.push_back(kRows);
  auto sums = (*client)->LookupPooledSums(indices, bag_sizes, weights);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, indices, bag_sizes, weights));
  const client::CallStats call = (*client)->last_call();
  EXPECT_EQ(call.lookups, 4u);
  EXPECT_EQ(call.calls, 4u);
  EXPECT_GE(call.bytes_up, 4 * t.query_bytes);
  EXPECT_LT(call.bytes_up, 4 * t.query_bytes + 4096);
  EXPECT_GE(call.bytes_down, 4 * t.answer_bytes);
  EXPECT_LT(call.bytes_down, 4 * t.answer_bytes + 4096);

  // Floats: the exact sums dequantized; mean divides by the weight sum (the bag size without
  // weights).
  std::vector<uint64_t> small = {3, 4, 4, 250};
  std::vector<uint32_t> sizes = {2, 2};
  auto mean = (*client)->LookupPooled(small, sizes, {}, PoolingMode::kMean);
  ASSERT_TRUE(mean.ok()) << mean.status();
  const std::vector<int64_t> plain = PlainSums(*table_, small, sizes, {});
  std::vector<float> expected(plain.size());
  for (size_t b = 0; b < 2; ++b) {
    ASSERT_TRUE(embedding::DecodePooledFixed(16, absl::MakeConstSpan(plain).subspan(b * kDim, kDim),
                                             2.0, absl::MakeSpan(expected).subspan(b * kDim, kDim))
                    .ok());
  }
  EXPECT_EQ(*mean, expected);
  auto sum = (*client)->LookupPooled(small, sizes, {2, -1, 1, 1}, PoolingMode::kSum);
  ASSERT_TRUE(sum.ok()) << sum.status();
  const std::vector<int64_t> weighted = PlainSums(*table_, small, sizes, {2, -1, 1, 1});
  for (size_t i = 0; i < weighted.size(); ++i) {
    EXPECT_EQ((*sum)[i], static_cast<float>(weighted[i] / 65536.0)) << i;
  }
  // Seven bags: waves of 3, 3 and 1.
  std::vector<uint64_t> seven;
  for (uint64_t r = 0; r < 14; ++r) seven.push_back((r * 37) % kRows);
  const std::vector<uint32_t> pairs(7, 2);
  auto waves = (*client)->LookupPooledSums(seven, pairs, {});
  ASSERT_TRUE(waves.ok()) << waves.status();
  EXPECT_EQ(*waves, PlainSums(*table_, seven, pairs, {}));
  auto stats = (*client)->ServerStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->keys, 15u);  // queries answered: 4 + 2 + 2 + 7 bags
  EXPECT_EQ(stats->errors, 0u);
}

TEST_F(BagClientTest, TablesOverNRowsAreSplitIntoBlocks) {
  constexpr uint64_t kTall = 8192 + 77;
  auto path = testing::WriteRandomTable("tall.veil", embedding::RowFormat::kFixed32, kTall, 4, 5);
  ASSERT_TRUE(path.ok());
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto server = testing::StartBagServer(*path, {"--threads=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = BagClient::Connect(Options(**server));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().query_blocks, 2u);
  const std::vector<uint64_t> indices = {0, 8191, 8192, kTall - 1, 4000};
  const std::vector<uint32_t> sizes = {5};
  const std::vector<int64_t> weights = {1, -4, 9, 2, 100};
  auto sums = (*client)->LookupPooledSums(indices, sizes, weights);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(**table, indices, sizes, weights));
  EXPECT_EQ((*client)->last_call().keys, 2u);
}

// The product's windows tile any shape: one column (no rotations, so no Galois keys at all) and
// an odd dim whose windows differ in length.
TEST_F(BagClientTest, OddShapesAreServed) {
  struct Shape {
    uint64_t rows;
    uint32_t dim;
  };
  for (const Shape shape : {Shape{300, 1}, Shape{3000, 5}}) {
    SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.dim);
    auto path = testing::WriteRandomTable("odd.veil", embedding::RowFormat::kFixed32, shape.rows,
                                          shape.dim, 6);
    ASSERT_TRUE(path.ok());
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    auto server = testing::StartBagServer(*path, {});
    ASSERT_TRUE(server.ok()) << server.status();
    auto client = BagClient::Connect(Options(**server));
    ASSERT_TRUE(client.ok()) << client.status();
    // No keys: the header and a count of zero.
    if (shape.dim == 1) {
      EXPECT_EQ((*client)->table().galois_key_bytes, 16u);
    }
    const std::vector<uint64_t> indices = {0, shape.rows - 1, 7, 150, 151, 2};
    const std::vector<uint32_t> sizes = {4, 2};
    const std::vector<int64_t> weights = {3, -1, 65536, 1, -7, 1 << 20};
    auto sums = (*client)->LookupPooledSums(indices, sizes, weights);
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, PlainSums(**table, indices, sizes, weights));
  }
}

TEST_F(BagClientTest, BadArgumentsAreClearErrorsAndTheClientKeepsWorking) {
  auto server = testing::StartBagServer(path_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = BagClient::Connect(Options(**server));
  ASSERT_TRUE(client.ok()) << client.status();
  BagClient& c = **client;
  const std::vector<uint64_t> two = {1, 2};
  const std::vector<uint32_t> one_bag = {2};
  EXPECT_EQ(c.LookupPooledSums(two, {}, {}).status().message(), "no bags requested");
  EXPECT_EQ(c.LookupPooledSums(two, std::vector<uint32_t>{2, 0}, {}).status().message(),
            "bag 1 is empty");
  EXPECT_EQ(c.LookupPooledSums(two, std::vector<uint32_t>{3}, {}).status().message(),
            "the bag sizes add up to 3, not to the 2 indices");
  EXPECT_EQ(c.LookupPooledSums(two, one_bag, std::vector<int64_t>{1}).status().message(),
            "1 weights for 2 indices");
  EXPECT_EQ(c.LookupPooledSums(std::vector<uint64_t>{1, kRows}, one_bag, {}).status().message(),
            "bag 0: row 300 is outside the table (300 rows)");
  const absl::Status too_large =
      c.LookupPooledSums(two, one_bag, std::vector<int64_t>{int64_t{1} << 45, 1}).status();
  EXPECT_EQ(too_large.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_large.message(), HasSubstr("the pooled sum would not be exact"));
  const absl::Status overflow =
      c.LookupPooledSums(std::vector<uint64_t>{1, 1}, one_bag, std::vector<int64_t>{INT64_MAX, 1})
          .status();
  EXPECT_EQ(overflow.message(), "bag 0: the weights of row 1 overflow 64 bits");
  // An undefined mean is refused before anything is sent.
  const uint64_t calls = c.totals().calls;
  EXPECT_EQ(c.LookupPooled(two, one_bag, std::vector<int64_t>{1, -1}, PoolingMode::kMean)
                .status()
                .message(),
            "bag 0 has weight sum 0: its mean is undefined");
  EXPECT_EQ(c.totals().calls, calls);
  auto sums = c.LookupPooledSums(two, one_bag, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, two, one_bag, {}));
  // A negative thread count is refused at connect; one thread gives the same sums.
  BagClientOptions negative = Options(**server);
  negative.threads = -1;
  EXPECT_EQ(BagClient::Connect(negative).status().message(),
            "threads must be 0 (the machine's cores) or more, not -1");
  BagClientOptions one_thread = Options(**server);
  one_thread.threads = 1;
  auto serial = BagClient::Connect(one_thread);
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_EQ(*(*serial)->LookupPooledSums(two, one_bag, {}), *sums);
}

TEST_F(BagClientTest, ClientsRefuseServersOfTheOtherProtocol) {
  auto bag_server = testing::StartBagServer(path_);
  ASSERT_TRUE(bag_server.ok()) << bag_server.status();
  auto dpf_servers = testing::StartTwoServers(path_, path_);
  ASSERT_TRUE(dpf_servers.ok()) << dpf_servers.status();

  BagClientOptions bag_options;
  bag_options.server = dpf_servers->address(0);
  const absl::Status bag_to_dpf = BagClient::Connect(bag_options).status();
  EXPECT_EQ(bag_to_dpf.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bag_to_dpf.message(),
              HasSubstr("speaks protocol \"dpf2\"; this client speaks \"bfv-bag\""));

  client::ClientOptions dpf_options;
  dpf_options.server0 = (*bag_server)->address();
  dpf_options.server1 = dpf_servers->address(1);
  const absl::Status dpf_to_bag = client::Client::Connect(dpf_options).status();
  EXPECT_EQ(dpf_to_bag.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      dpf_to_bag.message(),
      HasSubstr(absl::StrCat("server 0 (", (*bag_server)->address(),
                             ") speaks protocol \"bfv-bag\"; this client speaks \"dpf2\"")));
}

TEST_F(BagClientTest, ServerRefusesTablesAndLimitsItCannotServe) {
  auto fp32 = testing::WriteRandomTable("fp32.veil", embedding::RowFormat::kFp32, 10, 4, 1);
  ASSERT_TRUE(fp32.ok());
  const std::string log = testing::TempPath("fp32.log");
  EXPECT_EQ(testing::StartBagServer(*fp32, {}, nullptr, log).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(ReadFile(log), HasSubstr("protocol bfv-bag serves fixed-point tables (its pooled "
                                       "sums are exact integers); this table is fp32"));

  const std::string small_log = testing::TempPath("small.log");
  EXPECT_FALSE(
      testing::StartBagServer(path_, {"--max_galois_key_bytes=1000000"}, nullptr, small_log).ok());
  EXPECT_THAT(ReadFile(small_log), HasSubstr("--max_galois_key_bytes must be at least"));

  const std::string n_log = testing::TempPath("n.log");
  EXPECT_FALSE(testing::StartBagServer(path_, {"--bfv_log_n=12"}, nullptr, n_log).ok());
  EXPECT_THAT(ReadFile(n_log), HasSubstr("bfv-bag runs at N = 8192 or 16384, not 2^12"));
}

// Tables tagged with the linear MAC (--row-tag-kind=4): the server pools the two tag columns with
// the data and a client holding the row key checks every bag's sums. A server answering from a
// table with one flipped bit, or from an older version relabelled as newer, returns no sum.
TEST_F(BagClientTest, TaggedTablesPooledSumsAreChecked) {
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = testing::TempPath("mac.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  // The fixture's rows (same seed), tagged.
  auto written = testing::WriteRandomTable("mac.veil", embedding::RowFormat::kFixed32, kRows, kDim,
                                           11, 2, &key, embedding::RowTag::kLinearMac61);
  ASSERT_TRUE(written.ok()) << written.status();
  const std::string mac = *written;
  // Row 100's lowest bit flipped, the digest recomputed (the tags left): a tampered table.
  std::string bytes = ReadFile(mac);
  auto opened = embedding::Table::Open(mac);
  ASSERT_TRUE(opened.ok());
  bytes[sizeof(embedding::TableHeader) + 100 * (*opened)->stride_words() * 4] ^= 0x01;
  const std::string flipped_path = testing::TempPath("flipped.veil");
  std::ofstream(flipped_path, std::ios::binary | std::ios::trunc) << bytes;
  const std::string tampered = testing::RewriteTable(flipped_path, "tampered.veil", 2,
                                                     embedding::RowTag::kLinearMac61, nullptr);
  // Epoch 1's tags under the label of epoch 3.
  auto epoch1 = testing::WriteRandomTable("mac1.veil", embedding::RowFormat::kFixed32, kRows, kDim,
                                          11, 1, &key, embedding::RowTag::kLinearMac61);
  ASSERT_TRUE(epoch1.ok()) << epoch1.status();
  const std::string relabelled = testing::RewriteTable(*epoch1, "relabelled.veil", 3,
                                                       embedding::RowTag::kLinearMac61, nullptr);

  auto server = testing::StartBagServer(mac, {});
  ASSERT_TRUE(server.ok()) << server.status();
  BagClientOptions options = Options(**server);
  options.row_key_file = key_file;
  auto client = BagClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().row_tag, embedding::RowTag::kLinearMac61);
  EXPECT_EQ((*client)->table().dim, kDim);
  const std::vector<uint64_t> indices = {42, 1, 7, 1, 100, 0, 5};
  const std::vector<uint32_t> bag_sizes = {1, 3, 3};
  const std::vector<int64_t> weights = {3, -2, 5, 7, 1, 1 << 20, -12345};
  auto sums = (*client)->LookupPooledSums(indices, bag_sizes, weights);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, indices, bag_sizes, weights));

  // Without the key the client refuses the tagged table rather than skip the check; with a key
  // and an untagged table it refuses too.
  auto keyless = BagClient::Connect(Options(**server));
  ASSERT_FALSE(keyless.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(keyless.status())) << keyless.status();
  EXPECT_THAT(keyless.status().message(), HasSubstr("row_key_file"));
  auto untagged = testing::StartBagServer(path_, {});
  ASSERT_TRUE(untagged.ok()) << untagged.status();
  BagClientOptions with_key = Options(**untagged);
  with_key.row_key_file = key_file;
  EXPECT_TRUE(absl::IsFailedPrecondition(BagClient::Connect(with_key).status()));

  // The tampered table: a bag holding row 100 fails, a bag without it is still the right sum.
  auto bad = testing::StartBagServer(tampered, {});
  ASSERT_TRUE(bad.ok()) << bad.status();
  options.server = (*bad)->address();
  auto checked = BagClient::Connect(options);
  ASSERT_TRUE(checked.ok()) << checked.status();
  auto wrong = (*checked)->LookupPooledSums({100, 3}, {2}, {});
  ASSERT_FALSE(wrong.ok()) << "a sum of the tampered row came back";
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  EXPECT_THAT(wrong.status().message(), HasSubstr("bag 0 fails its authentication tag"));
  // After a failure the client makes no more lookups: whether a check fails can tell the server
  // something about a bag.
  auto after = (*checked)->LookupPooledSums({99, 3}, {2}, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(after.status())) << after.status();
  EXPECT_THAT(after.status().message(), HasSubstr("makes no more lookups"));
  // A new client gets the sums of bags without the tampered row right.
  auto again = BagClient::Connect(options);
  ASSERT_TRUE(again.ok()) << again.status();
  auto right = (*again)->LookupPooledSums({99, 3}, {2}, {});
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(*right, PlainSums(*table_, {99, 3}, {2}, {}));

  // Epoch 1 relabelled as epoch 3: every sum fails; min_epoch alone would not have caught it.
  auto old = testing::StartBagServer(relabelled, {});
  ASSERT_TRUE(old.ok()) << old.status();
  options.server = (*old)->address();
  options.min_epoch = 3;
  auto fooled = BagClient::Connect(options);
  ASSERT_TRUE(fooled.ok()) << fooled.status();
  EXPECT_TRUE(absl::IsDataLoss((*fooled)->LookupPooledSums({5}, {1}, {}).status()));
  options.min_epoch = 4;
  EXPECT_TRUE(absl::IsFailedPrecondition(BagClient::Connect(options).status()));

  // SipHash tags (kind 3, the default) cannot be pooled: the server refuses such a table.
  auto siphash = testing::WriteRandomTable("siphash.veil", embedding::RowFormat::kFixed32, 20, kDim,
                                           3, 1, &key);
  ASSERT_TRUE(siphash.ok());
  const std::string log = testing::TempPath("siphash.log");
  EXPECT_FALSE(testing::StartBagServer(*siphash, {}, nullptr, log).ok());
  EXPECT_THAT(ReadFile(log), HasSubstr("--row-tag-kind=4"));
}

TEST_F(BagClientTest, TheKeyMemoryBoundEvictsIdleSessions) {
  // Room for one session's keys (about 3.9 x their wire size while parsed), not two.
  auto ctx = he::BfvContext::Create(*he::BagParams(13));
  ASSERT_TRUE(ctx.ok());
  auto plan = he::MatVecPlan::Create(**ctx, kDim, kRows);
  ASSERT_TRUE(plan.ok());
  const uint64_t bound = 6 * he::SizesOf(**ctx, *plan).galois_key_bytes;

  auto server = testing::StartBagServer(path_, {absl::StrCat("--max_galois_key_bytes=", bound)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = BagClient::Connect(Options(**server));
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<uint64_t> rows = {10, 20, 30};
  const std::vector<uint32_t> bag = {3};
  const std::vector<int64_t> plain = PlainSums(*table_, rows, bag, {});
  auto sums = (*a)->LookupPooledSums(rows, bag, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, plain);
  // b's keys evict a's (idle); a's next lookup uploads them again, evicting b's, and so on.
  auto b = BagClient::Connect(Options(**server));
  ASSERT_TRUE(b.ok()) << b.status();
  for (BagClient* c : {a->get(), b->get(), a->get()}) {
    auto again = c->LookupPooledSums(rows, bag, {});
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, plain);
  }
  EXPECT_EQ((*a)->key_uploads(), 3u);
  EXPECT_EQ((*b)->key_uploads(), 2u);
}

TEST_F(BagClientTest, AConnectionClosedWhileIdleResumesItsKeys) {
  // The server closes the idle connection; the next lookup reconnects and resumes the Galois
  // keys with their token instead of uploading them again.
  std::vector<std::string> args = {"--idle_timeout_s=1"};
#if VEIL_HAVE_PROMETHEUS
  args.push_back("--metrics=127.0.0.1:0");
#endif
  const std::string log = testing::TempPath("bag.log");
  auto server = testing::StartBagServer(path_, args, nullptr, log);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = BagClient::Connect(Options(**server));
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<uint64_t> rows = {3, 8};
  const std::vector<uint32_t> bag = {2};
  ASSERT_TRUE((*client)->LookupPooledSums(rows, bag, {}).ok());
  absl::SleepFor(absl::Milliseconds(2500));
  auto sums = (*client)->LookupPooledSums(rows, bag, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, rows, bag, {}));
  EXPECT_EQ((*client)->key_uploads(), 1u);
  EXPECT_EQ((*client)->key_resumes(), 1u);
  EXPECT_LT((*client)->last_call().bytes_up, (*client)->table().galois_key_bytes / 10);
#if VEIL_HAVE_PROMETHEUS
  // The server's count of the same: one upload, one resume, the keys on the open connection.
  const absl::StatusOr<int> metrics_port = testing::MetricsPort(log);
  ASSERT_TRUE(metrics_port.ok()) << metrics_port.status();
  auto metrics = testing::Scrape(*metrics_port);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(testing::Sample(*metrics, "veil_session_key_uploads_total"), 1);
  EXPECT_EQ(testing::Sample(*metrics, "veil_session_key_resumes_total{result=\"resumed\"}"), 1);
  EXPECT_EQ(testing::Sample(*metrics, "veil_session_key_resumes_total{result=\"refused\"}"), 0);
  EXPECT_EQ(testing::Sample(*metrics, "veil_session_keys{state=\"open\"}"), 1);
  EXPECT_GT(testing::Sample(*metrics, "veil_session_key_bytes"), 0);
#endif
}

TEST_F(BagClientTest, ARestartedServerGetsTheKeysAgainOnlyWithTheSameTable) {
  auto other =
      testing::WriteRandomTable("other.veil", embedding::RowFormat::kFixed32, kRows, kDim, 12);
  ASSERT_TRUE(other.ok());
  auto server = testing::StartBagServer(path_);
  ASSERT_TRUE(server.ok()) << server.status();
  BagClientOptions options = Options(**server);
  options.timeout = absl::Seconds(10);
  auto client = BagClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const int port = (*server)->port();
  auto restart = [&](const std::string& table) {
    (*server)->Kill();
    auto started = testing::StartBagServer(table, {absl::StrCat("--listen=127.0.0.1:", port)});
    ASSERT_TRUE(started.ok()) << started.status();
    *server = *std::move(started);
  };
  const std::vector<uint64_t> rows = {4, 9};
  const std::vector<uint32_t> bag = {2};

  restart(path_);
  // The call finds the old connection gone and goes again on a new one; the new process holds
  // no keys to resume (the token is refused), so they are uploaded again.
  auto sums = (*client)->LookupPooledSums(rows, bag, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, rows, bag, {}));
  EXPECT_EQ((*client)->key_uploads(), 2u);
  EXPECT_EQ((*client)->key_resumes(), 0u);

  restart(*other);
  const absl::Status refused = (*client)->LookupPooledSums(rows, bag, {}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("serves another table"));
}

// Two replicas of one bfv-bag server: the session's keys go to each replica before its first
// query, and lookups go on with no failure while either replica is down.
TEST_F(BagClientTest, ReplicasTakeOverWhileOneIsDown) {
  auto first = testing::StartBagServer(path_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = testing::StartBagServer(path_);
  ASSERT_TRUE(second.ok()) << second.status();
  BagClientOptions options = Options(**first);
  options.server = absl::StrCat((*first)->address(), ",", (*second)->address());
  options.timeout = absl::Seconds(20);
  auto client = BagClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->key_uploads(), 1u);
  const std::vector<uint64_t> rows = {3, 150, 299};
  const std::vector<uint32_t> bag = {3};
  const std::vector<int64_t> plain = PlainSums(*table_, rows, bag, {});
  auto lookup = [&](const char* when) {
    auto sums = (*client)->LookupPooledSums(rows, bag, {});
    ASSERT_TRUE(sums.ok()) << when << ": " << sums.status();
    EXPECT_EQ(*sums, plain) << when;
  };
  lookup("both up");
  const int port = (*first)->port();
  (*first)->Kill();
  for (int i = 0; i < 3; ++i) lookup("the first replica down");
  // The second replica got the keys (a hedge may have sent them there earlier: at least 2).
  EXPECT_GE((*client)->key_uploads(), 2u);
  EXPECT_GE((*client)->totals().failovers, 1u);
  auto back = testing::StartBagServer(path_, {absl::StrCat("--listen=127.0.0.1:", port)});
  ASSERT_TRUE(back.ok()) << back.status();
  (*second)->Kill();
  for (int i = 0; i < 3; ++i) lookup("the second replica down");
  EXPECT_GE((*client)->key_uploads(), 3u);  // the restarted first replica got them again

  // Replicas of different tables: Connect refuses them.
  auto other = testing::WriteRandomTable("replica_other.veil", embedding::RowFormat::kFixed32,
                                         kRows, kDim, 13);
  ASSERT_TRUE(other.ok());
  auto stranger = testing::StartBagServer(*other);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  options.server = absl::StrCat((*back)->address(), ",", (*stranger)->address());
  const absl::Status refused = BagClient::Connect(options).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("serves another table"));
}

TEST_F(BagClientTest, ServesOverTls) {
  auto cert = testing::MakeCertificate();
  ASSERT_TRUE(cert.ok()) << cert.status();
  auto server = testing::StartBagServer(path_, {}, &*cert);
  ASSERT_TRUE(server.ok()) << server.status();
  BagClientOptions options = Options(**server);
  const absl::Status plaintext = BagClient::Connect(options).status();
  EXPECT_EQ(plaintext.code(), absl::StatusCode::kUnavailable);
  options.tls_trusted_certs = cert->cert_path;
  auto client = BagClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<uint64_t> rows = {7, 8};
  const std::vector<uint32_t> bag = {2};
  auto sums = (*client)->LookupPooledSums(rows, bag, std::vector<int64_t>{-3, 4});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, rows, bag, {-3, 4}));
}

TEST_F(BagClientTest, AKeyUploadAfterAnEvictionEndsWithinTheLookupsTimeout) {
  // The answer comes after 1.4 s of the 2 s timeout: keys evicted. Before, the upload that
  // follows had a timeout of its own, and the lookup took 3.4 s; now it ends with the lookup's.
  auto server = testing::StartBagServer(path_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto armed = std::make_shared<std::atomic<bool>>(false);
  const std::string real = (*server)->address();
  testing::StandInServer proxy([real, armed] {
    return capnp::Capability::Client(kj::heap<testing::EvictingProxy<rpc::BagServer>>(
        real, armed, 1400 * kj::MILLISECONDS,
        [](auto from, auto to) { to.setQuery(from.getQuery()); }));
  });
  BagClientOptions o = Options(**server);
  o.server = proxy.address();
  o.timeout = absl::Seconds(2);
  auto client = BagClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<uint32_t> bag = {2};
  const std::vector<uint64_t> rows = {5, 6};
  auto sums = (*client)->LookupPooledSums(rows, bag, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, PlainSums(*table_, rows, bag, {})) << "through the proxy, before it turns";
  armed->store(true);
  const absl::Time start = absl::Now();
  sums = (*client)->LookupPooledSums(std::vector<uint64_t>{7, 8}, bag, {});
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(sums.status().code(), absl::StatusCode::kDeadlineExceeded) << sums.status();
  EXPECT_GE(took, absl::Milliseconds(1400));
  EXPECT_LT(took, o.timeout + absl::Milliseconds(600));
}

// A stand-in bfv-bag server whose config describes, consistently, a table of `rows` rows of 4
// values (with two tag columns of `kind` 4), whose largest |value| it says is 1. It takes key
// uploads and answers every query with bytes that are no ciphertext.
// The bits the last query a StandInBagServer received was rounded by (SerializedRoundBits of its
// first block), -1 before one arrives.
std::atomic<int> stand_in_query_round_bits{-1};

class StandInBagServer final : public rpc::BagServer::Server {
 public:
  explicit StandInBagServer(uint64_t rows, embedding::RowTag kind = embedding::RowTag::kNone,
                            bool rounded_queries = false)
      : rows_(rows),
        kind_(kind),
        rounded_queries_(rounded_queries),
        ctx_(*he::BfvContext::Create(*he::BagParams(13))),
        info_{ctx_->id(), rows, 4 + embedding::TagWords(kind), 1},
        key_bytes_((*he::BagClient::Create(ctx_, info_))->Sizes().galois_key_bytes) {}

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, "bfv-bag");
  }
  kj::Promise<void> config(ConfigContext context) override {
    auto c = context.getResults().initConfig();
    c.setRowTag(static_cast<uint8_t>(kind_));
    SetTable(c.initTable());
    c.setRows(rows_);
    c.setDim(4);
    c.setLogN(13);
    const std::vector<uint8_t> bytes = he::SerializeBagTableInfo(info_);
    c.setTableInfo(capnp::Data::Reader(bytes.data(), bytes.size()));
    c.setQueryBlocks(he::MatVecPlan::Create(*ctx_, info_.dim, rows_)->blocks());
    c.setGaloisKeyBytes(key_bytes_);
    c.setMaxChunkBytes(1 << 20);
    auto limits = c.initLimits();
    limits.setMaxMessageBytes(uint64_t{1} << 40);
    limits.setMaxQueuedCiphertexts(0xffffffffu);
    limits.setMaxQueuedCiphertextsPerConnection(0xffffffffu);
    c.setRoundedQueries(rounded_queries_);
    return kj::READY_NOW;
  }
  kj::Promise<void> uploadGaloisKeys(UploadGaloisKeysContext context) override {
    auto params = context.getParams();
    received_ = params.getOffset() + params.getChunk().size();
    auto results = context.getResults();
    results.setReceivedBytes(received_);
    results.setInstalled(received_ == key_bytes_);
    return kj::READY_NOW;
  }
  kj::Promise<void> answer(AnswerContext context) override {
    // 'V' 'B' 'Q' version, count, the first block's length, then the block.
    capnp::Data::Reader query = context.getParams().getQuery();
    if (query.size() > 12) {
      stand_in_query_round_bits =
          he::SerializedRoundBits(absl::MakeConstSpan(query.begin() + 12, query.end()));
    }
    auto results = context.getResults();
    SetTable(results.initTable());
    const uint8_t garbage[] = {'n', 'o', 't', ' ', 'a', ' ', 'c', 't'};
    results.setAnswer(capnp::Data::Reader(garbage, sizeof(garbage)));
    return kj::READY_NOW;
  }

 private:
  // Its table: digest {3, 0, ...}, epoch 1.
  static void SetTable(rpc::TableId::Builder table) {
    const uint8_t digest[32] = {3};
    table.setDigest(capnp::Data::Reader(digest, sizeof(digest)));
    table.setEpoch(1);
  }

  uint64_t rows_;
  embedding::RowTag kind_;
  bool rounded_queries_;
  std::shared_ptr<const he::BfvContext> ctx_;
  he::BagTableInfo info_;
  uint64_t key_bytes_;
  uint64_t received_ = 0;
};

// A server from before rounded queries (its config leaves roundedQueries unset) is sent exact
// ones; one that reads them gets them rounded.
TEST(BagClientCompatibilityTest, QueriesAreRoundedOnlyForServersThatReadThem) {
  for (const bool rounded : {false, true}) {
    SCOPED_TRACE(rounded);
    testing::StandInServer server([rounded] {
      return capnp::Capability::Client(
          kj::heap<StandInBagServer>(100, embedding::RowTag::kNone, rounded));
    });
    BagClientOptions o;
    o.server = server.address();
    auto client = BagClient::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_EQ((*client)->table().query_round_bits, rounded ? he::kBagQueryRoundBits : 0);
    EXPECT_EQ((*client)->table().query_bytes, 8u + 4 + (rounded ? 145455 : 178222));
    stand_in_query_round_bits = -1;
    // The stand-in's answer is garbage: only the query matters here.
    EXPECT_FALSE((*client)->LookupPooledSums({3}, {1}, {}).ok());
    EXPECT_EQ(stand_in_query_round_bits.load(), rounded ? he::kBagQueryRoundBits : 0);
  }
  // Replicas of which one is older: exact queries, which both read.
  testing::StandInServer updated([] {
    return capnp::Capability::Client(
        kj::heap<StandInBagServer>(100, embedding::RowTag::kNone, true));
  });
  testing::StandInServer older(
      [] { return capnp::Capability::Client(kj::heap<StandInBagServer>(100)); });
  BagClientOptions o;
  o.server = absl::StrCat(updated.address(), ",", older.address());
  auto client = BagClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().query_round_bits, 0);
}

TEST(BagClientHostileTest, AServerClaimingAHugeTableIsRefusedAtConnect) {
  // 2^32 rows: every lookup would allocate their weights (tens of GB) and 2^19 ciphertexts.
  testing::StandInServer server(
      [] { return capnp::Capability::Client(kj::heap<StandInBagServer>(uint64_t{1} << 32)); });
  BagClientOptions o;
  o.server = server.address();
  auto client = BagClient::Connect(o);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kResourceExhausted) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("rows x 4 whose queries and answers take"));
}

// A server that understates its table's largest |value| would let a client send weights whose
// true sums exceed p = 2^61 - 1, which the linear MAC cannot tell from sums off by a multiple of
// p. A client checking a tagged table bounds the weights by the largest int32 instead.
TEST(BagClientHostileTest, ATaggedTablesWeightsAreBoundedWhateverTheServerSays) {
  testing::StandInServer server([] {
    return capnp::Capability::Client(
        kj::heap<StandInBagServer>(100, embedding::RowTag::kLinearMac61));
  });
  const std::string key_file = testing::TempPath("standin.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, embedding::NewRowKey()).ok());
  BagClientOptions o;
  o.server = server.address();
  o.row_key_file = key_file;
  auto client = BagClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  // 2^27 x 2^31 = 2^58 > (t - 1) / 2: refused before anything is sent (the server says 1).
  auto sums = (*client)->LookupPooledSums({3}, {1}, {int64_t{1} << 27});
  EXPECT_TRUE(absl::IsInvalidArgument(sums.status())) << sums.status();
  EXPECT_THAT(sums.status().message(), HasSubstr("largest |value| (2147483648)"));
  // 2^33 x 2^31 = 2^64: refused too.
  sums = (*client)->LookupPooledSums({3}, {1}, {int64_t{1} << 33});
  EXPECT_TRUE(absl::IsInvalidArgument(sums.status())) << sums.status();
}

// An answer that cannot be decoded could depend on the bag (a server chooses what it returns from
// the encrypted weights): after one the client makes no more lookups.
TEST(BagClientHostileTest, AfterAMalformedAnswerTheClientMakesNoMoreLookups) {
  testing::StandInServer server(
      [] { return capnp::Capability::Client(kj::heap<StandInBagServer>(100)); });
  BagClientOptions o;
  o.server = server.address();
  auto client = BagClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto first = (*client)->LookupPooledSums({3}, {1}, {});
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInternal) << first.status();
  EXPECT_THAT(first.status().message(), HasSubstr("malformed answer"));
  auto second = (*client)->LookupPooledSums({4}, {1}, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("makes no more lookups"));
  // A new client is another bit for the server, unless both share a failure latch.
  EXPECT_TRUE(BagClient::Connect(o).ok());
  const std::string latch = testing::TempPath("bag.latch");
  o.failure_latch_file = latch;
  auto latched = BagClient::Connect(o);
  ASSERT_TRUE(latched.ok()) << latched.status();
  auto failed = (*latched)->LookupPooledSums({3}, {1}, {});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("lookups stop until " + latch));
  auto refused = BagClient::Connect(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("malformed answer"));
}

}  // namespace
}  // namespace veil
