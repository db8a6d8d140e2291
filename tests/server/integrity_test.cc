// Never a wrong row (issue 10): a server refuses a table whose contents do not match its digest,
// serves from memory of its own (a table file overwritten or truncated under it changes nothing),
// refuses a FIFO without hanging; with row tags a client detects a server that answers from a
// corrupted table or shifts its share, and reports the pair instead of returning a wrong row; the
// tags cover the table's epoch, so an older version relabelled as a newer one fails them too.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRows = 300;
constexpr uint32_t kDim = 8;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A copy of `path` with one bit of row 100 flipped (the header, digest included, untouched).
std::string CorruptedCopy(const std::string& path) {
  std::string bytes = ReadAll(path);
  auto table = embedding::Table::Open(path);
  EXPECT_TRUE(table.ok());
  // The lowest bit of a word: an answer is then off by the server's key output at row 100 times 1,
  // which is 0 mod 2^32 only with probability 2^-32 (a higher bit 2^b would hide the damage
  // whenever that output is a multiple of 2^(32-b)).
  bytes[sizeof(embedding::TableHeader) + 100 * (*table)->stride_words() * 4] ^= 0x01;
  const std::string copy = testing::TempPath("corrupted.veil");
  WriteAll(copy, bytes);
  return copy;
}

absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartServer(
    int party, const std::string& table, std::vector<std::string> args = {}) {
  tools::ServerProcessOptions o;
  o.binary = VEIL_SERVER_BINARY;
  o.party = party;
  o.table_path = table;
  o.extra_args = std::move(args);
  o.log_path = testing::TempPath("server.log");
  return tools::ServerProcess::Start(o);
}

client::ClientOptions Options(const std::string& s0, const std::string& s1,
                              const std::string& key_file = "") {
  client::ClientOptions o;
  o.server0 = s0;
  o.server1 = s1;
  o.row_key_file = key_file;
  return o;
}

TEST(IntegrityTest, AServerRefusesATableThatDoesNotMatchItsDigest) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, kRows, kDim, 1);
  ASSERT_TRUE(table.ok());
  auto refused = StartServer(1, CorruptedCopy(*table));
  ASSERT_FALSE(refused.ok());
  // A changed format byte is refused the same way (the digest covers the header).
  std::string bytes = ReadAll(*table);
  bytes[52] = static_cast<char>(embedding::RowFormat::kFixed32);
  const std::string reformatted = testing::TempPath("reformatted.veil");
  WriteAll(reformatted, bytes);
  EXPECT_FALSE(StartServer(0, reformatted).ok());
}

TEST(IntegrityTest, AFifoAsTableIsRefusedWithoutHanging) {
  const std::string fifo = testing::TempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto server = StartServer(0, fifo);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("exited"));
}

TEST(IntegrityTest, ServedRowsSurviveTheFileBeingOverwrittenAndTruncated) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, kRows, kDim, 2);
  ASSERT_TRUE(table.ok());
  auto servers = testing::StartTwoServers(*table, *table);
  ASSERT_TRUE(servers.ok()) << servers.status();
  auto expected = embedding::Table::Load(*table, {});
  ASSERT_TRUE(expected.ok());
  auto client = client::Client::Connect(Options(servers->address(0), servers->address(1)));
  ASSERT_TRUE(client.ok()) << client.status();
  std::string bytes = ReadAll(*table);
  std::fill(bytes.begin() + 128, bytes.end(), '\x7f');
  WriteAll(*table, bytes);
  ASSERT_EQ(truncate(table->c_str(), 200), 0);
  for (uint64_t row : {uint64_t{0}, uint64_t{150}, kRows - 1}) {
    auto words = (*client)->LookupWords({row});
    ASSERT_TRUE(words.ok()) << words.status();
    auto want = (*expected)->row(row);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), words->begin(), words->end())) << row;
  }
}

