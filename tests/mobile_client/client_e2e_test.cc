// veil::client::Client against two real veil-server processes on loopback.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"

namespace veil::client {
namespace {

using ::testing::HasSubstr;

ClientOptions OptionsFor(const testing::TwoServers& servers,
                         absl::Duration timeout = absl::Seconds(5)) {
  ClientOptions options;
  options.server0 = servers.address(0);
  options.server1 = servers.address(1);
  options.timeout = timeout;
  return options;
}

std::vector<uint64_t> RandomRows(uint64_t rows, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out = {0, rows - 1};
  while (out.size() < n) out.push_back(rng() % rows);
  return out;
}

struct FormatCase {
  embedding::RowFormat format;
  uint64_t rows;
  uint32_t dim;
};

class LookupFormatTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(LookupFormatTest, RandomLookupsAreBitExact) {
  const FormatCase c = GetParam();
  const uint64_t seed = std::random_device()();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  auto path = testing::WriteRandomTable("fmt.veil", c.format, c.rows, c.dim, seed);
  ASSERT_TRUE(path.ok()) << path.status();
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto servers = testing::StartTwoServers(*path, *path);
  ASSERT_TRUE(servers.ok()) << servers.status();
  auto client = Client::Connect(OptionsFor(*servers));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->table().rows, c.rows);
  EXPECT_EQ((*client)->table().format, c.format);
  EXPECT_EQ((*client)->table().digest_hex, (*table)->DigestHex());

  std::vector<uint64_t> rows = RandomRows(c.rows, 41, seed);
  auto words = (*client)->LookupWords(rows);
  ASSERT_TRUE(words.ok()) << words.status();
  const uint32_t w = (*table)->row_words();
  for (size_t i = 0; i < rows.size(); ++i) {
    auto plain = (*table)->row(rows[i]);
    ASSERT_TRUE(std::equal(plain.begin(), plain.end(), words->begin() + i * w))
        << "row " << rows[i];
  }
  auto values = (*client)->Lookup(rows);
  ASSERT_TRUE(values.ok()) << values.status();
  std::vector<float> expected(c.dim);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE((*table)->DecodeRow(rows[i], absl::MakeSpan(expected)).ok());
    ASSERT_EQ(std::memcmp(expected.data(), values->data() + i * c.dim, c.dim * sizeof(float)), 0)
        << "row " << rows[i];
  }
  CallStats stats = (*client)->last_call();
  EXPECT_EQ(stats.lookups, rows.size());
  EXPECT_EQ(stats.keys, rows.size());
  EXPECT_GT(stats.bytes_up, 0u);
  EXPECT_GE(stats.bytes_down, 2 * rows.size() * w * 4);
  EXPECT_GT(stats.latency_ms, 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, LookupFormatTest,
                         ::testing::Values(FormatCase{embedding::RowFormat::kFp32, 1000, 16},
                                           FormatCase{embedding::RowFormat::kFp16, 777, 33},
                                           FormatCase{embedding::RowFormat::kInt8RowWise, 1, 20},
                                           FormatCase{embedding::RowFormat::kFixed32, 4097, 5}),
                         [](const auto& info) {
                           return embedding::RowFormatName(info.param.format);
                         });

class TwoServerTest : public ::testing::Test {
 protected:
  void Start(embedding::RowFormat format, uint64_t rows, uint32_t dim,
             const std::vector<std::string>& extra_args = {}) {
    auto path = testing::WriteRandomTable("t.veil", format, rows, dim, 11);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
    auto servers = testing::StartTwoServers(*path, *path, extra_args);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = *std::move(servers);
  }

