#include "pir/lattice/pack_simple.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/expansion.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

TEST(PackedSimpleTest, EveryRecordDecodesWithoutTheHintOnAnAwkwardShape) {
  // 3,001 records of 100 bytes, 45 per column: D0 = 67, D1 = 4,500 > N, so the answer packs into
  // two ciphertexts, the second holding 404 rows; the last column is partly empty.
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 200);
  const uint64_t rows = 3001;
  const uint32_t record_bytes = 100;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, record_bytes, gen);
  LweServerOptions options;
  options.shape.records_per_column = 45;
  auto lwe = LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(21), options);
  ASSERT_TRUE(lwe.ok()) << lwe.status();
  const Shape shape = (*lwe)->shape();
  EXPECT_EQ(shape.d0, 67u);
  EXPECT_EQ(shape.d1, 4500u);
  auto server = PackedSimpleServer::Create(*std::move(lwe));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->matrix().groups(), 2u);
  auto client = PackedSimpleClient::Create((*server)->config());
  ASSERT_TRUE(client.ok()) << client.status();
  const RingContext& ring = (*client)->ring();
  EXPECT_EQ((*client)->expansion_keys().size(), ExpansionKeyBytes(ring, kLweDimension));
  const he::GaloisKeys keys = *(*server)->ParseKeys((*client)->expansion_keys());
  // The first record, the last (slot 44 of column 52, in the second ciphertext), a random one.
  for (const uint64_t row : {uint64_t{0}, uint64_t{3000}, uint64_t{gen() % rows}}) {
    const PackedQuery query = *(*client)->MakeQuery(row);
    EXPECT_EQ(query.query.size(), shape.d0);
    EXPECT_EQ(query.ciphertext.size(), SecretCiphertextBytes(ring));
    const std::vector<uint8_t> response = *(*server)->Answer(query.query, query.ciphertext, keys);
    EXPECT_EQ(response.size(), PackedResponseBytes(ring, shape));
    EXPECT_EQ(response.size(), 2u * 32768);
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE((*client)->Decode(row, response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + row * record_bytes,
                                           records.begin() + (row + 1) * record_bytes))
        << "row " << row;
  }
}

TEST(PackedSimpleTest, ABatchOfSessionsSharesOneProductAndFailsOnlyItsBadRequest) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 202);
  const uint64_t rows = 500;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, 16, gen);
  LweServerOptions options;
  options.threads = 2;
  auto server = PackedSimpleServer::Create(
      *LweServer::FromRecords(records, rows, 16, testing::DigestOf(24), options));
  ASSERT_TRUE(server.ok()) << server.status();
  // Two sessions (their own secrets and keys), three good queries and one of the wrong size.
  auto a = PackedSimpleClient::Create((*server)->config());
  auto b = PackedSimpleClient::Create((*server)->config());
  ASSERT_TRUE(a.ok() && b.ok());
  const he::GaloisKeys keys_a = *(*server)->ParseKeys((*a)->expansion_keys());
  const he::GaloisKeys keys_b = *(*server)->ParseKeys((*b)->expansion_keys());
  const uint64_t want[] = {0, 499, 123, 7};
  const PackedSimpleClient* owner[] = {a->get(), b->get(), a->get(), b->get()};
  std::vector<PackedQuery> queries;
  std::vector<PackedRequest> requests;
  for (int i = 0; i < 4; ++i) queries.push_back(*owner[i]->MakeQuery(want[i]));
  for (int i = 0; i < 4; ++i) {
    requests.push_back(
        {queries[i].query, queries[i].ciphertext, BorrowKeys(i % 2 == 0 ? keys_a : keys_b), {}});
  }
  requests[3].query = requests[3].query.first(5);
  const auto responses = (*server)->AnswerBatch(requests);
  ASSERT_EQ(responses.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(responses[i].ok()) << responses[i].status();
    std::vector<uint8_t> record(16);
    ASSERT_TRUE(owner[i]->Decode(want[i], *responses[i], absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + want[i] * 16,
                                           records.begin() + (want[i] + 1) * 16))
        << "row " << want[i];
  }
  EXPECT_EQ(responses[3].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(responses[3].status().message(), HasSubstr("a query of 5 words"));
}