TEST(IntegrityTest, TaggedRowsTurnAWrongShareIntoAnErrorNamingThePair) {
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = testing::TempPath("t.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  auto table = testing::WriteRandomTable("tagged.veil", embedding::RowFormat::kFp32, kRows, kDim, 3,
                                         1, &key);
  ASSERT_TRUE(table.ok());
  // Party 1 serves a corrupted copy, its digest check turned off (an operator mistake, or a
  // malicious server): every share it returns is wrong by the flipped row's contribution.
  auto good = StartServer(0, *table);
  auto bad = StartServer(1, CorruptedCopy(*table), {"--verify_table=false"});
  ASSERT_TRUE(good.ok() && bad.ok());
  auto client = client::Client::Connect(Options((*good)->address(), (*bad)->address(), key_file));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().row_tag, embedding::RowTag::kSipHash64Shape);
  EXPECT_EQ((*client)->table().row_words, kDim);
  for (uint64_t row : {uint64_t{7}, uint64_t{100}, uint64_t{299}}) {
    auto words = (*client)->LookupWords({row});
    ASSERT_FALSE(words.ok()) << "row " << row << " came back wrong instead of failing";
    EXPECT_TRUE(absl::IsDataLoss(words.status())) << words.status();
    EXPECT_THAT(words.status().message(),
                HasSubstr("servers 0 (" + (*good)->address() + ") and 1 (" + (*bad)->address()));
  }
  // The same client against two honest servers gets every row, tags checked and stripped.
  auto honest = StartServer(1, *table);
  ASSERT_TRUE(honest.ok());
  auto checked =
      client::Client::Connect(Options((*good)->address(), (*honest)->address(), key_file));
  ASSERT_TRUE(checked.ok()) << checked.status();
  auto words = (*checked)->Lookup({5, 100, 299});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(words->size(), 3 * kDim);
  // Without the key the client refuses the tagged table rather than skip the check.
  auto keyless = client::Client::Connect(Options((*good)->address(), (*honest)->address()));
  ASSERT_FALSE(keyless.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(keyless.status()));
  EXPECT_THAT(keyless.status().message(), HasSubstr("row_key_file"));
}

// A fixed-point table tagged with the parameter's kind, its key file, and three servers: party 0,
// an honest party 1, and a party 1 answering from a copy with one flipped bit.
class TaggedTableTest : public ::testing::TestWithParam<embedding::RowTag> {
 protected:
  void SetUp() override {
    const embedding::RowKey key = embedding::NewRowKey();
    key_file_ = testing::TempPath("tagged.rowkey");
    ASSERT_TRUE(embedding::WriteRowKeyFile(key_file_, key).ok());
    auto path = testing::WriteRandomTable("tagged.veil", embedding::RowFormat::kFixed32, kRows,
                                          kDim, 4, 1, &key, GetParam());
    ASSERT_TRUE(path.ok());
    auto opened = embedding::Table::Open(*path);
    ASSERT_TRUE(opened.ok());
    table_ = *std::move(opened);
    auto good = StartServer(0, *path);
    auto honest = StartServer(1, *path);
    auto bad = StartServer(1, CorruptedCopy(*path), {"--verify_table=false"});
    ASSERT_TRUE(good.ok() && honest.ok() && bad.ok());
    good_ = *std::move(good);
    honest_ = *std::move(honest);
    bad_ = *std::move(bad);
  }

