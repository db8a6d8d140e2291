// SimplePIR and DoublePIR end to end below the sockets: every query decrypts to the plaintext
// record on random tables of awkward shapes, from table files of every row format, in batches of
// 1, 3 and 32; the hint file is reused, recomputed when stale and rejected when malformed; bad
// input gives clear errors.
#include <cstring>
#include <fstream>
#include <random>

#include "embedding/table_builder.h"
#include "gtest/gtest.h"
#include "pir/lattice/client.h"
#include "pir/lattice/server.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using testing::ClientFor;
using testing::DigestOf;
using testing::LookUp;
using testing::RandomRecords;

constexpr Protocol kProtocols[] = {Protocol::kSimplePir, Protocol::kDoublePir};

struct ShapeCase {
  uint64_t rows;
  uint32_t record_bytes;
  uint64_t records_per_column;  // 0: chosen
};

// Looks up `wanted` in batches of `batch` and compares with the records.
void ExpectLookups(const LweServer& server, const std::vector<uint8_t>& records,
                   const std::vector<uint64_t>& wanted, int batch) {
  const std::unique_ptr<LweClient> client = ClientFor(server);
  ASSERT_NE(client, nullptr);
  const uint32_t r = server.shape().record_bytes;
  for (size_t first = 0; first < wanted.size(); first += batch) {
    std::vector<uint64_t> rows(wanted.begin() + first,
                               wanted.begin() + std::min(wanted.size(), first + batch));
    const std::vector<uint8_t> got = testing::LookUp(server, *client, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_TRUE(
          std::equal(got.begin() + i * r, got.begin() + (i + 1) * r, records.begin() + rows[i] * r))
          << ShapeSummary(server.shape()) << ": row " << rows[i] << " of a batch of " << batch;
    }
  }
}

TEST(LweProtocolTest, AwkwardShapesDecryptToTheirRecords) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  const std::vector<ShapeCase> cases = {{1, 4, 0},   {2, 4, 0},     {17, 8, 0}, {17, 12, 17},
                                        {100, 4, 1}, {1000, 20, 0}, {333, 4, 7}};
  for (Protocol protocol : kProtocols) {
    for (const ShapeCase& c : cases) {
      LweServerOptions options;
      options.protocol = protocol;
      options.shape.records_per_column = c.records_per_column;
      options.threads = 2;
      const std::vector<uint8_t> records = RandomRecords(c.rows, c.record_bytes, gen);
      auto server =
          LweServer::FromRecords(records, c.rows, c.record_bytes, DigestOf(c.rows), options);
      ASSERT_TRUE(server.ok()) << server.status();
      // Every row for small tables; the first, the last and random ones otherwise.
      std::vector<uint64_t> wanted = {0, c.rows - 1};
      for (uint64_t i = 0; i < std::min<uint64_t>(c.rows, 6); ++i) wanted.push_back(gen() % c.rows);
      ExpectLookups(**server, records, wanted, 3);
    }
  }
}

TEST(LweProtocolTest, BatchesOfOneThreeAndThirtyTwo) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  for (Protocol protocol : kProtocols) {
    const uint64_t rows = 777;
    const uint32_t record_bytes = protocol == Protocol::kSimplePir ? 16 : 4;
    const std::vector<uint8_t> records = RandomRecords(rows, record_bytes, gen);
    LweServerOptions options;
    options.protocol = protocol;
    auto server = LweServer::FromRecords(records, rows, record_bytes, DigestOf(7), options);
    ASSERT_TRUE(server.ok()) << server.status();
    for (int batch : {1, 3, 32}) {
      std::vector<uint64_t> wanted;
      for (int i = 0; i < batch; ++i) wanted.push_back(gen() % rows);
      ExpectLookups(**server, records, wanted, batch);
    }
  }
}

