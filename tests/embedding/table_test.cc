#include "embedding/table.h"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "embedding/row_format.h"
#include "embedding/table_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/embedding/test_util.h"

namespace veil::embedding {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

std::vector<float> RandomValues(uint64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

std::unique_ptr<Table> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(path);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::move(*table) : nullptr;
}

struct FormatCase {
  RowFormat format;
  uint32_t dim;
};

class TableRoundTripTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(TableRoundTripTest, RowsDecodeLikeTheirEncoding) {
  const auto [format, dim] = GetParam();
  ScratchDir dir;
  const uint64_t rows = 37;
  const std::vector<float> values = RandomValues(rows * dim, dim);
  const TableOptions options{.epoch = 42, .frac_bits = 12};
  ASSERT_TRUE(WriteTable(dir.File("t.veil"), format, dim, values, options).ok());
  EXPECT_THAT(dir.Entries(), ElementsAre("t.veil"));

  std::unique_ptr<Table> table = OpenOrDie(dir.File("t.veil"));
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->rows(), rows);
  EXPECT_EQ(table->dim(), dim);
  EXPECT_EQ(table->format(), format);
  EXPECT_EQ(table->row_words(), RowWords(format, dim));
  EXPECT_EQ(table->stride_words() % 16, 0u);
  EXPECT_EQ(table->epoch(), 42u);
  EXPECT_EQ(table->frac_bits(), format == RowFormat::kFixed32 ? 12 : 0);
  EXPECT_TRUE(table->Verify().ok());
  EXPECT_EQ(table->DigestHex().size(), 64u);

  const dpf::TableView view = table->view();
  EXPECT_EQ(view.rows, rows);
  EXPECT_EQ(view.row_words, table->row_words());
  EXPECT_EQ(view.stride(), table->stride_words());

  std::vector<uint32_t> expected_words(table->row_words());
  std::vector<float> expected(dim), decoded(dim);
  for (uint64_t r = 0; r < rows; ++r) {
    const auto row_values = absl::MakeConstSpan(values).subspan(r * dim, dim);
    ASSERT_TRUE(
        EncodeRow(format, table->frac_bits(), row_values, absl::MakeSpan(expected_words)).ok());
    EXPECT_THAT(table->row(r), ::testing::ElementsAreArray(expected_words)) << "row " << r;
    EXPECT_EQ(view.row(r), table->row(r).data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(table->row(r).data()) % 64, 0u) << "row " << r;
    // Padding words are zero.
    for (uint64_t w = table->row_words(); w < table->stride_words(); ++w) {
      EXPECT_EQ(view.row(r)[w], 0u);
    }
    ASSERT_TRUE(
        DecodeRow(format, table->frac_bits(), dim, expected_words, absl::MakeSpan(expected)).ok());
    ASSERT_TRUE(table->DecodeRow(r, absl::MakeSpan(decoded)).ok());
    for (uint32_t i = 0; i < dim; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(decoded[i]), std::bit_cast<uint32_t>(expected[i]));
    }
    if (format == RowFormat::kFp32) {
      for (uint32_t i = 0; i < dim; ++i) EXPECT_EQ(decoded[i], row_values[i]);
    }
  }
  EXPECT_EQ(table->DecodeRow(rows, absl::MakeSpan(decoded)).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, TableRoundTripTest,
    ::testing::Values(FormatCase{RowFormat::kFp32, 1}, FormatCase{RowFormat::kFp32, 16},
                      FormatCase{RowFormat::kFp32, 17}, FormatCase{RowFormat::kFp16, 1},
                      FormatCase{RowFormat::kFp16, 33}, FormatCase{RowFormat::kInt8RowWise, 3},
                      FormatCase{RowFormat::kInt8RowWise, 64}, FormatCase{RowFormat::kFixed32, 5},
                      FormatCase{RowFormat::kFixed32, 32}),
    [](const ::testing::TestParamInfo<FormatCase>& info) {
      return RowFormatName(info.param.format) + "_dim" + std::to_string(info.param.dim);
    });

