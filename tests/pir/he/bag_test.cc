// bfv-bag: the decoded answer equals the plaintext pooled sum exactly, for several table shapes
// (one block and several), extreme 32-bit values and signed weights; the exactness bound is
// enforced; the wire formats round-trip and reject malformed bytes; the answer is compressed
// (142,350 bytes); an exhausted answer is reported, not decoded.
#include "pir/he/bag.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pir/he/encoder.h"
#include "pir/he/matvec.h"
#include "pir/he/serialization.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::BagContext;
using testing::Rng;

std::vector<int64_t> PlainPooledSum(const std::vector<int32_t>& table, size_t dim,
                                    const std::vector<uint64_t>& rows,
                                    const std::vector<int64_t>& weights) {
  std::vector<int64_t> sum(dim, 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < dim; ++j) sum[j] += weights[i] * table[rows[i] * dim + j];
  }
  return sum;
}

struct Case {
  size_t rows, dim, bag;
};

TEST(Bag, AnswerIsThePooledSumExactly) {
  const auto ctx = BagContext();
  std::mt19937_64 rng = Rng(40);
  // One block, a wide 64-dim table, several blocks (20000 rows > N = 8192), odd shapes.
  for (const Case& c : {Case{100, 8, 5}, Case{4096, 64, 32}, Case{20000, 16, 40}, Case{1, 1, 1},
                        Case{37, 300, 10}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << " x " << c.dim);
    std::vector<int32_t> table(c.rows * c.dim);
    for (int32_t& v : table) v = static_cast<int32_t>(rng());
    table[0] = std::numeric_limits<int32_t>::min();
    const std::unique_ptr<BagServer> server = *BagServer::Create(ctx, table, c.rows, c.dim, 2);
    EXPECT_EQ(server->info().max_abs, uint32_t{1} << 31);
    const std::unique_ptr<BagClient> client =
        *BagClient::Create(ctx, *ParseBagTableInfo(SerializeBagTableInfo(server->info())));
    const GaloisKeys gk =
        *ParseGaloisKeys(*ctx, *SerializeGaloisKeys(*ctx, *client->MakeGaloisKeys()));
    std::vector<uint64_t> rows;
    std::vector<int64_t> weights;
    for (uint64_t r = 0; r < c.rows && rows.size() < c.bag; r += 1 + rng() % 3) {
      rows.push_back(r);
      weights.push_back(static_cast<int64_t>(rng() % 131072) - 65536);  // 16.16 in [-1, 1)
    }
    // Queries go up with c_0 rounded (as to servers that read them), or exact; encrypted and
    // serialized on 2 or 3 threads (the bytes those of one thread).
    const int round_bits = c.rows % 2 == 0 ? kBagQueryRoundBits : 0;
    const int threads = 2 + static_cast<int>(c.rows % 2);
    BagQuery query = *client->Query(rows, weights, threads);
    query.round_bits = round_bits;
    const std::vector<uint8_t> up = *SerializeBagQuery(*ctx, query, threads);
    EXPECT_EQ(up, *SerializeBagQuery(*ctx, query));
    EXPECT_EQ(up.size(), client->Sizes(round_bits).query_bytes);
    const CompressedCiphertext answer = *server->Answer(*ParseBagQuery(*ctx, up, 16), gk, 2);
    const std::vector<uint8_t> down = *SerializeCompressedCiphertext(*ctx, answer);
    EXPECT_EQ(down.size(), client->Sizes().answer_bytes);
    EXPECT_EQ(down.size(), 142350u);
    EXPECT_EQ(*client->Decode(*ParseCompressedCiphertext(*ctx, down)),
              PlainPooledSum(table, c.dim, rows, weights));
    // The client's path: each block serialized as soon as it is encrypted, the same format.
    const std::vector<uint8_t> streamed =
        *client->SerializedQuery(rows, weights, round_bits, threads);
    EXPECT_EQ(streamed.size(), up.size());
    const BagQuery parsed = *ParseBagQuery(*ctx, streamed, 16);
    EXPECT_EQ(parsed.round_bits, round_bits);
    EXPECT_EQ(*client->Decode(*server->Answer(parsed, gk, 2)),
              PlainPooledSum(table, c.dim, rows, weights));
    // The product leaves 38 to 40 bits, the compression's rounding at most 1/16 of the margin
    // (bag.h): the budget is what the rounding leaves, at least 4 bits.
    EXPECT_GE(DecryptCompressed(*ctx, client->secret_key(), answer)->noise_budget, 4);
  }
}

