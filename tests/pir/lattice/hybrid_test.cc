// The hybrid protocol (pir/lattice/hybrid.h): the window's arithmetic, every record decoding
// from the selected window (records that straddle groups, the padded selection tree, the last
// window clamped), a selection prepared ahead, byte counts, bad selections, and the noise rule.
// The end-to-end tests use a ring of N = 1,024 (no security claim) so that several groups stay
// small.
#include "pir/lattice/hybrid.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "pir/he/serialization.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/pack_simple.h"
#include "pir/lattice/sharding.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

Shape ShapeOf(uint64_t d1, uint32_t record_bytes) {
  Shape s;
  s.record_bytes = record_bytes;
  s.records_per_column = d1 / record_bytes;
  s.d1 = d1;
  s.d0 = 10;
  s.rows = s.d0 * s.records_per_column;
  return s;
}

TEST(HybridWindowTest, CoversEveryRecordsGroupsWithTheFewestBits) {
  const RingContext ring = *RingContext::Create(RingParams::Default());  // N = 4096
  struct Case {
    uint64_t d1;
    uint32_t r;
    uint64_t groups, window, starts;
    uint32_t bits;
  };
  for (const Case& c : {
           Case{4096, 64, 1, 1, 1, 0},      // one group: nothing to select
           Case{6 * 4096, 64, 6, 1, 6, 3},  // 2^24 x 64 B's shape: R divides N
           Case{5 * 4096 - 64, 64, 5, 1, 5, 3},
           Case{4500, 100, 2, 2, 1, 0},  // straddling records: a window of two
           Case{18000, 100, 5, 2, 4, 2},
           Case{9 * 8192, 8192, 18, 2, 17, 5},  // N divides R: aligned, R / N groups
           Case{3 * 5000, 5000, 4, 3, 2, 1},    // R > N, unaligned: ceil(R / N) + 1
       }) {
    const Shape shape = ShapeOf(c.d1, c.r);
    const HybridWindow w = HybridWindowFor(ring, shape);
    EXPECT_EQ(w.groups, c.groups) << c.d1 << " x " << c.r;
    EXPECT_EQ(w.window, c.window) << c.d1 << " x " << c.r;
    EXPECT_EQ(w.starts, c.starts) << c.d1 << " x " << c.r;
    EXPECT_EQ(w.bits, c.bits) << c.d1 << " x " << c.r;
    // Every record's rows lie in its window, which lies in the column's groups.
    for (uint64_t row = 0; row < shape.rows; row += shape.d0 / 3 + 1) {
      const uint64_t start = w.StartOf(ring, shape, row);
      const uint64_t first = shape.slot_of(row) * c.r, last = first + c.r - 1;
      EXPECT_LT(start, w.starts);
      EXPECT_GE(first, start * ring.n()) << "row " << row;
      EXPECT_LT(last, (start + w.window) * ring.n()) << "row " << row;
    }
    EXPECT_EQ(HybridResponseBytes(ring, shape), c.window * 8 * ring.n());
    // The bits travel in one seeded ciphertext of the expansion's form, or not at all.
    EXPECT_EQ(HybridSelectionBytes(ring, shape), c.bits == 0 ? 0 : 32 + 4 * 3 * 4096);
  }
  // The session's keys: the expansion's and one key from z^2 to z (seeded, 29- and 22-bit
  // residues, with the he header).
  EXPECT_EQ(HybridKeyBytes(ring),
            ExpansionKeyBytes(ring, kLweDimension) + 12 + 32 + 3 * 4096 * (3 * 29 + 22) / 8);
  EXPECT_EQ(HybridKeyBytes(ring), 3516676u + 167468);
}