  std::unique_ptr<embedding::Table> table_;
  testing::TwoServers servers_;
};

TEST_F(TwoServerTest, PooledSumsAreExactForFixedPointRows) {
  Start(embedding::RowFormat::kFixed32, 500, 7);
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 rng(3);
  std::vector<uint64_t> indices;
  std::vector<uint32_t> bags = {1, 4, 9, 2, 30};
  std::vector<int32_t> weights;
  for (uint32_t size : bags) {
    for (uint32_t k = 0; k < size; ++k) {
      indices.push_back(rng() % 500);
      weights.push_back(static_cast<int32_t>(rng() % 7) - 3);
    }
  }
  auto sums = (*client)->LookupPooledWords(indices, bags, weights);
  ASSERT_TRUE(sums.ok()) << sums.status();
  size_t next = 0;
  for (size_t b = 0; b < bags.size(); ++b) {
    for (uint32_t j = 0; j < 7; ++j) {
      uint32_t expected = 0;
      for (uint32_t k = 0; k < bags[b]; ++k) {
        expected += static_cast<uint32_t>(weights[next + k]) * table_->row(indices[next + k])[j];
      }
      EXPECT_EQ((*sums)[b * 7 + j], expected) << "bag " << b << " word " << j;
    }
    next += bags[b];
  }
  CallStats stats = (*client)->last_call();
  EXPECT_EQ(stats.lookups, bags.size());
  // One summed row per bag and server comes back, not one per key.
  EXPECT_LT(stats.bytes_down, 2 * (bags.size() * 7 * 4 + 400));

  // Mean without weights: the decoded sum divided by the bag size.
  auto means = (*client)->LookupPooled(indices, bags, {}, PoolingMode::kMean);
  ASSERT_TRUE(means.ok()) << means.status();
  auto plain_sums = (*client)->LookupPooledWords(indices, bags, {});
  ASSERT_TRUE(plain_sums.ok());
  std::vector<float> expected(7);
  for (size_t b = 0; b < bags.size(); ++b) {
    ASSERT_TRUE(embedding::DecodePooledFixed(16, absl::MakeConstSpan(plain_sums->data() + b * 7, 7),
                                             bags[b], absl::MakeSpan(expected))
                    .ok());
    for (int j = 0; j < 7; ++j) EXPECT_EQ((*means)[b * 7 + j], expected[j]);
  }
}

TEST_F(TwoServerTest, PaddedBagsGiveTheSameSumsAndHideBagSizes) {
  Start(embedding::RowFormat::kFixed32, 100, 3);
  ClientOptions options = OptionsFor(servers_);
  auto padded_by_default = Client::Connect(options);
  options.pad_bags_to = 0;
  auto plain = Client::Connect(options);
  options.pad_bags_to = 6;
  auto padded = Client::Connect(options);
  ASSERT_TRUE(plain.ok() && padded.ok());
  std::vector<uint64_t> indices = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint32_t> bags = {1, 6, 1};
  std::vector<int32_t> weights = {1, 2, 3, 4, 5, 6, 7, -8};
  auto a = (*plain)->LookupPooledWords(indices, bags, weights);
  auto b = (*padded)->LookupPooledWords(indices, bags, weights);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*padded)->last_call().keys, 18u);  // 3 bags x 6 keys, whatever their sizes
  EXPECT_EQ((*plain)->last_call().keys, 8u);
  auto too_big = (*padded)->LookupPooledWords({1, 2, 3, 4, 5, 6, 7}, {7}, {});
  EXPECT_TRUE(absl::IsInvalidArgument(too_big.status())) << too_big.status();
  EXPECT_THAT(too_big.status().message(), HasSubstr("more than the padded bag size (6"));
  // By default every bag is 32 keys.
  ASSERT_TRUE(padded_by_default.ok());
  auto c = (*padded_by_default)->LookupPooledWords(indices, bags, weights);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, *a);
  EXPECT_EQ((*padded_by_default)->last_call().keys, 96u);
}

TEST_F(TwoServerTest, PooledNeedsAFixedPointTable) {
  Start(embedding::RowFormat::kFp32, 50, 4);
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok());
  auto r = (*client)->LookupPooled({1, 2}, {2}, {}, PoolingMode::kSum);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("fixed-point"));
}

