// Queries prepared ahead (PackedClient::PrepareQuery, FinishQuery) for every packed protocol: the
// row adds only Deltas (two queries finished from the same randomness for different rows differ
// only by +-Delta at their unit vectors' hot entries; PrepareQuery takes no row), finished queries
// decode to their records, and a prepared query serves only its client, once. The same for the
// hint protocols' LweClient::PrepareLookups.
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/client.h"
#include "pir/lattice/double_pack.h"
#include "pir/lattice/pack_double.h"
#include "pir/lattice/pack_simple.h"
#include "tests/pir/lattice/seeded_source.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

enum class Kind { kExpPackS, kHybrid, kExpPackD, kDoublePack };

struct Case {
  std::string name;
  Kind kind;
  uint64_t rows;
  uint32_t record_bytes;
  uint64_t per_column;
  int unit_vectors;  // per query
};

struct Served {
  std::vector<uint8_t> records;
  std::unique_ptr<PackedServer> server;
  std::unique_ptr<PackedClient> client;
  he::GaloisKeys keys;
};

PackedProtocol PackedProtocolOf(const Case& c) {
  return c.kind == Kind::kHybrid ? PackedProtocol::kHybrid : PackedProtocol::kExpPackS;
}

std::unique_ptr<PackedClient> ClientOf(const Case& c, const LweConfig& config) {
  switch (c.kind) {
    case Kind::kExpPackD:
      return *PackedDoubleClient::Create(config);
    case Kind::kDoublePack:
      return *DoublePackedClient::Create(config, testing::SmallRing());
    default:
      return *PackedSimpleClient::Create(config, testing::SmallRing(), PackedProtocolOf(c));
  }
}

Served Serve(const Case& c) {
  Served s;
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 900);
  s.records = testing::RandomRecords(c.rows, c.record_bytes, gen);
  LweServerOptions options;
  options.shape.records_per_column = c.per_column;
  if (c.kind == Kind::kExpPackD) options.protocol = Protocol::kDoublePir;
  auto lwe =
      *LweServer::FromRecords(s.records, c.rows, c.record_bytes, testing::DigestOf(900), options);
  switch (c.kind) {
    case Kind::kExpPackD:
      s.server = *PackedDoubleServer::Create(std::move(lwe));
      break;
    case Kind::kDoublePack:
      s.server = *DoublePackedServer::Create(std::move(lwe), testing::SmallRing());
      break;
    default:
      s.server =
          *PackedSimpleServer::Create(std::move(lwe), testing::SmallRing(), PackedProtocolOf(c));
  }
  s.client = ClientOf(c, s.server->config());
  s.keys = *s.server->ParseKeys(s.client->expansion_keys());
  return s;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PreparedQueryTest : public ::testing::TestWithParam<Case> {};

TEST_P(PreparedQueryTest, ThePreparedPartDoesNotDependOnTheRow) {
  const Case& c = GetParam();
  const Served s = Serve(c);
  const uint64_t a = 3, b = c.rows - 2;
  SeededSource rng_a(77), rng_b(77);
  auto qa = s.client->FinishQuery(a, *s.client->PrepareQuery(rng_a));
  auto qb = s.client->FinishQuery(b, *s.client->PrepareQuery(rng_b));
  ASSERT_TRUE(qa.ok() && qb.ok()) << qa.status() << qb.status();
  EXPECT_EQ(qa->ciphertext.size(), qb->ciphertext.size());
  ASSERT_EQ(qa->query.size(), qb->query.size());
  int differing = 0;
  for (size_t i = 0; i < qa->query.size(); ++i) {
    const uint32_t d = qa->query[i] - qb->query[i];
    if (d == 0) continue;
    ++differing;
    EXPECT_TRUE(d == kDelta || d == 0u - kDelta) << "word " << i << " differs by " << d;
  }
  // Each unit vector's hot entry moves from a's to b's (unless both rows share it).
  EXPECT_GT(differing, 0);
  EXPECT_LE(differing, 2 * c.unit_vectors);
  EXPECT_EQ(qa->selection.size(), s.client->selection_bytes());
}