// The query's rounded c_0 (kBagQueryRoundBits) costs the product's budget about one bit per
// dropped bit past ~8, as bag.h predicts: 41 bits left exact and 18 rounded at 8192 x 16 when
// measured, so at least 12 must stay (where the compressed answer needs ~4) and at least 16 must
// go (the rounding took effect). 145,455 bytes a block instead of 178,222.
TEST(Bag, RoundedQueriesCostThePredictedBudget) {
  const auto ctx = BagContext();
  std::mt19937_64 rng = Rng(41);
  const size_t rows = 8192, dim = 16;
  std::vector<uint64_t> transposed(rows * dim);
  for (uint64_t& v : transposed) v = rng() % ctx->params().t;
  const MatVecPlan plan = *MatVecPlan::Create(*ctx, dim, rows);
  const EncodedMatrix matrix = *EncodedMatrix::Create(ctx, plan, transposed, 2);
  const std::unique_ptr<BagClient> client =
      *BagClient::Create(ctx, BagTableInfo{ctx->id(), rows, dim, uint32_t{1} << 31});
  const GaloisKeys gk = *client->MakeGaloisKeys();
  std::vector<uint64_t> bag;
  std::vector<int64_t> weights;
  for (uint64_t r = 0; r < 32; ++r) {
    bag.push_back(r * 200);
    weights.push_back(static_cast<int64_t>(rng() % 4096) - 2048);
  }
  BagQuery query = *client->Query(bag, weights);
  int budget[2];
  for (int rounded = 0; rounded < 2; ++rounded) {
    query.round_bits = rounded ? kBagQueryRoundBits : 0;
    const std::vector<uint8_t> up = *SerializeBagQuery(*ctx, query);
    EXPECT_EQ(up.size(), 8 + 4 + (rounded ? 145455u : 178222u));
    const Ciphertext product = *matrix.Multiply(ParseBagQuery(*ctx, up, 1)->blocks, gk, 2);
    budget[rounded] = *NoiseBudget(*ctx, client->secret_key(), product);
    EXPECT_GE(DecryptCompressed(*ctx, client->secret_key(), *Compress(*ctx, product))->noise_budget,
              4);
  }
  EXPECT_GE(budget[1], 12);
  EXPECT_GE(budget[0] - budget[1], 16);
}

