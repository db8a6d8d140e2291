// Table::Load (memory the server owns, verified while read), the two-level digest, non-regular
// files, and row authentication tags (embedding/row_tag.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/embedding/test_util.h"

namespace veil::embedding {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

std::vector<float> Values(uint64_t count) {
  std::vector<float> values(count);
  for (uint64_t i = 0; i < count; ++i) values[i] = static_cast<float>(i % 1000) / 8 - 50;
  return values;
}

// A table of `rows` rows of 16 fp32 values, big enough for several digest chunks when asked.
std::string WriteTableOf(const ScratchDir& dir, const std::string& name, uint64_t rows,
                         TableOptions options = {}) {
  const std::string path = dir.File(name);
  EXPECT_TRUE(WriteTable(path, RowFormat::kFp32, 16, Values(rows * 16), options).ok());
  return path;
}

TEST(TableLoadTest, LoadsVerifiedRowsEqualToTheMappedOnes) {
  ScratchDir dir;
  const uint64_t rows = 3 * kDigestChunkBytes / 64 + 5;  // 3 chunks and a partial one
  const std::string path = WriteTableOf(dir, "t", rows);
  for (int threads : {1, 2, 5}) {
    auto loaded = Table::Load(path, {.verify = true, .threads = threads});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto mapped = Table::Open(path);
    ASSERT_TRUE(mapped.ok());
    EXPECT_EQ((*loaded)->digest(), (*mapped)->digest());
    for (uint64_t r : {uint64_t{0}, rows / 2, rows - 1}) {
      auto a = (*loaded)->row(r), b = (*mapped)->row(r);
      EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << "row " << r;
    }
    EXPECT_TRUE((*mapped)->Verify().ok());
  }
}

TEST(TableLoadTest, StreamedAndParallelDigestsAgree) {
  ScratchDir dir;
  const std::string path = WriteTableOf(dir, "t", 2 * kDigestChunkBytes / 64 + 1);
  auto table = Table::Open(path);
  ASSERT_TRUE(table.ok());
  const auto& h = (*table)->header();
  const auto rows =
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>((*table)->row(0).data()), h.data_bytes);
  TableDigest streamed(h);
  for (size_t at = 0; at < rows.size(); at += 77777) {
    streamed.Update(rows.subspan(at, 77777));
  }
  const TableDigestBytes digest = streamed.Finish();
  EXPECT_EQ(digest, (*table)->digest());
  EXPECT_EQ(DigestTable(h, rows, 3), digest);
  EXPECT_EQ(DigestTable(h, rows, 1), digest);
}

TEST(TableLoadTest, AFlippedBitInAnyChunkIsRefusedAtLoad) {
  ScratchDir dir;
  const std::string path = WriteTableOf(dir, "t", 2 * kDigestChunkBytes / 64);
  const std::string original = ReadBytes(path);
  for (size_t at : {size_t{128 + 3}, size_t{128 + kDigestChunkBytes + 100}, original.size() - 1}) {
    std::string bytes = original;
    bytes[at] ^= 0x10;
    const std::string flipped = dir.File("flipped");
    WriteBytes(flipped, bytes);
    auto loaded = Table::Load(flipped, {});
    EXPECT_TRUE(absl::IsInvalidArgument(loaded.status())) << "byte " << at;
    EXPECT_THAT(loaded.status().message(), HasSubstr("digest mismatch"));
    EXPECT_TRUE(Table::Load(flipped, {.verify = false}).ok()) << "only the digest catches it";
  }
}

TEST(TableLoadTest, ALoadedTableOutlivesChangesToItsFile) {
  ScratchDir dir;
  const std::string path = WriteTableOf(dir, "t", 1000);
  auto loaded = Table::Load(path, {});
  ASSERT_TRUE(loaded.ok());
  const std::vector<uint32_t> before((*loaded)->row(999).begin(), (*loaded)->row(999).end());
  // Overwritten in place, then truncated: a mapping would change or fault (SIGBUS).
  std::string bytes = ReadBytes(path);
  std::memset(bytes.data() + 128, 0x55, bytes.size() - 128);
  WriteBytes(path, bytes);
  ASSERT_EQ(truncate(path.c_str(), 64), 0);
  const std::vector<uint32_t> after((*loaded)->row(999).begin(), (*loaded)->row(999).end());
  EXPECT_EQ(before, after);
  EXPECT_TRUE((*loaded)->Verify().ok());
}

TEST(TableLoadTest, AFifoOrAFolderIsRefusedWithoutBlocking) {
  ScratchDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Nobody writes to the FIFO: opening it for reading would block forever.
  for (auto status : {Table::Open(fifo).status(), Table::Load(fifo, {}).status(),
                      Table::Load(dir.File(""), {}).status()}) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("not a regular file"));
  }
}