// On two threads one query's sums run alongside the product (a thread each) and its packed
// groups are encoded and switched a group per thread: the same bytes as on one thread, one after
// the other; a malformed request beside it fails alone. With VIPIR's ring (two groups) and with
// the small ring (five).
void ExpectOneQueryOnTwoThreadsAsOnOne(const RingParams& ring, uint64_t expect_groups) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 203);
  const uint64_t rows = 5000;
  const std::vector<uint8_t> records = testing::RandomRecords(rows, 24, gen);
  std::unique_ptr<PackedSimpleServer> servers[2];
  for (int t = 0; t < 2; ++t) {
    LweServerOptions options;
    options.threads = t + 1;
    options.shape.records_per_column = 200;  // D1 = 4,800 rows
    auto server = PackedSimpleServer::Create(
        *LweServer::FromRecords(records, rows, 24, testing::DigestOf(25), options), ring);
    ASSERT_TRUE(server.ok()) << server.status();
    servers[t] = *std::move(server);
  }
  ASSERT_EQ(servers[1]->threads(), 2);
  ASSERT_EQ(servers[1]->matrix().groups(), expect_groups);
  auto client = PackedSimpleClient::Create(servers[0]->config(), ring);
  ASSERT_TRUE(client.ok()) << client.status();
  const he::GaloisKeys keys = *servers[0]->ParseKeys((*client)->expansion_keys());
  const SumsSchedule schedules[] = {SumsSchedule::kAlongsideProduct, SumsSchedule::kAfterProduct,
                                    SumsSchedule::kAdaptive};
  for (const uint64_t row : {uint64_t{0}, uint64_t{4999}, uint64_t{gen() % rows}}) {
    servers[1]->set_sums_schedule(schedules[row % 3]);
    const PackedQuery query = *(*client)->MakeQuery(row);
    const std::vector<uint8_t> one = *servers[0]->Answer(query.query, query.ciphertext, keys);
    const std::vector<PackedRequest> requests = {
        {absl::MakeConstSpan(query.query).first(3), query.ciphertext, BorrowKeys(keys), {}},
        {query.query, query.ciphertext, BorrowKeys(keys), {}}};
    const auto two = servers[1]->AnswerBatch(requests);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_EQ(two[0].status().code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(two[1].ok()) << two[1].status();
    EXPECT_EQ(*two[1], one) << "row " << row;
    std::vector<uint8_t> record(24);
    ASSERT_TRUE((*client)->Decode(row, *two[1], absl::MakeSpan(record)).ok());
    EXPECT_EQ(record,
              std::vector<uint8_t>(records.begin() + row * 24, records.begin() + (row + 1) * 24))
        << "row " << row;
  }
}

TEST(PackedSimpleTest, AQueryAloneAnswersOnTwoThreadsAsOnOne) {
  ExpectOneQueryOnTwoThreadsAsOnOne(RingParams::Default(), 2);
  ExpectOneQueryOnTwoThreadsAsOnOne(testing::SmallRing(), 5);
}

TEST(PackedSimpleTest, TheAdaptiveScheduleTriesBothThenKeepsTheFaster) {
  SumsScheduleChoice choice;
  const auto time = [](SumsSchedule s, bool alongside_faster) {
    return (s == SumsSchedule::kAlongsideProduct) == alongside_faster ? 0.040 : 0.050;
  };
  // Alternately, 2 kTrials calls, starting with the product first.
  for (int call = 0; call < 2 * SumsScheduleChoice::kTrials; ++call) {
    const SumsSchedule s = choice.Next();
    EXPECT_EQ(s, call % 2 == 0 ? SumsSchedule::kAfterProduct : SumsSchedule::kAlongsideProduct);
    choice.Record(s, time(s, true));
  }
  EXPECT_EQ(choice.Preferred(), SumsSchedule::kAlongsideProduct);
  // Then the faster, the other once every kRetry calls; when the other becomes the faster over
  // its last kTrials retries, it is kept.
  int others = 0;
  SumsSchedule last = SumsSchedule::kAdaptive;
  for (uint64_t call = 2 * SumsScheduleChoice::kTrials; call < 400; ++call) {
    const SumsSchedule s = choice.Next();
    if (call < 200) {
      EXPECT_EQ(s, call % SumsScheduleChoice::kRetry == 0 ? SumsSchedule::kAfterProduct
                                                          : SumsSchedule::kAlongsideProduct)
          << call;
    }
    others += call < 200 && s == SumsSchedule::kAfterProduct;
    choice.Record(s, time(s, call < 200));  // from call 200 on, the product first is faster
    last = s;
  }
  EXPECT_EQ(others, 3);  // calls 50, 100, 150
  EXPECT_EQ(last, SumsSchedule::kAfterProduct);
  EXPECT_EQ(choice.Preferred(), SumsSchedule::kAfterProduct);
}

