// ExpPack(D) (pir/lattice/pack_double.h): DoublePIR answers packed so that the client decodes
// without the hint, on shapes of several record sizes; byte counts; bad input.
#include "pir/lattice/pack_double.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/expansion.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

struct DoubleFixture {
  DoubleFixture(uint64_t rows, uint32_t record_bytes, uint64_t salt, int threads) {
    std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + salt);
    records = testing::RandomRecords(rows, record_bytes, gen);
    LweServerOptions options;
    options.protocol = Protocol::kDoublePir;
    options.threads = threads;
    auto lwe =
        LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(salt), options);
    EXPECT_TRUE(lwe.ok()) << lwe.status();
    auto made = PackedDoubleServer::Create(*std::move(lwe));
    EXPECT_TRUE(made.ok()) << made.status();
    server = *std::move(made);
    client = *PackedDoubleClient::Create(server->config());
    keys = *server->ParseKeys(client->expansion_keys());
  }
  std::vector<uint8_t> Record(uint64_t row) const {
    const uint32_t r = server->config().shape.record_bytes;
    return {records.begin() + row * r, records.begin() + (row + 1) * r};
  }
  std::vector<uint8_t> records;
  std::unique_ptr<PackedDoubleServer> server;
  std::unique_ptr<PackedDoubleClient> client;
  he::GaloisKeys keys;
};