  std::unique_ptr<client::Client> Connect(const tools::ServerProcess& party1) {
    auto client = client::Client::Connect(Options(good_->address(), party1.address(), key_file_));
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ((*client)->table().row_tag, GetParam());
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string key_file_;
  std::unique_ptr<embedding::Table> table_;
  std::unique_ptr<tools::ServerProcess> good_, honest_, bad_;
};

TEST_P(TaggedTableTest, RowsAreCheckedAndACorruptedServersRowsRefused) {
  auto checked = Connect(*honest_);
  ASSERT_NE(checked, nullptr);
  auto words = checked->LookupWords({100, 0});
  ASSERT_TRUE(words.ok()) << words.status();
  for (uint64_t i = 0; i < 2; ++i) {
    const auto row = table_->row(i == 0 ? 100 : 0).first(kDim);
    EXPECT_EQ(std::vector<uint32_t>(words->begin() + i * kDim, words->begin() + (i + 1) * kDim),
              std::vector<uint32_t>(row.begin(), row.end()));
  }
  auto client = Connect(*bad_);
  ASSERT_NE(client, nullptr);
  for (uint64_t row : {uint64_t{7}, uint64_t{100}}) {
    auto wrong = client->LookupWords({row});
    ASSERT_FALSE(wrong.ok()) << "row " << row << " came back wrong instead of failing";
    EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  }
}

TEST_P(TaggedTableTest, PooledSumsAreCheckedRowByRow) {
  const std::vector<uint64_t> indices = {3, 100, 3, 250, 7};
  const std::vector<uint32_t> bags = {2, 3};
  const std::vector<int32_t> weights = {2, -1, 5, 1, -7};
  // The sums the servers would make of the rows (mod 2^32), computed from the file.
  std::vector<uint32_t> expected(bags.size() * kDim, 0);
  for (size_t i = 0, b = 0, left = bags[0]; i < indices.size(); ++i, --left) {
    if (left == 0) left = bags[++b];
    for (uint32_t w = 0; w < kDim; ++w) {
      expected[b * kDim + w] += static_cast<uint32_t>(weights[i]) * table_->row(indices[i])[w];
    }
  }
  auto checked = Connect(*honest_);
  ASSERT_NE(checked, nullptr);
  auto sums = checked->LookupPooledWords(indices, bags, weights);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, expected);
  EXPECT_EQ(checked->last_call().lookups, bags.size());
  // Each key came back as its row, padding included (32 keys per bag by default).
  auto stats = checked->ServerStats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->keys, 2 * 32);
  // A server answering from a flipped bit shifts every share: no sum comes back.
  auto client = Connect(*bad_);
  ASSERT_NE(client, nullptr);
  auto wrong = client->LookupPooled(indices, bags, weights, client::PoolingMode::kSum);
  ASSERT_FALSE(wrong.ok()) << "a pooled sum came back from a corrupted table";
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("servers 0 (" + good_->address() + ") and 1 (" + bad_->address()));
}

// With a failure latch, the first row that fails its tag stops every client given the latch (this
// one, a new one, one of honest servers) until the file is removed: a server that made the
// failure depend on the row asked for learns one bit per installation.
TEST_P(TaggedTableTest, AFailedRowTripsTheLatchForEveryClient) {
  const std::string latch = testing::TempPath("dpf2.latch");
  client::ClientOptions o = Options(good_->address(), bad_->address(), key_file_);
  o.failure_latch_file = latch;
  auto client = client::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto wrong = (*client)->LookupWords({7});
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  EXPECT_THAT(wrong.status().message(), HasSubstr("lookups stop until " + latch + " is removed"));
  auto again = (*client)->LookupWords({8});
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("row 7 fails its authentication tag"));
  client::ClientOptions honest = Options(good_->address(), honest_->address(), key_file_);
  honest.failure_latch_file = latch;
  auto refused = client::Client::Connect(honest);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("the failure latch " + latch));
  // Removed, the honest pair serves again.
  ASSERT_EQ(std::remove(latch.c_str()), 0);
  auto served = client::Client::Connect(honest);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_TRUE((*served)->LookupWords({8}).ok());
}

// Kind 3 (SipHash, the default) and kind 4 (the linear MAC bfv-bag pools).
INSTANTIATE_TEST_SUITE_P(Kinds, TaggedTableTest,
                         ::testing::Values(embedding::RowTag::kSipHash64Shape,
                                           embedding::RowTag::kLinearMac61),
                         [](const ::testing::TestParamInfo<embedding::RowTag>& info) {
                           return info.param == embedding::RowTag::kLinearMac61 ? "LinearMac"
                                                                                : "SipHash";
                         });

