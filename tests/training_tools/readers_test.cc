#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "training_tools/data/interactions.h"
#include "training_tools/data/text.h"

namespace veil::training {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kRoot = VEIL_SOURCE_DIR;

absl::StatusOr<InteractionLog> Parse(const std::string& csv, CsvColumns columns = {}) {
  std::istringstream in(csv);
  return ParseInteractionsCsv(in, columns, "log.csv");
}

TEST(InteractionsCsvTest, ReadsColumnsByNameInAnyOrder) {
  CsvColumns columns{.user = "u", .item = "i", .timestamp = "t", .label = "y"};
  auto log = Parse("t,i,extra,u,y\n5,apple,x,ann,1\n6,pear,x,bob,0.5\n7,apple,x,bob,0\n", columns);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_TRUE(log->has_label);
  EXPECT_THAT(log->user_names, ElementsAre("ann", "bob"));
  EXPECT_THAT(log->item_names, ElementsAre("apple", "pear"));
  ASSERT_EQ(log->events.size(), 3u);
  EXPECT_EQ(log->events[2].user, 1);
  EXPECT_EQ(log->events[2].item, 0);
  EXPECT_EQ(log->events[1].timestamp, 6);
  EXPECT_FLOAT_EQ(log->events[1].label, 0.5f);
}

TEST(InteractionsCsvTest, MalformedInputNamesTheLine) {
  auto missing_column = Parse("user,item\na,b\n");
  EXPECT_TRUE(absl::IsInvalidArgument(missing_column.status()));
  EXPECT_THAT(missing_column.status().message(), HasSubstr("no column named \"timestamp\""));

  auto short_line = Parse("user,item,timestamp\na,b,1\na,b\n");
  EXPECT_TRUE(absl::IsInvalidArgument(short_line.status()));
  EXPECT_THAT(short_line.status().message(), HasSubstr("log.csv:3: expected 3 fields, found 2"));

  auto bad_time = Parse("user,item,timestamp\na,b,yesterday\n");
  EXPECT_THAT(bad_time.status().message(), HasSubstr("log.csv:2: timestamp \"yesterday\""));

  auto bad_label = Parse("user,item,timestamp,y\na,b,1,high\n", {.label = "y"});
  EXPECT_THAT(bad_label.status().message(), HasSubstr("log.csv:2: label \"high\""));

  EXPECT_TRUE(absl::IsInvalidArgument(Parse("").status()));
  EXPECT_TRUE(absl::IsNotFound(ReadInteractionsCsv("/nonexistent.csv", {}).status()));
}

TEST(InteractionsTest, SplitsEachUserByTimeAndBuildsHistories) {
  auto log = Parse(
      "user,item,timestamp\n"
      "a,i0,10\na,i1,20\na,i2,30\na,i3,40\na,i4,50\n"  // a: last one (20%) held out
      "b,i9,5\n");                                     // b: single event stays in training
  ASSERT_TRUE(log.ok()) << log.status();
  const InteractionSplit split = SplitByTime(*log, 0.2);
  ASSERT_EQ(split.validation.size(), 1u);
  EXPECT_EQ(log->item_names[split.validation[0].item], "i4");
  EXPECT_EQ(split.train.size(), 5u);

  auto samples = BuildRecommendationSamples(log->events, split.validation, 3, 1.0f);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_THAT(samples[0].history, ElementsAre(1, 2, 3));  // the three latest earlier items
  EXPECT_THAT(WantedRows(samples[0]), ElementsAre(1, 2, 3, 4));
}

TEST(MovieLensSplitTest, HoldsOutTheLatestFifthOfEachUser) {
  auto movielens = LoadMovieLens(kRoot + "/data/movielens");
  ASSERT_TRUE(movielens.ok()) << movielens.status();
  const InteractionLog log = InteractionsFromMovieLens(*movielens);
  EXPECT_EQ(log.item_names.size(), 9066u);
  const InteractionSplit split = SplitByTime(log, 0.2);
  EXPECT_EQ(split.train.size() + split.validation.size(), 100004u);
  EXPECT_NEAR(static_cast<double>(split.validation.size()) / 100004, 0.2, 0.01);
  // Deterministic: the same split twice.
  EXPECT_EQ(SplitByTime(log, 0.2).validation.back().item, split.validation.back().item);
}

TEST(BrownTest, ReadsAllDocumentsWithoutTags) {
  auto brown = ReadBrownCorpus(kRoot + "/data/brown");
  ASSERT_TRUE(brown.ok()) << brown.status();
  ASSERT_EQ(brown->size(), 500u);
  EXPECT_EQ((*brown)[0].id, "ca01");
  EXPECT_THAT((*brown)[0].sentences[0], testing::IsSupersetOf({"the", "fulton", "county"}));
  size_t tokens = 0;
  for (const Document& d : *brown) {
    for (const auto& s : d.sentences) tokens += s.size();
  }
  EXPECT_NEAR(static_cast<double>(tokens), 1.16e6, 0.02e6);
  const DocumentSplit split = SplitByDocument(std::move(*brown), 5);
  EXPECT_EQ(split.validation.size(), 100u);
  EXPECT_EQ(split.validation[0].id, "ca05");
  EXPECT_TRUE(absl::IsNotFound(ReadBrownCorpus("/nonexistent").status()));
}

TEST(TextTest, TokenizesVocabularyAndWindows) {
  EXPECT_THAT(TokenizePlainText("It's a well-known fact, Sir."),
              ElementsAre("it's", "a", "well-known", "fact", ",", "sir", "."));
  std::vector<Document> docs = {{"d", {{"a", "b", "a"}, {"c", "a"}}}};
  const Vocabulary vocabulary = Vocabulary::Build(docs, 4);
  EXPECT_EQ(vocabulary.size(), 4);
  EXPECT_EQ(vocabulary.RowOf("a"), 2);
  EXPECT_EQ(vocabulary.RowOf("b"), 3);  // ties ordered by spelling: b before c
  EXPECT_EQ(vocabulary.RowOf("c"), Vocabulary::kUnknown);
  const auto streams = EncodeDocuments(docs, vocabulary);
  EXPECT_THAT(streams[0], ElementsAre(2, 3, 2, 1, 0, 2, 1));
  const auto windows = TokenWindows(streams, 3);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_THAT(windows[1], ElementsAre(1, 0, 2, 1));
  EXPECT_THAT(WantedRows(windows[1]), ElementsAre(0, 1, 2));
}

TEST(TextTest, ReadsAPlainTextDirectoryInNameOrder) {
  const std::string dir = ::testing::TempDir() + "/veil_text_corpus";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/b.txt") << "Second document.\n\nIts second line!\n";
  std::ofstream(dir + "/a.txt") << "The first one, short.\n";
  auto corpus = ReadTextCorpus(dir);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->size(), 2u);
  EXPECT_EQ((*corpus)[0].id, "a.txt");
  EXPECT_THAT((*corpus)[0].sentences[0], ElementsAre("the", "first", "one", ",", "short", "."));
  EXPECT_EQ((*corpus)[1].sentences.size(), 2u);  // the blank line is no sentence
  auto single = ReadTextCorpus(dir + "/b.txt");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(ReadTextCorpus(dir + "/missing").status()));
  std::ofstream(dir + "/empty.txt");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTextCorpus(dir + "/empty.txt").status()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace veil::training
