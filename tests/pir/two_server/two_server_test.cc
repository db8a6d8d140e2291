// The two-server protocol through the Backend interface: each server answers its key, the client
// adds the shares and gets the row (or the weighted sum of rows for a pooled bag).
#include <random>

#include "gtest/gtest.h"
#include "pir/two_server/backend.h"
#include "pir/two_server/query.h"

namespace veil::pir {
namespace {

TEST(TwoServerTest, BatchOfQueriesReconstructsRows) {
  std::mt19937_64 gen(21);
  const uint64_t rows = 3001;
  const uint32_t words = 16;
  std::vector<uint32_t> data(rows * words);
  for (auto& w : data) w = static_cast<uint32_t>(gen());
  dpf::TableView table{data.data(), rows, words, 0};
  auto server0 = CreateCpuBackend(table, 1);
  auto server1 = CreateCpuBackend(table, 2);
  ASSERT_TRUE(server0.ok() && server1.ok());
  for (dpf::OutputType output : {dpf::OutputType::kAdditive, dpf::OutputType::kXor}) {
    std::vector<QueryKeys> queries;
    std::vector<uint64_t> wanted;
    for (int i = 0; i < 10; ++i) {
      wanted.push_back(gen() % rows);
      queries.push_back(*MakeQuery(rows, wanted.back(), 1, dpf::Prg::kAes128, output));
    }
    std::vector<const dpf::DpfKey*> k0, k1;
    for (const QueryKeys& q : queries) {
      k0.push_back(&q.key[0]);
      k1.push_back(&q.key[1]);
    }
    std::vector<uint32_t> a0(10 * words), a1(10 * words), row(words);
    ASSERT_TRUE((*server0)->Answer(k0, absl::MakeSpan(a0)).ok());
    ASSERT_TRUE((*server1)->Answer(k1, absl::MakeSpan(a1)).ok());
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(Reconstruct(output, absl::MakeConstSpan(a0).subspan(i * words, words),
                              absl::MakeConstSpan(a1).subspan(i * words, words),
                              absl::MakeSpan(row))
                      .ok());
      EXPECT_EQ(row, std::vector<uint32_t>(data.begin() + wanted[i] * words,
                                           data.begin() + (wanted[i] + 1) * words));
    }
  }
}

TEST(TwoServerTest, WeightedKeysSumToThePooledRow) {
  const uint64_t rows = 100;
  std::vector<uint32_t> data(rows * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);
  dpf::TableView table{data.data(), rows, 4, 0};
  auto backend = CreateCpuBackend(table, 1);
  const uint64_t bag[3] = {3, 50, 99};
  const uint32_t weight[3] = {1, 2, 0xffffffffu};  // -1 mod 2^32
  std::vector<uint32_t> sum0(4, 0), sum1(4, 0), share(4);
  for (int i = 0; i < 3; ++i) {
    auto q = MakeQuery(rows, bag[i], weight[i]);
    ASSERT_TRUE(q.ok());
    for (int b = 0; b < 2; ++b) {
      const dpf::DpfKey* k[1] = {&q->key[b]};
      ASSERT_TRUE((*backend)->Answer(k, absl::MakeSpan(share)).ok());
      for (int j = 0; j < 4; ++j) (b ? sum1 : sum0)[j] += share[j];
    }
  }
  for (int j = 0; j < 4; ++j) {
    uint32_t want = 0;
    for (int i = 0; i < 3; ++i) want += weight[i] * data[bag[i] * 4 + j];
    EXPECT_EQ(sum0[j] + sum1[j], want);
  }
}

TEST(TwoServerTest, RejectsBadInput) {
  std::vector<uint32_t> data(10 * 2);
  dpf::TableView table{data.data(), 10, 2, 0};
  EXPECT_EQ(MakeQuery(10, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCpuBackend(table, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCpuBackend({}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto backend = CreateCpuBackend(table, 1);
  auto wrong = MakeQuery(1000, 5, 1);  // a key for a larger table
  const dpf::DpfKey* k[1] = {&wrong->key[0]};
  std::vector<uint32_t> out(2);
  absl::Status s = (*backend)->Answer(k, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not fit a table of 10 rows"), std::string::npos) << s;
  std::vector<uint32_t> a(2), b(3);
  EXPECT_FALSE(Reconstruct(dpf::OutputType::kAdditive, a, b, absl::MakeSpan(a)).ok());
}

}  // namespace
}  // namespace veil::pir