TEST(TableTest, RowsAcrossWriteChunks) {
  ScratchDir dir;
  const uint64_t rows = 9000;  // more than two of the writer's 4096-row chunks
  const std::vector<float> values = RandomValues(rows * 3, 5);
  ASSERT_TRUE(WriteTable(dir.File("t"), RowFormat::kFp32, 3, values, {}).ok());
  std::unique_ptr<Table> table = OpenOrDie(dir.File("t"));
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->rows(), rows);
  for (uint64_t r : {0ull, 4095ull, 4096ull, 8191ull, 8192ull, 8999ull}) {
    EXPECT_EQ(std::bit_cast<float>(table->row(r)[2]), values[r * 3 + 2]) << r;
  }
  EXPECT_TRUE(table->Verify().ok());
}

TEST(TableTest, DigestNamesContentsAndEpoch) {
  ScratchDir dir;
  const std::vector<float> values = RandomValues(20, 1);
  ASSERT_TRUE(WriteTable(dir.File("a"), RowFormat::kFp16, 4, values, {.epoch = 1}).ok());
  ASSERT_TRUE(WriteTable(dir.File("b"), RowFormat::kFp16, 4, values, {.epoch = 1}).ok());
  ASSERT_TRUE(WriteTable(dir.File("c"), RowFormat::kFp16, 4, values, {.epoch = 2}).ok());
  ASSERT_TRUE(WriteTable(dir.File("d"), RowFormat::kFp16, 5, values, {.epoch = 1}).ok());
  const std::string a = OpenOrDie(dir.File("a"))->DigestHex();
  EXPECT_EQ(a, OpenOrDie(dir.File("b"))->DigestHex());
  EXPECT_NE(a, OpenOrDie(dir.File("c"))->DigestHex());
  EXPECT_NE(a, OpenOrDie(dir.File("d"))->DigestHex());
}

// A small table (3 rows of 5 fp32 words: 128 + 3 * 64 bytes) whose every byte is tested.
std::string WriteSmallTable(const ScratchDir& dir) {
  const std::string path = dir.File("small");
  EXPECT_TRUE(WriteTable(path, RowFormat::kFixed32, 5, RandomValues(15, 3), {.epoch = 9}).ok());
  return path;
}

TEST(TableTest, EveryFlippedByteIsDetected) {
  ScratchDir dir;
  const std::string original = ReadBytes(WriteSmallTable(dir));
  ASSERT_EQ(original.size(), 128u + 3 * 64);
  const std::string path = dir.File("flipped");
  for (size_t i = 0; i < original.size(); ++i) {
    std::string bytes = original;
    bytes[i] ^= 0x01;
    WriteBytes(path, bytes);
    absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(path);
    const absl::Status status = table.ok() ? (*table)->Verify() : table.status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "byte " << i;
  }
  // In the rows, the header still validates and only the digest catches the change.
  std::string bytes = original;
  bytes[128 + 64 + 7] ^= 0x80;
  WriteBytes(path, bytes);
  std::unique_ptr<Table> table = OpenOrDie(path);
  ASSERT_NE(table, nullptr);
  EXPECT_THAT(table->Verify().message(), HasSubstr("digest mismatch"));
}

TEST(TableTest, EveryTruncationIsRejected) {
  ScratchDir dir;
  const std::string original = ReadBytes(WriteSmallTable(dir));
  const std::string path = dir.File("truncated");
  for (size_t length = 0; length < original.size(); ++length) {
    WriteBytes(path, original.substr(0, length));
    absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(path);
    ASSERT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument) << "length " << length;
    EXPECT_THAT(table.status().message(),
                HasSubstr(length < sizeof(TableHeader) ? "truncated" : "size mismatch"));
  }
  WriteBytes(path, original + "x");
  EXPECT_THAT(Table::Open(path).status().message(), HasSubstr("size mismatch"));
}

// Rewrites one header field of the small table and expects Open to name it.
struct HeaderCorruption {
  std::string name;
  std::function<void(TableHeader&)> corrupt;
  std::string message;
};

class HeaderValidationTest : public ::testing::TestWithParam<HeaderCorruption> {};