TEST(RowTagTest, TaggedRowsCarryTheirTagAfterTheData) {
  ScratchDir dir;
  const RowKey key = NewRowKey();
  const std::string path = WriteTableOf(dir, "tagged", 50, {.epoch = 9, .row_key = key});
  auto table = Table::Load(path, {});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->row_tag(), RowTag::kSipHash64Shape);
  EXPECT_EQ((*table)->data_words(), 16u);
  EXPECT_EQ((*table)->row_words(), 18u);
  const RowTag kind = RowTag::kSipHash64Shape;
  const RowShape shape{RowFormat::kFp32, 0, 16};
  for (uint64_t r = 0; r < 50; ++r) {
    auto row = (*table)->row(r);
    const auto data = row.first(16), tag = row.subspan(16);
    EXPECT_TRUE(RowTagMatches(kind, key, 9, r, shape, data, tag));
    EXPECT_FALSE(RowTagMatches(kind, key, 9, r + 1, shape, data, tag)) << "index bound";
    EXPECT_FALSE(RowTagMatches(kind, key, 10, r, shape, data, tag)) << "epoch bound";
    for (const RowShape& other :
         {RowShape{RowFormat::kFixed32, 0, 16}, RowShape{RowFormat::kFp32, 1, 16},
          RowShape{RowFormat::kFp32, 0, 15}}) {
      EXPECT_FALSE(RowTagMatches(kind, key, 9, r, other, data, tag)) << "shape bound";
    }
    EXPECT_FALSE(RowTagMatches(RowTag::kSipHash64Epoch, key, 9, r, shape, data, tag))
        << "kind bound";
    EXPECT_FALSE(RowTagMatches(RowTag::kSipHash64, key, 9, r, shape, data, tag)) << "kind bound";
    EXPECT_FALSE(RowTagMatches(RowTag::kNone, key, 9, r, shape, data, tag));
    std::vector<uint32_t> changed(row.begin(), row.begin() + 16);
    changed[r % 16] ^= 1u << (r % 32);
    EXPECT_FALSE(RowTagMatches(kind, key, 9, r, shape, changed, tag)) << "contents bound";
    RowKey other = key;
    other[r % 16] ^= 1;
    EXPECT_FALSE(RowTagMatches(kind, other, 9, r, shape, data, tag)) << "key bound";
  }
  std::vector<float> values(16);
  ASSERT_TRUE((*table)->DecodeRow(3, absl::MakeSpan(values)).ok());
  EXPECT_EQ(values[0], Values(50 * 16)[3 * 16]);
}

// The tag bytes are part of the file format: pinned against an independent SipHash-2-4 (Python,
// checked on the reference vector of the SipHash paper) over key 00..0f.
TEST(RowTagTest, TagsMatchTheFormatsKnownAnswers) {
  RowKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  const std::vector<uint32_t> data = {0x00000001u, 0xdeadbeefu, 0x3f800000u};
  const RowShape shape{RowFormat::kFixed32, 16, 3};
  // SipHash-2-4(key, le64(5) || data): the epoch is not in kSipHash64's message.
  EXPECT_EQ(ComputeRowTag(RowTag::kSipHash64, key, 7, 5, shape, data),
            (std::array<uint32_t, 2>{0x3e892c7au, 0x0cd7ffc6u}));
  EXPECT_EQ(ComputeRowTag(RowTag::kSipHash64, key, 8, 5, shape, data),
            ComputeRowTag(RowTag::kSipHash64, key, 7, 5, shape, data));
  // SipHash-2-4(key, le64(7) || le64(5) || data).
  EXPECT_EQ(ComputeRowTag(RowTag::kSipHash64Epoch, key, 7, 5, shape, data),
            (std::array<uint32_t, 2>{0xa0417c8du, 0xccf740d4u}));
  // SipHash-2-4(key, le64(7) || le64(5) || u8(4: fixed32) || u8(16) || le32(3) || data).
  EXPECT_EQ(ComputeRowTag(RowTag::kSipHash64Shape, key, 7, 5, shape, data),
            (std::array<uint32_t, 2>{0x262bdfc5u, 0x719f631fu}));
  // Kind 4, the linear MAC: T = (sum_j k_j int32(data_j) + s_5) mod (2^61 - 1) with k_j =
  // SipHash(key, u8(1) || le64(7) || u8(4) || u8(16) || le32(3) || le64(j)) mod p and s_5 the
  // same with u8(2) and le64(5); tag = (T mod 2^31, T >> 31).
  EXPECT_EQ(ComputeRowTag(RowTag::kLinearMac61, key, 7, 5, shape, data),
            (std::array<uint32_t, 2>{0x2fa62b48u, 0x0e2357bfu}));
}