TEST(PackedDoubleTest, RecordsDecodeWithoutTheHint) {
  // 700 records of 3 bytes (odd: the second level's rows do not align with anything), two
  // workers for three expansions.
  DoubleFixture f(700, 3, 400, 2);
  const Shape& shape = f.server->config().shape;
  const RingContext& ring = f.client->ring();
  EXPECT_EQ(f.server->matrix().groups(), 1u);  // H2: 4n = N rows
  for (uint64_t row : {uint64_t{0}, uint64_t{699}, uint64_t{351}}) {
    const PackedQuery q = *f.client->MakeQuery(row);
    EXPECT_EQ(q.query.size(), shape.d0 + 3 * shape.d1);
    EXPECT_EQ(q.ciphertext.size(), 3 * SecretCiphertextBytes(ring));
    const std::vector<uint8_t> response = *f.server->Answer(q.query, q.ciphertext, f.keys);
    // 3 ciphertexts of 32 KiB, then 4 x 3 h2 words and 4n h1 words.
    EXPECT_EQ(response.size(), 3u * 32768 + 4 * (12 + 4096));
    EXPECT_EQ(response.size(), PackedDoubleResponseBytes(ring, shape));
    std::vector<uint8_t> record(3);
    ASSERT_TRUE(f.client->Decode(q, response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, f.Record(row)) << "row " << row;
  }
}

TEST(PackedDoubleTest, MeasuredNoiseMatchesTheModel) {
  // 3,000 records of 2 bytes, four lookups: 8 x 4n packed phases. Each is Delta times a digit of
  // H1[row] plus DoublePIR's second-level error (D1 = 50 digits times errors: ~3,300 words, the
  // bulk) and the packing's (~124); far below Delta / 2, so the nearest digit is the true one and
  // the distance to it is the noise. Three runs measured 3,341 to 3,394 against the model's 3,347.
  DoubleFixture f(3000, 2, 403, 2);
  const Shape& shape = f.server->config().shape;
  const PackingNoise model = PackedDoubleNoiseBound(f.client->ring(), shape);
  double sum_squares = 0, largest = 0;
  uint64_t count = 0;
  for (uint64_t row : {uint64_t{0}, uint64_t{2999}, uint64_t{1234}, uint64_t{77}}) {
    const PackedQuery q = *f.client->MakeQuery(row);
    const std::vector<uint8_t> response = *f.server->Answer(q.query, q.ciphertext, f.keys);
    std::vector<uint8_t> record(2);
    ASSERT_TRUE(f.client->Decode(q, response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, f.Record(row));
    const std::vector<uint32_t> phases = *f.client->PackedPhases(response);
    ASSERT_EQ(phases.size(), 2u * 4 * kLweDimension);
    for (uint32_t phase : phases) {
      const double noise = static_cast<int32_t>(phase - (uint32_t{RoundToByte(phase)} << 24));
      sum_squares += noise * noise;
      largest = std::max(largest, std::abs(noise));
    }
    count += phases.size();
  }
  const double sigma = std::sqrt(sum_squares / count);
  std::printf("ExpPack(D) packed phases, D1 = %llu: sigma %.0f (model %.0f), largest %.0f\n",
              static_cast<unsigned long long>(shape.d1), sigma, model.sigma, largest);
  EXPECT_GT(sigma, 0.85 * model.sigma);
  EXPECT_LT(sigma, 1.15 * model.sigma);
  EXPECT_LT(largest, kDelta / 4.0);
  EXPECT_LT(largest, 8 * model.sigma);
}

TEST(PackedDoubleTest, OneByteRecordsAndBadInput) {
  DoubleFixture f(300, 1, 401, 1);
  const PackedQuery q = *f.client->MakeQuery(123);
  const std::vector<uint8_t> response = *f.server->Answer(q.query, q.ciphertext, f.keys);
  std::vector<uint8_t> record(1);
  ASSERT_TRUE(f.client->Decode(q, response, absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, f.Record(123));
  // Sizes: the query, the ciphertexts, the response, the record.
  EXPECT_EQ(
      f.server->Answer(absl::MakeConstSpan(q.query).first(5), q.ciphertext, f.keys).status().code(),
      absl::StatusCode::kInvalidArgument);
  const absl::Status short_ct =
      f.server->Answer(q.query, absl::MakeConstSpan(q.ciphertext).first(100), f.keys).status();
  EXPECT_EQ(short_ct.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_ct.message(), HasSubstr("ciphertexts of 100 bytes"));
  EXPECT_EQ(
      f.client->Decode(q, absl::MakeConstSpan(response).first(100), absl::MakeSpan(record)).code(),
      absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> two(2);
  EXPECT_EQ(f.client->Decode(q, response, absl::MakeSpan(two)).code(),
            absl::StatusCode::kInvalidArgument);
  // A residue of the packed part not below q' is refused, not decoded.
  std::vector<uint8_t> bad = response;
  bad[0] = bad[1] = bad[2] = bad[3] = 0xff;
  EXPECT_EQ(f.client->Decode(q, bad, absl::MakeSpan(record)).code(),
            absl::StatusCode::kInvalidArgument);
  // A moved-from query decodes nothing.
  PackedQuery moved = *f.client->MakeQuery(5);
  PackedQuery taken = std::move(moved);
  EXPECT_EQ(f.client->Decode(moved, response, absl::MakeSpan(record)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.client->MakeQuery(300).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PackedDoubleTest, ABatchSharesOneProductAndFailsOnlyItsBadRequest) {
  DoubleFixture f(400, 2, 404, 2);
  auto other = PackedDoubleClient::Create(f.server->config());
  ASSERT_TRUE(other.ok());
  const he::GaloisKeys other_keys = *f.server->ParseKeys((*other)->expansion_keys());
  const PackedQuery a = *f.client->MakeQuery(10), b = *(*other)->MakeQuery(399);
  const PackedQuery c = *f.client->MakeQuery(200);
  const std::vector<uint8_t> selection(16, 0);
  const std::vector<PackedRequest> requests = {
      {a.query, a.ciphertext, BorrowKeys(f.keys), {}},
      {b.query, b.ciphertext, BorrowKeys(other_keys), {}},
      {c.query, c.ciphertext, BorrowKeys(f.keys), selection},  // ExpPack(D) takes no selection
  };
  const auto responses = f.server->AnswerBatch(requests);
  ASSERT_EQ(responses.size(), 3u);
  std::vector<uint8_t> record(2);
  ASSERT_TRUE(responses[0].ok()) << responses[0].status();
  ASSERT_TRUE(f.client->Decode(a, *responses[0], absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, f.Record(10));
  ASSERT_TRUE(responses[1].ok()) << responses[1].status();
  ASSERT_TRUE((*other)->Decode(b, *responses[1], absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, f.Record(399));
  EXPECT_EQ(responses[2].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(responses[2].status().message(), HasSubstr("a selection of 16 bytes"));
}

TEST(PackedDoubleTest, RefusesSimplePirAndSmallRings) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + 402);
  const std::vector<uint8_t> records = testing::RandomRecords(50, 2, gen);
  auto simple = LweServer::FromRecords(records, 50, 2, testing::DigestOf(402), {});
  ASSERT_TRUE(simple.ok());
  const LweConfig simple_config = (*simple)->config();
  EXPECT_EQ(PackedDoubleServer::Create(*std::move(simple)).status().message(),
            "lwe-exppack-d packs DoublePIR answers, not simple");
  EXPECT_EQ(PackedDoubleClient::Create(simple_config).status().message(),
            "lwe-exppack-d packs DoublePIR answers, not simple");
  LweServerOptions options;
  options.protocol = Protocol::kDoublePir;
  auto doubled = LweServer::FromRecords(records, 50, 2, testing::DigestOf(403), options);
  ASSERT_TRUE(doubled.ok());
  // N = 2,048 holds the expansion's n = 1,024 leaves but not the 4n digit rows.
  const RingParams small = *RingParams::Create(11, {536813569, 536690689, 536641537}, 4169729);
  const absl::Status refused = PackedDoubleClient::Create((*doubled)->config(), small).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("too small"));
}

}  // namespace
}  // namespace veil::lattice