TEST(Bag, ExactAtTheLargestAllowedWeights) {
  const auto ctx = BagContext();
  const size_t rows = 4, dim = 2;
  const std::vector<int32_t> table = {std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(),
                                      -1,
                                      1,
                                      std::numeric_limits<int32_t>::min(),
                                      7,
                                      0,
                                      -5};
  const std::unique_ptr<BagServer> server = *BagServer::Create(ctx, table, rows, dim);
  const std::unique_ptr<BagClient> client = *BagClient::Create(ctx, server->info());
  const GaloisKeys gk = *client->MakeGaloisKeys();
  // sum |w| 2^31 <= (t - 1) / 2 with t ~ 2^58: |w| sums to just under 2^26.
  const uint64_t half = (ctx->params().t - 1) / 2;
  const int64_t limit = static_cast<int64_t>(half >> 31);
  const std::vector<uint64_t> bag = {0, 2, 3};
  const std::vector<int64_t> weights = {limit - 2, -1, 1};
  const CompressedCiphertext answer = *server->Answer(*client->Query(bag, weights), gk);
  EXPECT_EQ(*client->Decode(answer), PlainPooledSum(table, dim, bag, weights));
  // One more unit of weight and the sum could wrap mod t: refused.
  absl::StatusOr<BagQuery> too_much = client->Query(bag, {limit, -1, 1});
  ASSERT_EQ(too_much.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_much.status().message().find("the pooled sum would not be exact"),
            std::string::npos);
  // 2^33 x 2^31 = 2^64: the bound is computed past 64 bits.
  EXPECT_EQ(client->Query({0}, {int64_t{1} << 33}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Bag, RejectsBadInput) {
  const auto ctx = BagContext();
  const std::vector<int32_t> table(6, 3);
  EXPECT_EQ(BagServer::Create(ctx, table, 4, 2).status().message(),
            "a table of 4 x 2 needs 8 values, got 6");
  const std::unique_ptr<BagServer> server = *BagServer::Create(ctx, table, 3, 2);
  const std::unique_ptr<BagClient> client = *BagClient::Create(ctx, server->info());
  EXPECT_EQ(client->Query({3}, {1}).status().message(), "bag row 3 is outside the table");
  EXPECT_EQ(client->Query({1, 1}, {1, 1}).status().message(), "bag row 1 repeats");
  EXPECT_EQ(client->Query({1}, {1, 2}).status().message(), "1 rows but 2 weights");
  EXPECT_EQ(client->SerializedQuery({1, 1}, {1, 1}, 0).status().message(), "bag row 1 repeats");
  const int q0_bits = ctx->modulus(0).bits();
  EXPECT_EQ(client->SerializedQuery({1}, {1}, -1).status().message(),
            absl::StrCat("c_0 rounded by -1 bits (1 to ", q0_bits - 1, ")"));
  EXPECT_EQ(client->SerializedQuery({1}, {1}, q0_bits).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBagQuery(*ctx, *client->SerializedQuery({1}, {1}, q0_bits - 1), 1)->round_bits,
            q0_bits - 1);

  std::vector<uint8_t> info = SerializeBagTableInfo(server->info());
  EXPECT_EQ(info.size(), 36u);
  info[3] = 2;
  EXPECT_EQ(ParseBagTableInfo(info).status().message(), "unsupported bag table info version 2");
  EXPECT_EQ(ParseBagTableInfo(absl::MakeConstSpan(info).first(35)).status().message(),
            "bag table info has 35 bytes, expected 36");
  BagTableInfo foreign = server->info();
  foreign.params_id ^= 1;
  EXPECT_EQ(BagClient::Create(ctx, foreign).status().code(), absl::StatusCode::kInvalidArgument);

  const std::vector<uint8_t> q = *SerializeBagQuery(*ctx, *client->Query({0}, {1}));
  EXPECT_EQ(ParseBagQuery(*ctx, q, 0).status().message(),
            "bag query with 1 blocks, 1 to 0 allowed");
  EXPECT_EQ(ParseBagQuery(*ctx, absl::MakeConstSpan(q).first(q.size() - 1), 4).status().message(),
            "truncated bag query");
  // Every block of a query is rounded alike.
  BagQuery one = *client->Query({0}, {1});
  one.round_bits = 30;
  std::vector<uint8_t> mixed = *SerializeBagQuery(*ctx, one);
  EXPECT_EQ(ParseBagQuery(*ctx, mixed, 4)->round_bits, 30);
  const std::vector<uint8_t> other = *SerializeCiphertext(*ctx, one.blocks[0], 31);
  mixed[4] = 2;  // two blocks
  for (int i = 0; i < 4; ++i) mixed.push_back(static_cast<uint8_t>(other.size() >> (8 * i)));
  mixed.insert(mixed.end(), other.begin(), other.end());
  EXPECT_EQ(ParseBagQuery(*ctx, mixed, 4).status().message(),
            "bag query blocks rounded by 30 and 31 bits");

  // Blocks parsed on several threads: the same query, and the same first error, as in order.
  BagQuery five = *client->Query({0}, {1});
  five.blocks.assign(5, five.blocks[0]);
  std::vector<uint8_t> five_bytes = *SerializeBagQuery(*ctx, five);
  const BagQuery serial = *ParseBagQuery(*ctx, five_bytes, 5, 1);
  const BagQuery threaded = *ParseBagQuery(*ctx, five_bytes, 5, 3);
  ASSERT_EQ(threaded.blocks.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(threaded.blocks[i].data, serial.blocks[i].data);
  const size_t block_bytes = (five_bytes.size() - 8) / 5;  // 4 of length, then the ciphertext
  // Block 2's first residues all ones (out of range), block 4 cut short.
  std::fill_n(five_bytes.begin() + 8 + 2 * block_bytes + 4 + 24, 16, 0xff);
  five_bytes.resize(five_bytes.size() - 1);
  const absl::Status first = ParseBagQuery(*ctx, five_bytes, 5, 1).status();
  EXPECT_NE(std::string(first.message()).find("is not below"), std::string::npos) << first;
  EXPECT_EQ(ParseBagQuery(*ctx, five_bytes, 5, 3).status(), first);
  std::fill_n(five_bytes.begin() + 8 + 2 * block_bytes + 4 + 24, 16, 0);
  EXPECT_EQ(ParseBagQuery(*ctx, five_bytes, 5, 3).status().message(), "truncated bag query");

  // An answer whose budget was spent is reported, not decoded into wrong numbers: a ciphertext
  // under the client's key multiplied by a large scalar, as a server with too little modulus
  // would leave it.
  Ciphertext spent = *EncryptSymmetric(*ctx, client->secret_key(), *EncodeSlots(*ctx, {1}));
  Plaintext scalar{ctx->id(), std::vector<uint64_t>(ctx->n(), 0)};
  scalar.coeffs[0] = ctx->params().t / 3;
  for (int i = 0; i < 3 && *NoiseBudget(*ctx, client->secret_key(), spent) > 0; ++i) {
    spent = *MultiplyPlain(*ctx, spent, *PrepareForMultiply(*ctx, scalar));
  }
  EXPECT_EQ(client->Decode(*Compress(*ctx, spent)).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace veil::he
