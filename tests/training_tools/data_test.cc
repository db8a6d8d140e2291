#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "training_tools/data/movielens.h"
#include "training_tools/data/r_serialize.h"

namespace veil::training {
namespace {

using ::testing::HasSubstr;

const std::string kMovieLensDir = std::string(VEIL_SOURCE_DIR) + "/data/movielens";

TEST(MovieLensTest, LoadsTheDslabsCounts) {
  auto data = LoadMovieLens(kMovieLensDir);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->ratings.size(), 100004u);
  EXPECT_EQ(data->num_users, 671);
  EXPECT_EQ(data->num_movies, 9066);
  for (const Rating& r : data->ratings) {
    ASSERT_GE(r.rating, 0.5f);
    ASSERT_LE(r.rating, 5.0f);
    ASSERT_GT(r.timestamp, 780000000);  // 1994: the oldest MovieLens ratings are from 1995
  }
}

TEST(MovieLensTest, MissingDirectoryIsNotFound) {
  auto data = LoadMovieLens("/nonexistent");
  EXPECT_TRUE(absl::IsNotFound(data.status())) << data.status();
  EXPECT_THAT(data.status().message(), HasSubstr("fetch-data"));
}

TEST(RSerializeTest, RejectsTruncatedAndForeignStreams) {
  EXPECT_TRUE(absl::IsInvalidArgument(UnserializeR(std::vector<uint8_t>{'A', '\n'}).status()));
  // Header of version 3 then an integer vector claiming 1000 elements with none present.
  std::vector<uint8_t> truncated = {'X', '\n', 0, 0, 0, 2, 0,  4, 1, 1, 0,
                                    2,   3,    0, 0, 0, 0, 13, 0, 0, 3, 0xE8};
  auto object = UnserializeR(truncated);
  EXPECT_TRUE(absl::IsInvalidArgument(object.status())) << object.status();
  EXPECT_THAT(object.status().message(), HasSubstr("truncated"));
}

TEST(RSerializeTest, ReadsAnIntegerVectorWithNames) {
  // c(a = 7L, b = NA) serialized by R 4 (version 2 for a fixed header).
  std::vector<uint8_t> bytes = {
      'X', '\n', 0, 0, 0, 2, 0, 4, 1, 1, 0, 2, 3, 0,
      // INTSXP with attributes, length 2: 7, NA
      0, 0, 2, 13, 0, 0, 0, 2, 0, 0, 0, 7, 0x80, 0, 0, 0,
      // pairlist node with tag, tag = symbol "names"
      0, 0, 4, 2, 0, 0, 0, 1, 0, 4, 0, 9, 0, 0, 0, 5, 'n', 'a', 'm', 'e', 's',
      // STRSXP length 2: "a", "b"
      0, 0, 0, 16, 0, 0, 0, 2, 0, 4, 0, 9, 0, 0, 0, 1, 'a', 0, 4, 0, 9, 0, 0, 0, 1, 'b',
      // end of the pairlist
      0, 0, 0, 254};
  auto object = UnserializeR(bytes);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->type, RType::kInteger);
  EXPECT_EQ(object->ints, (std::vector<int32_t>{7, kRNaInteger}));
  const RObject* names = object->Attribute("names");
  ASSERT_NE(names, nullptr);
  EXPECT_EQ(names->strings[1], "b");
}

TEST(RSerializeTest, MutatedStreamsNeverCrash) {
  // list(5L, "x") with names, truncated and bit-flipped: every result is a value or an error,
  // never a crash or an unbounded allocation.
  std::vector<uint8_t> stream = {'X', '\n', 0,   0,   0, 2, 0, 4,  1, 1, 0, 2, 3,   0, 0, 0, 2,
                                 19,  0,    0,   0,   2,                        // list of 2, attrs
                                 0,   0,    0,   13,  0, 0, 0, 1,  0, 0, 0, 5,  // 5L
                                 0,   0,    0,   16,  0, 0, 0, 1,  0, 4, 0, 9, 0,   0, 0, 1, 'x',
                                 0,   0,    4,   2,   0, 0, 0, 1,  0, 4, 0, 9, 0,   0, 0, 5, 'n',
                                 'a', 'm',  'e', 's', 0, 0, 0, 16, 0, 0, 0, 2, 0,   4, 0, 9, 0,
                                 0,   0,    1,   'a', 0, 4, 0, 9,  0, 0, 0, 1, 'b', 0, 0, 0, 254};
  ASSERT_TRUE(UnserializeR(stream).ok());
  std::mt19937_64 random(3);
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<uint8_t> mutated = stream;
    mutated[random() % mutated.size()] ^= 1 << (random() % 8);
    if (trial % 2 == 0) mutated.resize(random() % mutated.size());
    (void)UnserializeR(mutated).ok();
  }
}

TEST(QuickFactorizeTest, IsDeterministicAndFitsTheRatings) {
  auto data = LoadMovieLens(kMovieLensDir);
  ASSERT_TRUE(data.ok()) << data.status();
  const DenseIndex items = DenseIndex::FromMovies(data->ratings);
  ASSERT_EQ(items.size(), 9066);
  EXPECT_EQ(items.RowOf(items.IdOf(17)), 17);
  EXPECT_EQ(items.RowOf(-5), -1);
  std::vector<float> a = QuickFactorize(data->ratings, items, 8, 2, 42);
  std::vector<float> b = QuickFactorize(data->ratings, items, 8, 2, 42);
  ASSERT_EQ(a.size(), 9066u * 8);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](float v) { return v != 0; }));
}

}  // namespace
}  // namespace veil::training