TEST(HybridKeysTest, CarryTheConversionKeyAndRefuseOthers) {
  const RingContext ring = *RingContext::Create(testing::SmallRing());
  const he::SecretKey key = he::GenerateSecretKey(*ring.expansion());
  const std::vector<uint8_t> bytes = *MakeHybridKeys(ring, key);
  ASSERT_EQ(bytes.size(), HybridKeyBytes(ring));
  const he::GaloisKeys keys = *ParseHybridKeys(ring, bytes);
  EXPECT_EQ(keys.keys.size(), ExpansionElements(ring, kLweDimension).size() + 1);
  EXPECT_EQ(keys.keys.count(kConversionKeyElement), 1u);
  // ExpPack(S)'s keys alone, a byte short or long, or a damaged conversion key: refused.
  const std::vector<uint8_t> expansion = *MakeExpansionKeys(ring, key, kLweDimension);
  EXPECT_EQ(ParseHybridKeys(ring, expansion).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ParseHybridKeys(ring, absl::MakeConstSpan(bytes).first(bytes.size() - 1)).status().code(),
      absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(ParseHybridKeys(ring, longer).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> damaged = bytes;
  damaged[expansion.size() + 3] ^= 1;  // the conversion key's object kind
  EXPECT_EQ(ParseHybridKeys(ring, damaged).status().code(), absl::StatusCode::kInvalidArgument);
}

struct HybridFixture {
  HybridFixture(uint64_t rows, uint32_t record_bytes, uint64_t per_column, uint64_t salt,
                int threads = 1) {
    std::mt19937_64 gen(testing::TestSeed("pir_lattice_test") + salt);
    records = testing::RandomRecords(rows, record_bytes, gen);
    LweServerOptions options;
    options.shape.records_per_column = per_column;
    options.threads = threads;
    auto lwe =
        LweServer::FromRecords(records, rows, record_bytes, testing::DigestOf(salt), options);
    server =
        *PackedSimpleServer::Create(*std::move(lwe), testing::SmallRing(), PackedProtocol::kHybrid);
    client = *PackedSimpleClient::Create(server->config(), testing::SmallRing(),
                                         PackedProtocol::kHybrid);
    keys = *server->ParseKeys(client->expansion_keys());
  }
  std::vector<uint8_t> Record(uint64_t row) const {
    const uint32_t r = server->config().shape.record_bytes;
    return {records.begin() + row * r, records.begin() + (row + 1) * r};
  }
  std::vector<uint8_t> records;
  std::unique_ptr<PackedSimpleServer> server;
  std::unique_ptr<PackedSimpleClient> client;
  he::GaloisKeys keys;
};

void ExpectRowsDecode(const HybridFixture& f, const std::vector<uint64_t>& rows) {
  const Shape& shape = f.server->config().shape;
  const RingContext& ring = f.client->ring();
  for (uint64_t row : rows) {
    const PackedQuery q = *f.client->MakeQuery(row);
    EXPECT_EQ(q.selection.size(), HybridSelectionBytes(ring, shape));
    const std::vector<uint8_t> response =
        *f.server->Answer(q.query, q.ciphertext, f.keys, q.selection);
    EXPECT_EQ(response.size(), HybridResponseBytes(ring, shape));
    std::vector<uint8_t> record(shape.record_bytes);
    ASSERT_TRUE(f.client->Decode(row, response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, f.Record(row)) << "row " << row;
  }
}

TEST(HybridTest, StraddlingRecordsDecodeFromTheirWindow) {
  // 900 records of 100 bytes, 50 per column: D1 = 5,000 rows, 5 groups of N = 1,024; a record
  // can straddle two, so the window is 2 of 4 starts (2 bits). Slot 10 (rows 1,000..1,099)
  // straddles groups 0 and 1; slot 49 (the last) needs the clamped last window.
  HybridFixture f(900, 100, 50, 300);
  const Shape& shape = f.server->config().shape;
  ASSERT_EQ(shape.d1, 5000u);
  const HybridWindow w = HybridWindowFor(f.client->ring(), shape);
  EXPECT_EQ(w.groups, 5u);
  EXPECT_EQ(w.window, 2u);
  EXPECT_EQ(w.bits, 2u);
  const uint64_t d0 = shape.d0;
  ExpectRowsDecode(f, {0, 10 * d0 + 3, 49 * d0 + 5, 30 * d0, 899});
}

TEST(HybridTest, AlignedRecordsTakeOneCiphertextThroughAPaddedTree) {
  // 16-byte records, 160 per column: D1 = 2,560 rows, 3 groups, a window of 1; 3 starts need
  // 2 bits, the tree's fourth leaf a copy of the third.
  HybridFixture f(1000, 16, 160, 301, /*threads=*/2);
  const Shape& shape = f.server->config().shape;
  const HybridWindow w = HybridWindowFor(f.client->ring(), shape);
  EXPECT_EQ(w.groups, 3u);
  EXPECT_EQ(w.window, 1u);
  EXPECT_EQ(w.starts, 3u);
  EXPECT_EQ(w.bits, 2u);
  EXPECT_EQ(f.server->response_bytes(), 8u * 1024);
  const uint64_t d0 = shape.d0;
  ExpectRowsDecode(f, {0, 64 * d0 + 1, 128 * d0 + 2, 999});  // 999: slot 142, in group 2
}

TEST(HybridTest, BadSelectionsFailTheirRequestOnly) {
  HybridFixture f(900, 100, 50, 302);
  const PackedQuery good = *f.client->MakeQuery(17);
  const PackedQuery other = *f.client->MakeQuery(12 * f.server->config().shape.d0);
  // No selection; a truncated one; one with a residue above its prime; keys without the
  // conversion key (ExpPack(S)'s).
  std::vector<uint8_t> above = good.selection;
  for (size_t i = 32; i < 36; ++i) above[i] = 0xff;
  he::GaloisKeys expansion_only = f.keys;
  expansion_only.keys.erase(kConversionKeyElement);
  std::vector<PackedRequest> requests = {
      {good.query, good.ciphertext, BorrowKeys(f.keys), {}},
      {good.query, good.ciphertext, BorrowKeys(f.keys),
       absl::MakeConstSpan(good.selection).first(good.selection.size() - 1)},
      {good.query, good.ciphertext, BorrowKeys(f.keys), above},
      {good.query, good.ciphertext, BorrowKeys(expansion_only), good.selection},
      {other.query, other.ciphertext, BorrowKeys(f.keys), other.selection},
  };
  const auto responses = f.server->AnswerBatch(requests);
  ASSERT_EQ(responses.size(), 5u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(responses[r].status().code(), absl::StatusCode::kInvalidArgument) << r;
  }
  EXPECT_THAT(responses[1].status().message(), HasSubstr("bytes, got"));
  EXPECT_THAT(responses[2].status().message(), HasSubstr("not below"));
  EXPECT_EQ(responses[3].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(responses[3].status().message(), HasSubstr("conversion key"));
  ASSERT_TRUE(responses[4].ok()) << responses[4].status();
  std::vector<uint8_t> record(100);
  const uint64_t row = 12 * f.server->config().shape.d0;
  ASSERT_TRUE(f.client->Decode(row, *responses[4], absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, f.Record(row));
  // Another record's window decodes to another record, not this one: the client never takes
  // rows from outside its window for its own.
  ASSERT_TRUE(f.client->Decode(17, *responses[4], absl::MakeSpan(record)).ok());
  EXPECT_NE(record, f.Record(17));
  // ExpPack(S) takes no selection.
  LweServerOptions options;
  options.shape.records_per_column = 50;
  auto plain = PackedSimpleServer::Create(
      *LweServer::FromRecords(f.records, 900, 100, testing::DigestOf(302), options),
      testing::SmallRing());
  ASSERT_TRUE(plain.ok()) << plain.status();
  const absl::Status refused =
      (*plain)->Answer(good.query, good.ciphertext, f.keys, good.selection).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "lwe-exppack-s takes no selection");
}

// The CPU's product reporting itself off the host, as a device's does.
class OffHostProduct final : public DatabaseProduct {
 public:
  explicit OffHostProduct(std::unique_ptr<DatabaseProduct> cpu) : cpu_(std::move(cpu)) {}
  std::string name() const override { return "off-host"; }
  bool on_host() const override { return false; }
  absl::Status Multiply(absl::Span<const uint32_t> queries, int batch,
                        absl::Span<uint32_t> out) const override {
    return cpu_->Multiply(queries, batch, out);
  }

 private:
  std::unique_ptr<DatabaseProduct> cpu_;
};

// With a product off the host the selections are expanded beside it instead of after it: the
// same bytes, a bad selection failing its request alone.
TEST(HybridTest, SelectionsBesideAProductOffTheHostAnswerAsAfterIt) {
  HybridFixture f(900, 100, 50, 303, /*threads=*/2);
  LweServerOptions options;
  options.shape.records_per_column = 50;
  options.threads = 2;
  auto lwe = LweServer::FromRecords(f.records, 900, 100, testing::DigestOf(303), options);
  ASSERT_TRUE(lwe.ok()) << lwe.status();
  (*lwe)->SetDatabaseProduct(
      std::make_unique<OffHostProduct>(MakeCpuProduct((*lwe)->database().view(), 2)));
  ASSERT_FALSE((*lwe)->database_product().on_host());
  auto off =
      PackedSimpleServer::Create(*std::move(lwe), testing::SmallRing(), PackedProtocol::kHybrid);
  ASSERT_TRUE(off.ok()) << off.status();
  const uint64_t d0 = f.server->config().shape.d0;
  const std::vector<uint64_t> rows = {10 * d0 + 3, 1, 49 * d0 + 5};
  std::vector<PackedQuery> queries;
  for (uint64_t row : rows) queries.push_back(*f.client->MakeQuery(row));
  std::vector<uint8_t> above = queries[1].selection;
  for (size_t i = 32; i < 36; ++i) above[i] = 0xff;
  const std::vector<PackedRequest> requests = {
      {queries[0].query, queries[0].ciphertext, BorrowKeys(f.keys), queries[0].selection},
      {queries[1].query, queries[1].ciphertext, BorrowKeys(f.keys), above},
      {queries[2].query, queries[2].ciphertext, BorrowKeys(f.keys), queries[2].selection},
  };
  const auto want = f.server->AnswerBatch(requests);
  const auto got = (*off)->AnswerBatch(requests);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_THAT(got[1].status().message(), HasSubstr("not below"));
  EXPECT_EQ(got[1].status(), want[1].status());
  for (size_t i : {0, 2}) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    EXPECT_EQ(*got[i], *want[i]) << "request " << i;
    std::vector<uint8_t> record(100);
    ASSERT_TRUE(f.client->Decode(rows[i], *got[i], absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, f.Record(rows[i])) << "row " << rows[i];
  }
}

TEST(HybridTest, ASelectionPreparedAheadSelectsTheWindowItIsGivenLater) {
  // One encryption of zero, made ahead, finished for each of a window's 4 starts (2 bits) of 5
  // groups: the server's expansion and CMux trees pick groups start and start + 1.
  const RingContext ring = *RingContext::Create(testing::SmallRing());
  const he::SecretKey key = he::GenerateSecretKey(*ring.expansion());
  const RlweSecret z = RlweSecret::FromKey(ring, key);
  const he::GaloisKeys keys = *ParseHybridKeys(ring, *MakeHybridKeys(ring, key));
  const HybridWindow window{.groups = 5, .window = 2, .starts = 4, .bits = 2};
  std::vector<RlweCiphertext> packed;
  for (uint32_t g = 0; g < window.groups; ++g) {
    packed.push_back(*EncryptWords(ring, z, std::vector<uint32_t>(4, (g + 1) << 24)));
  }
  const absl::StatusOr<std::vector<uint8_t>> prepared = PrepareHybridSelection(ring, z, window);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_EQ(prepared->size(), SecretCiphertextBytes(ring));
  for (uint64_t start = 0; start < window.starts; ++start) {
    std::vector<uint8_t> selection = *prepared;
    ASSERT_TRUE(AddHybridSelection(ring, window, start, absl::MakeSpan(selection)).ok());
    // The mask's seed is the prepared one's; the bits change c0 only.
    EXPECT_TRUE(std::equal(prepared->begin(), prepared->begin() + 32, selection.begin()));
    EXPECT_EQ(selection == *prepared, start == 0) << start;
    const auto bits = ExpandHybridSelection(ring, window, keys, selection);
    ASSERT_TRUE(bits.ok()) << bits.status();
    const auto selected = SelectWindow(ring, window, packed, *bits);
    ASSERT_TRUE(selected.ok()) << selected.status();
    ASSERT_EQ(selected->size(), window.window);
    for (uint64_t j = 0; j < window.window; ++j) {
      const std::vector<uint32_t> words = *DecryptWords(ring, z, (*selected)[j]);
      EXPECT_EQ((words[0] + (1u << 23)) >> 24, start + j + 1) << "start " << start << ", " << j;
    }
  }
  // A start past the last, a selection of another size; one window needs no selection.
  std::vector<uint8_t> selection = *prepared;
  EXPECT_EQ(AddHybridSelection(ring, window, 4, absl::MakeSpan(selection)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddHybridSelection(ring, window, 0, absl::MakeSpan(selection).first(100)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selection, *prepared) << "a refused start changed the selection";
  const HybridWindow one{.groups = 1, .window = 1, .starts = 1, .bits = 0};
  EXPECT_TRUE(PrepareHybridSelection(ring, z, one)->empty());
  EXPECT_TRUE(AddHybridSelection(ring, one, 0, {}).ok());
  EXPECT_EQ(AddHybridSelection(ring, one, 0, absl::MakeSpan(selection)).code(),
            absl::StatusCode::kInvalidArgument);
  const HybridWindow too_many{.groups = 1u << 20, .window = 1, .starts = 1u << 20, .bits = 400};
  EXPECT_EQ(PrepareHybridSelection(ring, z, too_many).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HybridTest, TheSelectionOnSeveralThreadsIsTheSelectionOnOne) {
  // 7 starts (3 bits, one leaf of padding) of a window of 2 among 8 groups: the expansion's
  // subtrees, the bits' conversions and each level's CMuxes side by side give the same bits.
  const RingContext ring = *RingContext::Create(testing::SmallRing());
  const he::SecretKey key = he::GenerateSecretKey(*ring.expansion());
  const RlweSecret z = RlweSecret::FromKey(ring, key);
  const he::GaloisKeys keys = *ParseHybridKeys(ring, *MakeHybridKeys(ring, key));
  const HybridWindow window{.groups = 8, .window = 2, .starts = 7, .bits = 3};
  std::vector<RlweCiphertext> packed;
  for (uint32_t g = 0; g < window.groups; ++g) {
    packed.push_back(*EncryptWords(ring, z, std::vector<uint32_t>(4, (g + 1) << 24)));
  }
  for (const uint64_t start : {0u, 5u, 6u}) {
    const std::vector<uint8_t> selection = *MakeHybridSelection(ring, z, window, start);
    const auto bits = ExpandHybridSelection(ring, window, keys, selection, 1);
    ASSERT_TRUE(bits.ok()) << bits.status();
    const auto selected = SelectWindow(ring, window, packed, *bits, 1);
    ASSERT_TRUE(selected.ok()) << selected.status();
    for (uint64_t j = 0; j < window.window; ++j) {
      const std::vector<uint32_t> words = *DecryptWords(ring, z, (*selected)[j]);
      EXPECT_EQ((words[0] + (1u << 23)) >> 24, start + j + 1) << "start " << start << ", " << j;
    }
    for (const int threads : {2, 3, 4, 8, 16}) {
      const auto spread = ExpandHybridSelection(ring, window, keys, selection, threads);
      ASSERT_TRUE(spread.ok()) << spread.status();
      ASSERT_EQ(spread->size(), bits->size());
      for (size_t b = 0; b < bits->size(); ++b) {
        EXPECT_EQ((*spread)[b].parts, (*bits)[b].parts) << threads << " threads, bit " << b;
      }
      const auto also = SelectWindow(ring, window, packed, *bits, threads);
      ASSERT_TRUE(also.ok()) << also.status();
      ASSERT_EQ(also->size(), selected->size());
      for (size_t j = 0; j < also->size(); ++j) {
        EXPECT_EQ((*also)[j].c0, (*selected)[j].c0) << threads << " threads, start " << start;
        EXPECT_EQ((*also)[j].c1, (*selected)[j].c1) << threads << " threads, start " << start;
      }
    }
  }
  const std::vector<uint8_t> selection = *MakeHybridSelection(ring, z, window, 1);
  const auto bits = ExpandHybridSelection(ring, window, keys, selection);
  ASSERT_TRUE(bits.ok()) << bits.status();
  EXPECT_EQ(SelectWindow(ring, window, packed, *bits, 0).status().message(),
            "threads must be at least 1");
  EXPECT_EQ(ExpandHybridSelection(ring, window, keys, selection, 0).status().message(),
            "threads must be at least 1");
}

TEST(HybridTest, TheSelectionsNoiseIsWithinTheRule) {
  const RingContext ring = *RingContext::Create(RingParams::Default());
  const PackingNoise exppack = ExpPackNoiseBound(ring, kLweDimension);
  // Each level adds an external product's error: the expanded parts' (7 levels of expansion
  // for 40 bits) through the digits, a few words at most; even 40 levels (a trillion groups)
  // stay within the rule, and 2^24 x 64 B's 3 bits add a hundredth of a word.
  const PackingNoise three = HybridNoiseBound(ring, kLweDimension, 3);
  const PackingNoise forty = HybridNoiseBound(ring, kLweDimension, 40);
  std::printf("hybrid sigma: %.3f (ExpPack(S)), %.3f (3 bits), %.3f (40 bits) words\n",
              exppack.sigma, three.sigma, forty.sigma);
  EXPECT_GT(three.sigma, exppack.sigma);
  EXPECT_LT(three.sigma, exppack.sigma + 0.05);
  EXPECT_GT(forty.sigma, three.sigma);
  EXPECT_LT(forty.sigma, exppack.sigma * 1.05);
  EXPECT_EQ(HybridNoiseBound(ring, kLweDimension, 0).sigma, exppack.sigma);
  EXPECT_TRUE(HybridNoiseWithinRule(ring, kLweDimension, 40));
  // At the failing parameters of ExpPackTest.TooLittleModulusFailsAsPredicted it fails too.
  const RingContext small =
      *RingContext::Create(*RingParams::Create(12, {8380417, 8273921, 8257537}, 40961));
  EXPECT_FALSE(HybridNoiseWithinRule(small, kLweDimension, 3));
}

}  // namespace
}  // namespace veil::lattice