TEST_P(PreparedQueryTest, QueriesFinishedLaterDecodeToTheirRecords) {
  const Case& c = GetParam();
  const Served s = Serve(c);
  std::vector<PreparedQuery> prepared;
  for (int i = 0; i < 3; ++i) prepared.push_back(*s.client->PrepareQuery());
  const std::vector<uint64_t> rows = {0, c.rows - 1, c.rows / 2};
  for (size_t i = 0; i < rows.size(); ++i) {
    auto query = s.client->FinishQuery(rows[i], std::move(prepared[i]));
    ASSERT_TRUE(query.ok()) << query.status();
    EXPECT_EQ(query->row(), rows[i]);
    auto response = s.server->Answer(query->query, query->ciphertext, s.keys, query->selection);
    ASSERT_TRUE(response.ok()) << response.status();
    std::vector<uint8_t> record(c.record_bytes);
    ASSERT_TRUE(s.client->Decode(*query, *response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, std::vector<uint8_t>(s.records.begin() + rows[i] * c.record_bytes,
                                           s.records.begin() + (rows[i] + 1) * c.record_bytes))
        << "row " << rows[i];
  }
}

TEST_P(PreparedQueryTest, APreparedQueryServesItsClientOnce) {
  const Case& c = GetParam();
  const Served s = Serve(c);
  std::unique_ptr<PackedClient> other = ClientOf(c, s.server->config());
  auto refused = s.client->FinishQuery(1, *other->PrepareQuery());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("another client"));
  PreparedQuery prepared = *s.client->PrepareQuery();
  PreparedQuery taken = std::move(prepared);
  EXPECT_EQ(s.client->FinishQuery(1, std::move(prepared)).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "a moved-from prepared query";
  EXPECT_EQ(s.client->FinishQuery(c.rows, *s.client->PrepareQuery()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.client->FinishQuery(c.rows - 1, std::move(taken)).ok());
}

INSTANTIATE_TEST_SUITE_P(Protocols, PreparedQueryTest,
                         ::testing::Values(Case{"ExpPackS", Kind::kExpPackS, 700, 10, 20, 1},
                                           Case{"Hybrid", Kind::kHybrid, 900, 100, 50, 1},
                                           Case{"ExpPackD", Kind::kExpPackD, 700, 3, 400, 4},
                                           Case{"DoublePack", Kind::kDoublePack, 900, 100, 50, 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// The hint protocols: LweClient::PrepareLookups / FinishQuery, as above.
class PreparedLookupTest : public ::testing::TestWithParam<Protocol> {};

TEST_P(PreparedLookupTest, TheRowAddsOnlyDeltasAndTheQueriesDecode) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 901);
  const uint64_t rows = 500;
  const uint32_t record_bytes = 3;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, record_bytes, gen);
  LweServerOptions options;
  options.protocol = GetParam();
  auto server =
      *LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(901), options);
  auto client = *LweClient::Create(server->config(), server->hint_blob());
  const uint64_t qw = client->shape().query_words();
  const uint64_t units = GetParam() == Protocol::kSimplePir ? 1 : 1 + record_bytes;

  SeededSource rng_a(5), rng_b(5);
  std::vector<uint32_t> qa(qw), qb(qw);
  auto a =
      client->FinishQuery(2, std::move(client->PrepareLookups(1, rng_a)[0]), absl::MakeSpan(qa));
  auto b = client->FinishQuery(rows - 1, std::move(client->PrepareLookups(1, rng_b)[0]),
                               absl::MakeSpan(qb));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  uint64_t differing = 0;
  for (uint64_t i = 0; i < qw; ++i) {
    const uint32_t d = qa[i] - qb[i];
    if (d == 0) continue;
    ++differing;
    EXPECT_TRUE(d == kDelta || d == 0u - kDelta) << "word " << i << " differs by " << d;
  }
  EXPECT_GT(differing, 0u);
  EXPECT_LE(differing, 2 * units);

  // Prepared in one batch, finished later, answered in one pass, decoded.
  std::vector<PreparedLookup> prepared = client->PrepareLookups(3);
  const std::vector<uint64_t> want = {0, rows - 1, 250};
  std::vector<uint32_t> queries(want.size() * qw);
  std::vector<PendingLookup> pending;
  for (size_t i = 0; i < want.size(); ++i) {
    auto lookup = client->FinishQuery(want[i], std::move(prepared[i]),
                                      absl::MakeSpan(queries).subspan(i * qw, qw));
    ASSERT_TRUE(lookup.ok()) << lookup.status();
    pending.push_back(*std::move(lookup));
  }
  const uint64_t aw = client->shape().answer_words();
  std::vector<uint32_t> answers(want.size() * aw);
  ASSERT_TRUE(server->Answer(queries, static_cast<int>(want.size()), absl::MakeSpan(answers)).ok());
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE(client
                    ->Decode(pending[i], absl::MakeConstSpan(answers).subspan(i * aw, aw),
                             absl::MakeSpan(record))
                    .ok());
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + want[i] * record_bytes,
                                           records.begin() + (want[i] + 1) * record_bytes));
  }

  // Used, or another client's: refused.
  std::vector<uint32_t> query(qw);
  EXPECT_EQ(client->FinishQuery(1, std::move(prepared[0]), absl::MakeSpan(query)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto other = *LweClient::Create(server->config(), server->hint_blob());
  EXPECT_EQ(client->FinishQuery(1, std::move(other->PrepareLookups(1)[0]), absl::MakeSpan(query))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(HintProtocols, PreparedLookupTest,
                         ::testing::Values(Protocol::kSimplePir, Protocol::kDoublePir),
                         [](const ::testing::TestParamInfo<Protocol>& info) {
                           return info.param == Protocol::kSimplePir ? "SimplePir" : "DoublePir";
                         });

}  // namespace
}  // namespace veil::lattice