// The linear MAC checks single rows like kind 3, and pooled sums over the integers (what bfv-bag
// returns): right sums pass, and any change of a sum, of the tag columns, of the epoch, of a row
// or of a weight fails.
TEST(RowTagTest, LinearMacTagsCheckRowsAndPooledSums) {
  ScratchDir dir;
  const RowKey key = NewRowKey();
  constexpr uint32_t kDim = 5;
  constexpr uint64_t kRows = 40;
  std::vector<float> values(kRows * kDim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17) - 8.25f;
  const std::string path = dir.File("mac.veil");
  ASSERT_TRUE(
      WriteTable(path, RowFormat::kFixed32, kDim, values,
                 {.epoch = 3, .frac_bits = 8, .row_key = key, .row_tag = RowTag::kLinearMac61})
          .ok());
  auto table = Table::Load(path, {});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->row_tag(), RowTag::kLinearMac61);
  EXPECT_EQ((*table)->row_words(), kDim + 2);
  const RowShape shape{RowFormat::kFixed32, 8, kDim};
  const RowTag kind = RowTag::kLinearMac61;
  for (uint64_t r = 0; r < kRows; ++r) {
    auto row = (*table)->row(r);
    const auto data = row.first(kDim), tag = row.subspan(kDim);
    EXPECT_LT(tag[0], 1u << 31);
    EXPECT_LT(tag[1], 1u << 30);
    EXPECT_TRUE(RowTagMatches(kind, key, 3, r, shape, data, tag));
    EXPECT_FALSE(RowTagMatches(kind, key, 3, r + 1, shape, data, tag)) << "index bound";
    EXPECT_FALSE(RowTagMatches(kind, key, 4, r, shape, data, tag)) << "epoch bound";
    EXPECT_FALSE(RowTagMatches(kind, key, 3, r, RowShape{RowFormat::kFixed32, 9, kDim}, data, tag))
        << "shape bound";
    EXPECT_FALSE(RowTagMatches(RowTag::kSipHash64Shape, key, 3, r, shape, data, tag));
    std::vector<uint32_t> changed(data.begin(), data.end());
    changed[r % kDim] ^= 1u << (r % 32);
    EXPECT_FALSE(RowTagMatches(kind, key, 3, r, shape, changed, tag)) << "contents bound";
  }

  // Bags with repeated rows and negative weights; the sums of every column as integers.
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint64_t> indices(1 + trial % 9);
    std::vector<int64_t> weights(indices.size());
    std::vector<int64_t> sums(kDim + 2, 0);
    for (size_t i = 0; i < indices.size(); ++i) {
      indices[i] = random() % kRows;
      weights[i] = static_cast<int64_t>(random() % 2000) - 1000;
      if (weights[i] >= 0) ++weights[i];  // nonzero: each row's pad counts
      auto row = (*table)->row(indices[i]);
      for (uint32_t j = 0; j < kDim + 2; ++j) sums[j] += weights[i] * static_cast<int32_t>(row[j]);
    }
    ASSERT_TRUE(PooledRowTagMatches(key, 3, shape, indices, weights, sums)) << trial;
    EXPECT_FALSE(PooledRowTagMatches(key, 4, shape, indices, weights, sums)) << "epoch bound";
    EXPECT_FALSE(PooledRowTagMatches(key, 3, RowShape{RowFormat::kFixed32, 8, kDim + 1}, indices,
                                     weights, sums))
        << "shape bound";
    for (uint32_t j = 0; j < kDim + 2; ++j) {
      for (int64_t delta : {int64_t{1}, int64_t{-1}, int64_t{1} << 31, int64_t{1} << 56}) {
        std::vector<int64_t> wrong = sums;
        wrong[j] += delta;
        EXPECT_FALSE(PooledRowTagMatches(key, 3, shape, indices, weights, wrong))
            << "column " << j << " off by " << delta;
      }
    }
    // The same tag value written as (L - 2^31, H + 1) is the same sum: accepted.
    std::vector<int64_t> carried = sums;
    carried[kDim] -= int64_t{1} << 31;
    carried[kDim + 1] += 1;
    EXPECT_TRUE(PooledRowTagMatches(key, 3, shape, indices, weights, carried));
    std::vector<uint64_t> other_rows = indices;
    other_rows[0] = (other_rows[0] + 1) % kRows;
    EXPECT_FALSE(PooledRowTagMatches(key, 3, shape, other_rows, weights, sums)) << "rows bound";
    std::vector<int64_t> other_weights = weights;
    other_weights[0] += 1;
    EXPECT_FALSE(PooledRowTagMatches(key, 3, shape, indices, other_weights, sums))
        << "weights bound";
    EXPECT_FALSE(PooledRowTagMatches(key, 3, shape, indices, weights,
                                     absl::MakeConstSpan(sums).first(kDim + 1)));
  }
}

TEST(RowTagTest, KeyFilesRoundTripPrivately) {
  ScratchDir dir;
  const RowKey key = NewRowKey();
  const std::string path = dir.File("t.rowkey");
  ASSERT_TRUE(WriteRowKeyFile(path, key).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto read = ReadRowKeyFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, key);
  WriteBytes(path, "not a key\n");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadRowKeyFile(path).status()));
  EXPECT_TRUE(absl::IsNotFound(ReadRowKeyFile(dir.File("none")).status()));
}

}  // namespace
}  // namespace veil::embedding
