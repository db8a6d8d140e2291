// Double packing (pir/lattice/double_pack.h): ExpPack(S)'s packed ciphertexts folded by a second
// SimplePIR query and packed again. Records decode on shapes with several groups (straddling
// records: a window of two; aligned ones through a padded count of starts) on a ring of
// N = 1,024 (no security claim; several groups stay small); sizes; the noise rule; bad input.
#include "pir/lattice/double_pack.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "pir/lattice/expansion.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

struct DoublePackFixture {
  DoublePackFixture(uint64_t rows, uint32_t record_bytes, uint64_t per_column, uint64_t salt,
                    int threads) {
    std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + salt);
    records = testing::RandomRecords(rows, record_bytes, gen);
    LweServerOptions options;
    options.shape.records_per_column = per_column;
    options.threads = threads;
    server = *DoublePackedServer::Create(
        *LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(salt), options),
        testing::SmallRing());
    client = *DoublePackedClient::Create(server->config(), testing::SmallRing());
    keys = *server->ParseKeys(client->expansion_keys());
  }
  std::vector<uint8_t> Record(uint64_t row) const {
    const uint32_t r = server->config().shape.record_bytes;
    return {records.begin() + row * r, records.begin() + (row + 1) * r};
  }
  void ExpectRowsDecode(const std::vector<uint64_t>& rows) const {
    std::vector<PackedQuery> queries;
    std::vector<PackedRequest> requests;
    for (uint64_t row : rows) queries.push_back(*client->MakeQuery(row));
    for (const PackedQuery& q : queries) {
      EXPECT_EQ(q.query.size(), server->query_words());
      EXPECT_EQ(q.ciphertext.size(), 2 * SecretCiphertextBytes(client->ring()));
      requests.push_back({q.query, q.ciphertext, &keys, {}});
    }
    const auto responses = server->AnswerBatch(requests);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_TRUE(responses[i].ok()) << responses[i].status();
      EXPECT_EQ(responses[i]->size(), server->response_bytes());
      std::vector<uint8_t> record(server->config().shape.record_bytes);
      ASSERT_TRUE(client->Decode(queries[i], *responses[i], absl::MakeSpan(record)).ok());
      EXPECT_EQ(record, Record(rows[i])) << "row " << rows[i];
    }
  }
  std::vector<uint8_t> records;
  std::unique_ptr<DoublePackedServer> server;
  std::unique_ptr<DoublePackedClient> client;
  he::GaloisKeys keys;
};

TEST(DoublePackTest, TheSecondFoldsShape) {
  const RingContext ring = *RingContext::Create(RingParams::Default());
  Shape shape;
  shape.record_bytes = 64;
  shape.d1 = 6 * 4096;  // 2^24 x 64 B's packed shape: six ciphertexts, records aligned
  const DoublePackShape s = DoublePackShapeFor(ring, shape);
  EXPECT_EQ(s.window.window, 1u);
  EXPECT_EQ(s.columns, 6u);
  EXPECT_EQ(s.rows, 8u * 4096);  // 2N residues x 4 digits
  EXPECT_EQ(s.response_bytes, 8u * 32768);
  shape.record_bytes = 100;
  shape.d1 = 46 * 4096;
  const DoublePackShape straddling = DoublePackShapeFor(ring, shape);
  EXPECT_EQ(straddling.window.window, 2u);
  EXPECT_EQ(straddling.columns, 45u);
  EXPECT_EQ(straddling.response_bytes, 16u * 32768);
}

TEST(DoublePackTest, StraddlingRecordsDecodeFromTheirWindow) {
  // 900 records of 100 bytes, 50 per column: D1 = 5,000, 5 groups of N = 1,024, a window of 2
  // (4 starts): 16 ciphertexts down. Two workers for three queries in one batch, then for one
  // query's second expansion.
  DoublePackFixture f(900, 100, 50, 500, 2);
  const uint64_t d0 = f.server->config().shape.d0;
  EXPECT_EQ(f.server->response_bytes(), 16u * 8 * 1024);
  EXPECT_EQ(f.server->query_words(), d0 + 4);
  f.ExpectRowsDecode({10 * d0 + 3, 49 * d0 + 5, 0});
  f.ExpectRowsDecode({30 * d0 + 1});
}

TEST(DoublePackTest, AlignedRecordsDecode) {
  // 16-byte records, 160 per column: D1 = 2,560, 3 groups, a window of 1: 8 ciphertexts down.
  DoublePackFixture f(1000, 16, 160, 501, 1);
  EXPECT_EQ(f.server->response_bytes(), 8u * 8 * 1024);
  f.ExpectRowsDecode({999, 64 * f.server->config().shape.d0 + 1});
}

TEST(DoublePackTest, TheNoiseRuleHoldsAtTheDefaultsAndFailsWithTooLittleModulus) {
  const RingContext ring = *RingContext::Create(RingParams::Default());
  // Up to G = 64 columns (2^30 x 64 B needs ~46) at the default ring.
  EXPECT_TRUE(DoublePackNoiseWithinRule(ring, 64));
  EXPECT_LT(DoublePackNoiseBound(ring, 1).sigma, DoublePackNoiseBound(ring, 64).sigma);
  const RingContext small =
      *RingContext::Create(*RingParams::Create(12, {8380417, 8273921, 8257537}, 40961));
  EXPECT_FALSE(DoublePackNoiseWithinRule(small, 6));
}

TEST(DoublePackTest, BadRequestsFailAlone) {
  DoublePackFixture f(300, 16, 100, 502, 1);
  const PackedQuery good = *f.client->MakeQuery(7);
  const std::vector<PackedRequest> requests = {
      {absl::MakeConstSpan(good.query).first(good.query.size() - 1), good.ciphertext, &f.keys, {}},
      {good.query,
       absl::MakeConstSpan(good.ciphertext).first(good.ciphertext.size() / 2),
       &f.keys,
       {}},
      {good.query, good.ciphertext, &f.keys, {}},
  };
  const auto responses = f.server->AnswerBatch(requests);
  EXPECT_EQ(responses[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(responses[1].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(responses[1].status().message(), HasSubstr("(expected"));
  ASSERT_TRUE(responses[2].ok()) << responses[2].status();
  std::vector<uint8_t> record(16);
  ASSERT_TRUE(f.client->Decode(good, *responses[2], absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, f.Record(7));
  EXPECT_EQ(
      f.client->Decode(good, absl::MakeConstSpan(*responses[2]).first(100), absl::MakeSpan(record))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.client->MakeQuery(300).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace veil::lattice