TEST(PackedSimpleTest, ThePackedShapeCountsCiphertextsNotWords) {
  ShapeOptions packed;
  packed.packed_ring_n = 4096;
  // 2^20 x 64 B: SimplePIR's shape (5,760 x 11,651) would need two ciphertexts down; the packed
  // one fills one (k = 64: D1 = 4,096) with 64 KiB up. k = 128 costs as much (32 KiB up, two
  // ciphertexts down): the tie goes to fewer ciphertexts.
  const Shape wide = *ChooseShape(Protocol::kSimplePir, uint64_t{1} << 20, 64, {});
  EXPECT_EQ(wide.d1, 5760u);
  const Shape one = *ChooseShape(Protocol::kSimplePir, uint64_t{1} << 20, 64, packed);
  EXPECT_EQ(one.records_per_column, 64u);
  EXPECT_EQ(one.d1, 4096u);
  EXPECT_EQ(one.d0, 16384u);
  EXPECT_EQ(one.CostBytes(packed), 4.0 * 16384 + 32768);
  EXPECT_EQ(one.CostBytes(packed),
            (*ChooseShape(Protocol::kSimplePir, uint64_t{1} << 20, 64,
                          {.records_per_column = 128, .packed_ring_n = 4096}))
                .CostBytes(packed));
  // 2^24 x 64 B: a 32 KiB answer would cost 1 MiB up; six ciphertexts down balance it.
  const Shape big = *ChooseShape(Protocol::kSimplePir, uint64_t{1} << 24, 64, packed);
  EXPECT_EQ((big.d1 + 4095) / 4096, 6u);
  EXPECT_LT(big.CostBytes(packed), 400000);
}

TEST(PackedSimpleTest, RefusesDoublePirAndBadSizes) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 201);
  const std::vector<uint8_t> records = testing::RandomRecords(50, 8, gen);
  LweServerOptions options;
  options.protocol = Protocol::kDoublePir;
  auto doubled = LweServer::FromRecords(records, 50, 8, testing::DigestOf(22), options);
  ASSERT_TRUE(doubled.ok());
  const LweConfig double_config = (*doubled)->config();
  const absl::Status refused = PackedSimpleServer::Create(*std::move(doubled)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "lwe-exppack-s packs SimplePIR answers, not double");
  EXPECT_EQ(PackedSimpleClient::Create(double_config).status().message(),
            "lwe-exppack-s packs SimplePIR answers, not double");

  auto server = PackedSimpleServer::Create(
      *LweServer::FromRecords(records, 50, 8, testing::DigestOf(23), LweServerOptions{}));
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = PackedSimpleClient::Create((*server)->config());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->MakeQuery(50).status().message(), "row 50 is outside the table (50 rows)");
  const he::GaloisKeys keys = *(*server)->ParseKeys((*client)->expansion_keys());
  const PackedQuery query = *(*client)->MakeQuery(7);
  const absl::Status short_ct =
      (*server)
          ->Answer(query.query, absl::MakeConstSpan(query.ciphertext).first(100), keys)
          .status();
  EXPECT_EQ(short_ct.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_ct.message(), HasSubstr("is 49184 bytes, got 100"));
  const absl::Status short_query =
      (*server)->Answer(absl::MakeConstSpan(query.query).first(3), query.ciphertext, keys).status();
  EXPECT_EQ(short_query.code(), absl::StatusCode::kInvalidArgument);
  // Keys of another session decrypt nothing: the server cannot tell, the record comes out wrong
  // (the row tags of embedding tables catch that; here the bytes differ).
  auto other = PackedSimpleClient::Create((*server)->config());
  ASSERT_TRUE(other.ok());
  const he::GaloisKeys other_keys = *(*server)->ParseKeys((*other)->expansion_keys());
  std::vector<uint8_t> mixed = *(*server)->Answer(query.query, query.ciphertext, other_keys);
  std::vector<uint8_t> mixed_record(8);
  ASSERT_TRUE((*client)->Decode(7, mixed, absl::MakeSpan(mixed_record)).ok());
  EXPECT_NE(mixed_record, std::vector<uint8_t>(records.begin() + 7 * 8, records.begin() + 8 * 8));
  std::vector<uint8_t> response = *(*server)->Answer(query.query, query.ciphertext, keys);
  std::vector<uint8_t> record(8);
  response.pop_back();
  const absl::Status bad = (*client)->Decode(7, response, absl::MakeSpan(record));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("response of 32767 bytes (expected 32768)"));
}

}  // namespace
}  // namespace veil::lattice