TEST(IntegrityTest, AnOlderVersionRelabelledAsNewerFailsItsTags) {
  // Both servers pass epoch 1's rows off as epoch 2 to a client that accepts only epoch 2 or newer
  // (it knows the current epoch): the tags cover the epoch, so no row comes back.
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = testing::TempPath("relabel.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  auto v1 = testing::WriteRandomTable("v1.veil", embedding::RowFormat::kFp32, kRows, kDim, 5,
                                      /*epoch=*/1, &key);
  ASSERT_TRUE(v1.ok()) << v1.status();
  const std::string relabelled =
      testing::RewriteTable(*v1, "relabelled.veil", 2, embedding::RowTag::kSipHash64Shape, nullptr);
  ASSERT_TRUE(embedding::Table::Load(relabelled, {}).ok()) << "the relabelled file is well-formed";
  auto a = StartServer(0, relabelled);
  auto b = StartServer(1, relabelled);
  ASSERT_TRUE(a.ok() && b.ok());
  client::ClientOptions options = Options((*a)->address(), (*b)->address(), key_file);
  options.min_epoch = 2;
  auto client = client::Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().epoch, 2u);
  for (uint64_t row : {uint64_t{0}, uint64_t{123}}) {
    auto words = (*client)->LookupWords({row});
    ASSERT_FALSE(words.ok()) << "epoch 1's row " << row << " came back as epoch 2's";
    EXPECT_TRUE(absl::IsDataLoss(words.status())) << words.status();
    EXPECT_THAT(words.status().message(), HasSubstr("row of the table's epoch 2"));
  }
  // The same file served as what it is (epoch 1) gives its rows to a client that accepts it.
  auto honest0 = StartServer(0, *v1);
  auto honest1 = StartServer(1, *v1);
  ASSERT_TRUE(honest0.ok() && honest1.ok());
  options = Options((*honest0)->address(), (*honest1)->address(), key_file);
  options.min_epoch = 1;
  auto reader = client::Client::Connect(options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto expected = embedding::Table::Load(*v1, {});
  ASSERT_TRUE(expected.ok());
  auto words = (*reader)->LookupWords({123});
  ASSERT_TRUE(words.ok()) << words.status();
  auto want = (*expected)->row(123).first(kDim);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), words->begin(), words->end()));
}

TEST(IntegrityTest, TagsWithoutTheEpochAreCheckedButCannotEnforceMinEpoch) {
  // A table tagged by an older veil table build (kSipHash64: index and data only) still serves
  // and its rows are still checked, but a client with min_epoch refuses it: a relabelled older
  // version would pass those tags.
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = testing::TempPath("legacy.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  auto built = testing::WriteRandomTable("legacy-src.veil", embedding::RowFormat::kFp32, kRows,
                                         kDim, 6, /*epoch=*/3, &key);
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string legacy =
      testing::RewriteTable(*built, "legacy.veil", 3, embedding::RowTag::kSipHash64, &key);
  auto a = StartServer(0, legacy);
  auto b = StartServer(1, legacy);
  ASSERT_TRUE(a.ok() && b.ok());
  auto client = client::Client::Connect(Options((*a)->address(), (*b)->address(), key_file));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().row_tag, embedding::RowTag::kSipHash64);
  auto expected = embedding::Table::Load(*built, {});
  ASSERT_TRUE(expected.ok());
  auto words = (*client)->LookupWords({4, 200});
  ASSERT_TRUE(words.ok()) << words.status();
  for (size_t i = 0; i < 2; ++i) {
    auto want = (*expected)->row(i == 0 ? 4 : 200).first(kDim);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), words->begin() + i * kDim));
  }

  client::ClientOptions options = Options((*a)->address(), (*b)->address(), key_file);
  options.min_epoch = 3;
  auto strict = client::Client::Connect(options);
  ASSERT_FALSE(strict.ok()) << "min_epoch accepted over tags that do not cover the epoch";
  EXPECT_TRUE(absl::IsFailedPrecondition(strict.status())) << strict.status();
  EXPECT_THAT(strict.status().message(), HasSubstr("do not cover its epoch"));
}

TEST(IntegrityTest, AClientHoldingARowKeyRefusesServersOfAnUntaggedTable) {
  // Malicious servers answering from another table could else switch the tag check off by
  // serving it untagged: the client that holds the key expects tags and gets no row unchecked.
  const std::string key_file = testing::TempPath("untagged.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, embedding::NewRowKey()).ok());
  auto table =
      testing::WriteRandomTable("untagged.veil", embedding::RowFormat::kFp32, kRows, kDim, 4);
  ASSERT_TRUE(table.ok()) << table.status();
  auto a = StartServer(0, *table);
  auto b = StartServer(1, *table);
  ASSERT_TRUE(a.ok() && b.ok());
  auto client = client::Client::Connect(Options((*a)->address(), (*b)->address(), key_file));
  ASSERT_FALSE(client.ok()) << "a keyed client read an untagged table";
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("no row authentication tags"));
  // Without a key the same table serves.
  auto keyless = client::Client::Connect(Options((*a)->address(), (*b)->address()));
  ASSERT_TRUE(keyless.ok()) << keyless.status();
  EXPECT_TRUE((*keyless)->Lookup({1, 2}).ok());
}

}  // namespace
}  // namespace veil