TEST_F(TwoServerTest, BadArgumentsAreRejectedLocally) {
  Start(embedding::RowFormat::kFixed32, 50, 4);
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->Lookup({}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->Lookup({50}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*client)->LookupPooled({1}, {2}, {}, PoolingMode::kSum).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*client)->LookupPooled({1}, {0, 1}, {}, PoolingMode::kSum).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*client)->LookupPooled({1, 2}, {2}, {1, -1}, PoolingMode::kMean).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->ServerStats(2).status()));
}

TEST_F(TwoServerTest, LargeLookupsAreSplitAtTheServersLimits) {
  // 4 keys per call and 8 waiting per connection: 30 rows go out as 8 calls in waves of 2.
  Start(embedding::RowFormat::kFp32, 64, 3,
        {"--max_keys_per_call=4", "--max_queued_keys_per_connection=8"});
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->table().max_keys_per_call, 4u);
  std::vector<uint64_t> rows = RandomRows(64, 30, 5);
  auto words = (*client)->LookupWords(rows);
  ASSERT_TRUE(words.ok()) << words.status();
  for (size_t i = 0; i < rows.size(); ++i) {
    auto plain = table_->row(rows[i]);
    EXPECT_TRUE(std::equal(plain.begin(), plain.end(), words->begin() + i * 3));
  }
  EXPECT_EQ((*client)->last_call().calls, 8u);
  auto stats = (*client)->ServerStats(0);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->errors, 0u);
}

TEST_F(TwoServerTest, RangeLookupsAreBitExactAndUploadFollowsTheRange) {
  constexpr uint64_t kRows = 2048;
  constexpr uint32_t kDim = 8;
  Start(embedding::RowFormat::kFp32, kRows, kDim);
  for (dpf::OutputType output : {dpf::OutputType::kAdditive, dpf::OutputType::kXor}) {
    ClientOptions options = OptionsFor(servers_);
    options.output = output;
    auto client = Client::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE((*client)->table().range_queries);

    // Bins of 32 rows (and odd sizes, and the whole table) mixed in one lookup.
    std::mt19937_64 rng(5);
    std::vector<uint64_t> indices;
    std::vector<RowRange> ranges;
    for (int i = 0; i < 40; ++i) {
      const uint64_t rows = i % 10 == 9 ? kRows : (i % 3 == 0 ? 29 : 32);
      const uint64_t first = rows == kRows ? 0 : rng() % (kRows - rows + 1);
      ranges.push_back(RowRange{first, rows});
      indices.push_back(i == 0 ? rows - 1 : rng() % rows);
    }
    auto words = (*client)->LookupWordsInRanges(indices, ranges);
    ASSERT_TRUE(words.ok()) << words.status();
    for (size_t i = 0; i < indices.size(); ++i) {
      auto plain = table_->row(ranges[i].first_row + indices[i]);
      ASSERT_TRUE(std::equal(plain.begin(), plain.end(), words->begin() + i * kDim))
          << "key " << i;
    }
    auto values = (*client)->LookupInRanges(indices, ranges);
    ASSERT_TRUE(values.ok()) << values.status();
    std::vector<float> expected(kDim);
    ASSERT_TRUE(table_->DecodeRow(ranges[5].first_row + indices[5], absl::MakeSpan(expected)).ok());
    EXPECT_EQ(std::memcmp(expected.data(), values->data() + 5 * kDim, sizeof(float) * kDim), 0);

    // The same number of keys over 32-row ranges uploads less than over the whole table.
    std::vector<uint64_t> in_bin(32), whole(32);
    std::vector<RowRange> bins(32);
    for (uint64_t i = 0; i < 32; ++i) {
      bins[i] = RowRange{i * 64, 32};
      in_bin[i] = (i * 7) % 32;
      whole[i] = bins[i].first_row + in_bin[i];
    }
    auto ranged = (*client)->LookupWordsInRanges(in_bin, bins);
    ASSERT_TRUE(ranged.ok()) << ranged.status();
    const uint64_t ranged_up = (*client)->last_call().bytes_up;
    auto plain = (*client)->LookupWords(whole);
    ASSERT_TRUE(plain.ok()) << plain.status();
    const uint64_t whole_up = (*client)->last_call().bytes_up;
    EXPECT_EQ(*ranged, *plain);
    EXPECT_LT(ranged_up, whole_up);
  }

  // Bad arguments are refused before anything is sent.
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*client)->LookupWordsInRanges({0}, {RowRange{kRows, 1}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*client)->LookupWordsInRanges({0}, {RowRange{kRows - 1, 2}}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*client)->LookupWordsInRanges({0}, {RowRange{5, 0}}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*client)->LookupWordsInRanges({32}, {RowRange{0, 32}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->LookupWordsInRanges({0, 1}, {RowRange{0, 32}})
                                          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->LookupWordsInRanges({}, {}).status()));
}

