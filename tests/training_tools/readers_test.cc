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
  const TextSplit files{TextSplitRule::kFiles};
  auto corpus = ReadTextCorpus(dir, files);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->documents.size(), 2u);
  EXPECT_EQ(corpus->split, "files");
  EXPECT_EQ(corpus->documents[0].id, "a.txt#1");
  EXPECT_THAT(corpus->documents[0].sentences[0],
              ElementsAre("the", "first", "one", ",", "short", "."));
  EXPECT_EQ(corpus->documents[1].sentences.size(), 2u);  // the blank line is no sentence
  auto single = ReadTextCorpus(dir + "/b.txt", files);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->documents.size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(ReadTextCorpus(dir + "/missing", files).status()));
  std::ofstream(dir + "/empty.txt");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTextCorpus(dir + "/empty.txt", files).status()));
  std::filesystem::remove_all(dir);
}

TEST(TextTest, SplitsOneFileByChaptersParagraphsOrWindows) {
  const std::string dir = ::testing::TempDir() + "/veil_text_split";
  std::filesystem::create_directories(dir);
  std::string book;
  for (int chapter = 1; chapter <= 6; ++chapter) {
    book += "Chapter " + std::to_string(chapter) + "\n\n";
    for (int paragraph = 0; paragraph < 4; ++paragraph) book += "one two three four five\n\n";
  }
  std::ofstream(dir + "/book.txt") << book;
  auto chapters = ReadTextCorpus(dir + "/book.txt", {TextSplitRule::kAuto, 10});
  ASSERT_TRUE(chapters.ok()) << chapters.status();
  EXPECT_EQ(chapters->split, "chapters");
  ASSERT_EQ(chapters->documents.size(), 6u);  // 22 tokens per chapter
  EXPECT_THAT(chapters->documents[1].sentences[0], ElementsAre("chapter", "2"));
  EXPECT_THAT(chapters->description, HasSubstr("6 documents"));
  auto paragraphs = ReadTextCorpus(dir + "/book.txt", {TextSplitRule::kParagraphs, 10});
  ASSERT_TRUE(paragraphs.ok());
  EXPECT_EQ(paragraphs->documents.size(), 12u);  // two paragraphs (10 tokens) per document
  auto windows = ReadTextCorpus(dir + "/book.txt", {TextSplitRule::kWindows, 40});
  ASSERT_TRUE(windows.ok());
  EXPECT_EQ(windows->documents.size(), 3u);  // 132 tokens: 40+ each, the tail joins the last
  std::filesystem::remove_all(dir);
}

TEST(TextTest, RefusesWhatIsNotUtf8Text) {
  EXPECT_TRUE(CheckText("Caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve\tok\r\n", "a").ok());
  auto latin1 = CheckText("Caf\xe9 au lait", "latin1.txt");
  EXPECT_TRUE(absl::IsInvalidArgument(latin1));
  EXPECT_THAT(latin1.message(), HasSubstr("latin1.txt: not UTF-8 text (byte 0xe9 at offset 3)"));
  EXPECT_FALSE(CheckText("\xed\xa0\x80", "surrogate").ok());
  EXPECT_FALSE(CheckText("\xc0\xaf", "overlong").ok());
  const std::string controls = std::string("text") + std::string(10, '\0') + std::string(80, 'a');
  auto binary = CheckText(controls, "zeros.bin");
  EXPECT_THAT(binary.message(), HasSubstr("zeros.bin: not text: 10 of its 94 characters"));
  EXPECT_EQ(ParseTextSplitRule("chapters").value(), TextSplitRule::kChapters);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTextSplitRule("pages").status()));
}

}  // namespace
}  // namespace veil::training