// The widest first level the rule allows for 4-byte records at p = 2^8: one record per column,
// D0 = width_limit columns.
TEST(LweProtocolTest, LargestWidthForByteElementsDecrypts) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  const uint64_t limit = LargestWidth(Protocol::kSimplePir, kPlaintextModulus, 4);
  ASSERT_GT(limit, uint64_t{1} << 20);
  const std::vector<uint8_t> records = RandomRecords(limit, 4, gen);
  LweServerOptions options;
  options.shape.records_per_column = 1;
  options.threads = 2;
  auto server = LweServer::FromRecords(records, limit, 4, DigestOf(9), options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->shape().d0, limit);
  ExpectLookups(**server, records, {0, limit - 1, gen() % limit}, 3);
  // One more column and the rule refuses the shape.
  auto too_wide = ChooseShape(Protocol::kSimplePir, limit + 1, 4, options.shape);
  EXPECT_EQ(too_wide.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LweProtocolTest, TableFilesOfEveryRowFormat) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  testing::ScratchDir dir;
  for (embedding::RowFormat format :
       {embedding::RowFormat::kFp32, embedding::RowFormat::kFp16,
        embedding::RowFormat::kInt8RowWise, embedding::RowFormat::kFixed32}) {
    const uint64_t rows = 53;
    const uint32_t dim = 5;
    std::vector<float> values(rows * dim);
    std::uniform_real_distribution<float> uniform(-3, 3);
    for (float& v : values) v = uniform(gen);
    const std::string path = dir.File("table" + embedding::RowFormatName(format));
    ASSERT_TRUE(embedding::WriteTable(path, format, dim, values, {}).ok());
    auto table = embedding::Table::Open(path);
    ASSERT_TRUE(table.ok());
    for (Protocol protocol : kProtocols) {
      LweServerOptions options;
      options.protocol = protocol;
      auto server = LweServer::Open(path, options);
      ASSERT_TRUE(server.ok()) << server.status();
      auto client = ClientFor(**server);
      ASSERT_NE(client, nullptr);
      for (uint64_t row : {uint64_t{0}, rows - 1, gen() % rows}) {
        const std::vector<uint8_t> got = LookUp(**server, *client, {row});
        std::vector<uint32_t> words((*table)->row_words());
        std::memcpy(words.data(), got.data(), got.size());
        std::vector<float> decoded(dim), expected(dim);
        ASSERT_TRUE(
            embedding::DecodeRow(format, (*table)->frac_bits(), dim, words, absl::MakeSpan(decoded))
                .ok());
        ASSERT_TRUE((*table)->DecodeRow(row, absl::MakeSpan(expected)).ok());
        EXPECT_EQ(decoded, expected) << embedding::RowFormatName(format) << " row " << row;
      }
    }
  }
}

TEST(LweProtocolTest, HintFileIsReusedAndRecomputedWhenStale) {
  testing::ScratchDir dir;
  const std::string path = dir.File("t.table");
  std::vector<float> values(40 * 3, 0.5f);
  ASSERT_TRUE(embedding::WriteTable(path, embedding::RowFormat::kFp32, 3, values, {}).ok());
  for (Protocol protocol : kProtocols) {
    LweServerOptions options;
    options.protocol = protocol;
    auto first = LweServer::Open(path, options);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_NE((*first)->hint_note(), "");  // absent: computed
    auto second = LweServer::Open(path, options);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ((*second)->hint_note(), "");  // read back
    EXPECT_EQ((*second)->config(), (*first)->config());
  }
  // A new table version at the same path: the hint's digest is stale.
  values[7] = 2.0f;
  embedding::TableOptions epoch1;
  epoch1.epoch = 1;
  ASSERT_TRUE(embedding::WriteTable(path, embedding::RowFormat::kFp32, 3, values, epoch1).ok());
  auto table = embedding::Table::Open(path);
  auto renewed = LweServer::Open(path, {});
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed.value()->hint_note().rfind("stale hint: computed for table digest ", 0), 0u)
      << renewed.value()->hint_note();
  EXPECT_EQ((*renewed)->config().table_digest, (*table)->digest());
  // A corrupted hint file is detected and recomputed.
  const std::string hint_path = HintPathFor(path, Protocol::kSimplePir);
  {
    std::fstream f(hint_path, std::ios::in | std::ios::out | std::ios::binary);
    // Flipped, not overwritten: a fixed byte would change nothing where the hint holds it.
    char byte = 0;
    f.seekg(300);
    f.get(byte);
    f.seekp(300);
    f.put(static_cast<char>(byte ^ 0x5a));
    ASSERT_TRUE(f.good());
  }
  auto repaired = LweServer::Open(path, {});
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired.value()->hint_note(), "the client hint does not match its digest");
}