TEST_F(TwoServerTest, XorKeysAndOtherPrgsAreBitExact) {
  Start(embedding::RowFormat::kFp32, 300, 6, {"--prgs=aes128,chacha12,siphash"});
  for (auto [prg, output] : {std::pair{dpf::Prg::kAes128, dpf::OutputType::kXor},
                             std::pair{dpf::Prg::kChaCha12, dpf::OutputType::kAdditive},
                             std::pair{dpf::Prg::kSipHash, dpf::OutputType::kXor}}) {
    ClientOptions options = OptionsFor(servers_);
    options.prg = prg;
    options.output = output;
    auto client = Client::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    std::vector<uint64_t> rows = RandomRows(300, 9, 8);
    auto words = (*client)->LookupWords(rows);
    ASSERT_TRUE(words.ok()) << words.status();
    for (size_t i = 0; i < rows.size(); ++i) {
      auto plain = table_->row(rows[i]);
      EXPECT_TRUE(std::equal(plain.begin(), plain.end(), words->begin() + i * 6));
    }
  }
}

TEST_F(TwoServerTest, ServersRefuseSipHashUnlessAskedTo) {
  Start(embedding::RowFormat::kFp32, 50, 4);
  ClientOptions options = OptionsFor(servers_);
  options.prg = dpf::Prg::kSipHash;
  auto client = Client::Connect(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("does not evaluate PRG siphash"));
}

TEST_F(TwoServerTest, AKilledServerIsAClearErrorWithinTheTimeout) {
  Start(embedding::RowFormat::kFp32, 100, 4);
  auto client = Client::Connect(OptionsFor(servers_, absl::Seconds(2)));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Lookup({3}).ok());
  servers_.server[1]->Kill();
  absl::Time start = absl::Now();
  auto r = (*client)->Lookup({3});
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status()) || absl::IsDeadlineExceeded(r.status()))
      << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("server 1 (", servers_.address(1))));
  EXPECT_LT(took, absl::Seconds(3));
  // And it stays an error: never an answer from server 0 alone.
  EXPECT_FALSE((*client)->Lookup({4}).ok());
  // A new client cannot connect either.
  auto again = Client::Connect(OptionsFor(servers_, absl::Seconds(2)));
  EXPECT_TRUE(absl::IsUnavailable(again.status())) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("server 1"));
}

TEST_F(TwoServerTest, ARestartedServerIsUsedAgainOnlyWithTheSameTable) {
  auto path = testing::WriteRandomTable("r.veil", embedding::RowFormat::kFp32, 100, 4, 11);
  auto other = testing::WriteRandomTable("r2.veil", embedding::RowFormat::kFp32, 100, 4, 12);
  ASSERT_TRUE(path.ok() && other.ok());
  auto servers = testing::StartTwoServers(*path, *path);
  ASSERT_TRUE(servers.ok());
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto client = Client::Connect(OptionsFor(*servers, absl::Seconds(2)));
  ASSERT_TRUE(client.ok());
  const int port = servers->server[1]->port();
  auto restart = [&](const std::string& table_path) {
    servers->server[1]->Kill();
    tools::ServerProcessOptions o;
    o.binary = VEIL_SERVER_BINARY;
    o.party = 1;
    o.table_path = table_path;
    o.backend = "cpu";
    o.listen = absl::StrCat("127.0.0.1:", port);
    auto started = tools::ServerProcess::Start(o);
    ASSERT_TRUE(started.ok()) << started.status();
    servers->server[1] = *std::move(started);
  };

  restart(*path);
  // The call finds the old connection gone and goes again on a new one: the same table.
  auto words = (*client)->LookupWords({7});
  ASSERT_TRUE(words.ok()) << words.status();
  auto plain = (*table)->row(7);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), words->begin()));

  restart(*other);
  auto refused = (*client)->Lookup({7});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("came back serving another table"));
}