TEST_P(HeaderValidationTest, NamesTheField) {
  ScratchDir dir;
  std::string bytes = ReadBytes(WriteSmallTable(dir));
  TableHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  GetParam().corrupt(header);
  std::memcpy(bytes.data(), &header, sizeof(header));
  const std::string path = dir.File("corrupt");
  WriteBytes(path, bytes);
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(path);
  ASSERT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(), HasSubstr(GetParam().message));
  EXPECT_THAT(table.status().message(), HasSubstr(path));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, HeaderValidationTest,
    ::testing::Values(
        HeaderCorruption{"magic", [](TableHeader& h) { h.magic[0] = 'X'; }, "bad magic"},
        HeaderCorruption{"version", [](TableHeader& h) { h.version = 3; }, "unsupported version 3"},
        HeaderCorruption{"row_tag", [](TableHeader& h) { h.row_tag = 9; }, "unknown row tag 9"},
        HeaderCorruption{"header_bytes", [](TableHeader& h) { h.header_bytes = 64; },
                         "header_bytes is 64"},
        HeaderCorruption{"format_zero", [](TableHeader& h) { h.format = 0; },
                         "unknown row format 0"},
        HeaderCorruption{"format_high", [](TableHeader& h) { h.format = 200; },
                         "unknown row format 200"},
        HeaderCorruption{"dim_zero", [](TableHeader& h) { h.dim = 0; }, "dim 0"},
        HeaderCorruption{"dim_huge", [](TableHeader& h) { h.dim = 0xffffffffu; }, "dim 4294967295"},
        HeaderCorruption{"row_words", [](TableHeader& h) { h.row_words = 6; }, "row_words 6"},
        HeaderCorruption{"stride_words", [](TableHeader& h) { h.stride_words = 8; },
                         "stride_words 8"},
        HeaderCorruption{"frac_bits", [](TableHeader& h) { h.frac_bits = 32; }, "frac_bits 32"},
        HeaderCorruption{"frac_bits_not_fixed",
                         [](TableHeader& h) {
                           h.format = static_cast<uint8_t>(RowFormat::kFp32);
                           h.frac_bits = 1;
                         },
                         "frac_bits 1"},
        HeaderCorruption{"rows_zero", [](TableHeader& h) { h.rows = 0; }, "rows 0"},
        HeaderCorruption{"rows_overflow", [](TableHeader& h) { h.rows = ~uint64_t{0}; },
                         "rows 18446744073709551615"},
        HeaderCorruption{"rows_size", [](TableHeader& h) { h.rows = 4; }, "data_bytes"},
        HeaderCorruption{"data_bytes", [](TableHeader& h) { h.data_bytes += 64; }, "data_bytes"},
        HeaderCorruption{"data_bytes_and_rows",
                         [](TableHeader& h) {
                           h.rows = 4;
                           h.data_bytes = 4 * 64;
                         },
                         "size mismatch"},
        HeaderCorruption{"reserved", [](TableHeader& h) { h.reserved[40] = 1; }, "reserved"}),
    [](const ::testing::TestParamInfo<HeaderCorruption>& info) { return info.param.name; });

TEST(TableTest, OpenErrors) {
  ScratchDir dir;
  EXPECT_EQ(Table::Open(dir.File("missing")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Table::Open(dir.File("")).status().message(), HasSubstr("not a regular file"));
}

TEST(TableBuilderTest, RejectsBadInputAndLeavesNothing) {
  ScratchDir dir;
  const std::string path = dir.File("t");
  const std::vector<float> values = RandomValues(10, 2);
  EXPECT_THAT(WriteTable(path, RowFormat::kFp32, 3, values, {}).message(),
              HasSubstr("rows of dim 3"));
  EXPECT_THAT(WriteTable(path, RowFormat::kFp32, 1, {}, {}).message(), HasSubstr("0 values"));
  EXPECT_THAT(WriteTable(path, RowFormat::kFp32, 0, values, {}).message(), HasSubstr("dim 0"));
  EXPECT_THAT(WriteTable(path, static_cast<RowFormat>(7), 2, values, {}).message(),
              HasSubstr("unknown row format"));
  EXPECT_THAT(WriteTable(path, RowFormat::kFixed32, 2, values, {.frac_bits = 40}).message(),
              HasSubstr("frac_bits 40"));
  std::vector<float> too_big = values;
  too_big[7] = 1e6f;
  const absl::Status status = WriteTable(path, RowFormat::kFixed32, 2, too_big, {.frac_bits = 16});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("row 3: value 1e+06 at index 1"));
  EXPECT_TRUE(dir.Entries().empty()) << "a failed write must leave no file behind";
  EXPECT_EQ(WriteTable(dir.File("no/such/dir"), RowFormat::kFp32, 2, values, {}).code(),
            absl::StatusCode::kNotFound);
}