TEST(LweProtocolTest, HintFileErrorsAreClear) {
  testing::ScratchDir dir;
  std::mt19937_64 gen(5);
  const std::vector<uint8_t> records = RandomRecords(30, 8, gen);
  auto server = LweServer::FromRecords(records, 30, 8, DigestOf(1), {});
  ASSERT_TRUE(server.ok());
  const LweConfig& config = (*server)->config();
  const Shape& shape = config.shape;
  const std::string path = dir.File("h");
  EXPECT_EQ(ReadHintFile(path, shape, config.seed, config.table_digest).status().code(),
            absl::StatusCode::kNotFound);
  std::vector<uint8_t> blob((*server)->hint_blob().begin(), (*server)->hint_blob().end());
  auto write = [&](const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  write(blob);
  EXPECT_TRUE(ReadHintFile(path, shape, config.seed, config.table_digest).ok());
  auto read_error = [&](std::vector<uint8_t> bytes) {
    write(bytes);
    return std::string(
        ReadHintFile(path, shape, config.seed, config.table_digest).status().message());
  };
  std::vector<uint8_t> bad = blob;
  bad[0] = 'X';
  EXPECT_EQ(read_error(bad), "not a veil LWE hint (bad magic)");
  bad = blob;
  bad[8] = 9;
  EXPECT_EQ(read_error(bad), "unsupported hint version 9 (this build reads 1)");
  bad = blob;
  bad[86] = 1;
  EXPECT_EQ(read_error(bad), "hint header: reserved bytes are not zero");
  bad = blob;
  bad.pop_back();
  EXPECT_EQ(read_error(bad),
            path + ": the hint file is not " + std::to_string(blob.size()) + " bytes");
  bad = blob;
  bad.resize(100);
  EXPECT_EQ(read_error(bad), path + ": truncated hint header");
  write(blob);
  EXPECT_EQ(ReadHintFile(path, shape, config.seed, DigestOf(2)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Shape other = shape;
  other.records_per_column += 1;
  EXPECT_EQ(
      ReadHintFile(path, other, config.seed, config.table_digest).status().message().substr(0, 17),
      "stale hint: shape");
}

TEST(LweProtocolTest, BadQueriesConfigsAndHintsAreRejected) {
  std::mt19937_64 gen(6);
  const std::vector<uint8_t> records = RandomRecords(50, 4, gen);
  for (Protocol protocol : kProtocols) {
    LweServerOptions options;
    options.protocol = protocol;
    auto server = LweServer::FromRecords(records, 50, 4, DigestOf(3), options);
    ASSERT_TRUE(server.ok());
    const LweServer& s = **server;
    const uint64_t qw = s.shape().query_words(), aw = s.shape().answer_words();
    std::vector<uint32_t> query(qw), answer(aw);
    // Wrong-length queries (e.g. a SimplePIR query sent to a DoublePIR server) and answers.
    std::vector<uint32_t> short_query(qw - 1);
    EXPECT_EQ(s.Answer(short_query, 1, absl::MakeSpan(answer)).message(),
              "queries hold " + std::to_string(qw - 1) + " words, expected 1 x " +
                  std::to_string(qw) + " (" + std::string(ProtocolName(protocol)) + ")");
    EXPECT_EQ(s.Answer(query, 1, absl::MakeSpan(answer).first(aw - 1)).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.Answer(query, 0, absl::MakeSpan(answer)).message(), "the batch is empty");
    EXPECT_EQ(s.Answer(query, 1, absl::MakeSpan(answer), 0).message(),
              "an answer needs at least one thread");
    // Hint chunks: the last one is in range, the next is not.
    const uint64_t chunks = s.hint_chunks();
    ASSERT_GE(chunks, 1u);
    uint64_t total = 0;
    for (uint64_t i = 0; i < chunks; ++i) total += s.HintChunk(i)->size();
    EXPECT_EQ(total, s.hint_blob().size());
    EXPECT_EQ(s.HintChunk(chunks).status().message(), "hint chunk " + std::to_string(chunks) +
                                                          " is out of range (the hint has " +
                                                          std::to_string(chunks) + " chunks)");
    // The client checks what it is given.
    auto client = ClientFor(s);
    ASSERT_NE(client, nullptr);
    EXPECT_EQ(client->MakeQuery(50, absl::MakeSpan(query)).status().message(),
              "row 50 is outside the table (50 rows)");
    EXPECT_EQ(client->MakeQuery(0, absl::MakeSpan(query).first(3)).status().code(),
              absl::StatusCode::kInvalidArgument);
    std::vector<uint8_t> blob(s.hint_blob().begin(), s.hint_blob().end());
    blob[sizeof(HintHeader) + 5] ^= 1;
    EXPECT_EQ(LweClient::Create(s.config(), blob).status().code(),
              absl::StatusCode::kInvalidArgument);
    LweConfig stale = s.config();
    stale.table_digest = DigestOf(4);  // a new table version, the seed recomputed honestly
    stale.seed = DeriveSeed(stale.shape, stale.table_digest);
    const Seed seed = stale.seed;
    EXPECT_EQ(ParseClientHint(s.hint_blob(), stale.shape, seed, stale.table_digest).status().code(),
              absl::StatusCode::kFailedPrecondition);
    LweConfig chosen_a = s.config();
    chosen_a.seed[0] ^= 1;  // a server choosing A
    EXPECT_EQ(LweClient::Create(chosen_a, s.hint_blob()).status().message(),
              "the seed of A is not the one derived from the table");
    LweConfig too_wide = s.config();
    too_wide.shape.records_per_column = 1;
    too_wide.shape.d0 = 50;
    too_wide.shape.d1 = 4;
    too_wide.shape.rows = 3'000'000;
    EXPECT_EQ(LweClient::Create(too_wide, s.hint_blob()).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Sizes whose products would overflow are refused before anything is computed from them.
    LweConfig huge = s.config();
    huge.shape.rows = uint64_t{1} << 62;
    huge.shape.records_per_column = uint64_t{1} << 61;
    huge.shape.d0 = 2;
    huge.shape.d1 = huge.shape.records_per_column * huge.shape.record_bytes;
    EXPECT_EQ(LweClient::Create(huge, s.hint_blob()).status().message(),
              "the shape's rows, record size or records per column are out of range");
  }
}

}  // namespace
}  // namespace veil::lattice