TEST_F(TwoServerTest, AHungServerTimesOut) {
  Start(embedding::RowFormat::kFp32, 100, 4);
  auto client = Client::Connect(OptionsFor(servers_, absl::Milliseconds(500)));
  ASSERT_TRUE(client.ok());
  kill(servers_.server[0]->pid(), SIGSTOP);
  absl::Time start = absl::Now();
  auto r = (*client)->Lookup({3});
  absl::Duration took = absl::Now() - start;
  kill(servers_.server[0]->pid(), SIGCONT);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr(absl::StrCat("no answer from server 0 (", servers_.address(0))));
  EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("server 1")));  // it did answer
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Milliseconds(1500));
}

TEST(ClientConnectTest, NobodyListeningIsUnavailable) {
  ClientOptions options;
  options.server0 = "127.0.0.1:1";
  options.server1 = "127.0.0.1:2";
  options.timeout = absl::Seconds(2);
  auto client = Client::Connect(options);
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("server 0 (127.0.0.1:1) is unreachable"));
  options.server1 = "";
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Connect(options).status()));
}

TEST(ClientConnectTest, ServersWithDifferentTablesAreRefused) {
  auto a = testing::WriteRandomTable("a.veil", embedding::RowFormat::kFp32, 100, 4, 1);
  auto b = testing::WriteRandomTable("b.veil", embedding::RowFormat::kFp32, 100, 4, 2);
  // Same contents, another epoch: also a different table version.
  auto a2 = testing::WriteRandomTable("a2.veil", embedding::RowFormat::kFp32, 100, 4, 1, 2);
  ASSERT_TRUE(a.ok() && b.ok() && a2.ok());
  for (const std::string& other : {*b, *a2}) {
    auto servers = testing::StartTwoServers(*a, other);
    ASSERT_TRUE(servers.ok()) << servers.status();
    auto client = Client::Connect(OptionsFor(*servers));
    EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
    EXPECT_THAT(client.status().message(), HasSubstr("the two servers serve different tables"));
  }
}

TEST(ClientConnectTest, SwappedPartiesAreRefused) {
  auto a = testing::WriteRandomTable("s.veil", embedding::RowFormat::kFp32, 10, 4, 1);
  ASSERT_TRUE(a.ok());
  auto servers = testing::StartTwoServers(*a, *a);
  ASSERT_TRUE(servers.ok());
  ClientOptions options;
  options.server0 = servers->address(1);
  options.server1 = servers->address(0);
  auto client = Client::Connect(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("is party 1, expected party 0"));
}

TEST_F(TwoServerTest, ManyConcurrentClientsGetCorrectRows) {
  Start(embedding::RowFormat::kFp16, 2000, 16);
  constexpr int kClients = 12;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Client::Connect(OptionsFor(servers_, absl::Seconds(30)));
      if (!client.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 15; ++i) {
        std::vector<uint64_t> rows = RandomRows(2000, 1 + (c + i) % 5, c * 100 + i);
        auto words = (*client)->LookupWords(rows);
        if (!words.ok()) {
          ++failures;
          continue;
        }
        for (size_t r = 0; r < rows.size(); ++r) {
          auto plain = table_->row(rows[r]);
          if (!std::equal(plain.begin(), plain.end(), words->begin() + r * plain.size())) {
            ++failures;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto client = Client::Connect(OptionsFor(servers_));
  ASSERT_TRUE(client.ok());
  auto stats = (*client)->ServerStats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->errors, 0u);
  EXPECT_GE(stats->calls, kClients * 15u);
}

}  // namespace
}  // namespace veil::client