TEST(TableBuilderTest, FailedRewriteKeepsTheOldTable) {
  ScratchDir dir;
  const std::string path = dir.File("t");
  const std::vector<float> values = RandomValues(10, 4);
  ASSERT_TRUE(WriteTable(path, RowFormat::kFp32, 2, values, {}).ok());
  const std::string before = ReadBytes(path);
  std::vector<float> bad = values;
  bad[9] = std::nanf("");
  EXPECT_FALSE(WriteTable(path, RowFormat::kInt8RowWise, 2, bad, {}).ok());
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_THAT(dir.Entries(), ElementsAre("t"));
}

TEST(CsvTest, ReadsRowsWithHeaderCrlfAndBlankLines) {
  ScratchDir dir;
  WriteBytes(dir.File("in.csv"), "a,b,c\r\n1, 2.5 ,-3\r\n\r\n4e-1,5,6\n  \n7,8,9");
  ASSERT_TRUE(WriteTableFromCsv(dir.File("in.csv"), dir.File("t"), RowFormat::kFp32, 0, {}).ok());
  std::unique_ptr<Table> table = OpenOrDie(dir.File("t"));
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->rows(), 3u);
  ASSERT_EQ(table->dim(), 3u);
  std::vector<float> row(3);
  ASSERT_TRUE(table->DecodeRow(1, absl::MakeSpan(row)).ok());
  EXPECT_THAT(row, ElementsAre(0.4f, 5.0f, 6.0f));
  ASSERT_TRUE(table->DecodeRow(0, absl::MakeSpan(row)).ok());
  EXPECT_THAT(row, ElementsAre(1.0f, 2.5f, -3.0f));
}

TEST(CsvTest, ErrorsNameTheLine) {
  ScratchDir dir;
  const std::string csv = dir.File("in.csv");
  const std::string out = dir.File("t");
  struct Case {
    std::string contents;
    uint32_t dim;
    std::string message;
  };
  const Case cases[] = {
      {"1,2,3\n4,abc,6\n", 0, "in.csv:2: field 2 ('abc') is not a number"},
      {"x,y\n1,2\n\n3\n", 0, "in.csv:4: expected 2 values, got 1"},
      {"1,2\n", 3, "in.csv:1: expected 3 values, got 2"},
      {"1,2,\n", 0, "in.csv:1: field 3 ('') is not a number"},
      {"1,x\n", 0, "in.csv:1: field 2 ('x') is not a number"},  // a header has no numbers
      {"a,b\n", 0, "no rows"},
      {"", 0, "no rows"},
  };
  for (const Case& c : cases) {
    WriteBytes(csv, c.contents);
    const absl::Status status = WriteTableFromCsv(csv, out, RowFormat::kFp16, c.dim, {});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.contents;
    EXPECT_THAT(status.message(), HasSubstr(c.message)) << c.contents;
  }
  EXPECT_EQ(WriteTableFromCsv(dir.File("missing.csv"), out, RowFormat::kFp16, 0, {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.Entries(), ElementsAre("in.csv"));
}

TEST(F32FileTest, ReadsRawFloats) {
  ScratchDir dir;
  const std::vector<float> values = RandomValues(12, 6);
  WriteBytes(dir.File("in.f32"), std::string(reinterpret_cast<const char*>(values.data()),
                                             values.size() * sizeof(float)));
  ASSERT_TRUE(
      WriteTableFromF32File(dir.File("in.f32"), dir.File("t"), RowFormat::kFp32, 4, {.epoch = 3})
          .ok());
  std::unique_ptr<Table> table = OpenOrDie(dir.File("t"));
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->rows(), 3u);
  EXPECT_EQ(std::bit_cast<float>(table->row(2)[3]), values[11]);
  EXPECT_THAT(
      WriteTableFromF32File(dir.File("in.f32"), dir.File("u"), RowFormat::kFp32, 5, {}).message(),
      HasSubstr("48 bytes are not a nonzero number of rows of 5"));
  EXPECT_THAT(
      WriteTableFromF32File(dir.File("in.f32"), dir.File("u"), RowFormat::kFp32, 0, {}).message(),
      HasSubstr("dim must be given"));
}

}  // namespace
}  // namespace veil::embedding
