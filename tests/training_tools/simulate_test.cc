#include "training_tools/simulate.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "training_tools/data/text.h"
#include "training_tools/synthetic.h"
#include "training_tools/workload.h"

namespace veil::training {
namespace {

using ::testing::HasSubstr;

const std::string kDataDir = std::string(VEIL_SOURCE_DIR) + "/data";

// Requests over 400 rows: rows 0..9 are in almost every request, together with rows 2k and 2k+1
// which always come as a pair (co-accessed).
std::vector<RowRequest> PairedRequests(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<RowRequest> requests;
  for (int i = 0; i < count; ++i) {
    RowRequest request;
    for (int32_t hot = 0; hot < 10; ++hot) {
      if (rng() % 10 < 8) request.push_back(hot);
    }
    for (int pair = 0; pair < 3; ++pair) {
      const int32_t k = 5 + static_cast<int32_t>(rng() % 195);
      request.push_back(2 * k);
      request.push_back(2 * k + 1);
    }
    std::sort(request.begin(), request.end());
    request.erase(std::unique(request.begin(), request.end()), request.end());
    requests.push_back(request);
  }
  return requests;
}

TEST(SimulateTest, CountsFetchedRowsAndTheConstantCost) {
  const auto requests = PairedRequests(300, 1);
  const AccessProfile profile = BuildProfile(requests, 400, 4);
  const LayoutChoice plain{.cold_bins = 16, .cold_rounds = 1};
  auto layout = DesignLayout(profile, 32, plain, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto result = Simulate(*layout, requests, 1e9);
  ASSERT_TRUE(result.ok()) << result.status();
  int64_t wanted = 0, missing = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    wanted += static_cast<int64_t>(requests[i].size());
    missing += static_cast<int64_t>(result->missing[i].size());
    ASSERT_LE(requests[i].size() - result->missing[i].size(), 16u) << "one row per bin";
  }
  EXPECT_DOUBLE_EQ(result->fetched_share, 1.0 - static_cast<double>(missing) / wanted);
  EXPECT_EQ(result->cost.words_scanned, batch::CostOf(*layout).words_scanned);
  EXPECT_EQ(result->cost.words_scanned, 16 * 25 * 32);  // every row scanned once
  EXPECT_DOUBLE_EQ(result->latency_ms, 1e3 * 16 * 25 * 32 / 1e9);

  // A hot table with more rounds and co-located pairs fetch more for a similar cost.
  const LayoutChoice designed{.hot_fraction = 0.025,
                              .hot_bins = 5,
                              .hot_rounds = 2,
                              .cold_bins = 16,
                              .cold_rounds = 1,
                              .colocation = 1};
  auto better = DesignLayout(profile, 32, designed, {});
  ASSERT_TRUE(better.ok()) << better.status();
  auto improved = Simulate(*better, requests, 0);
  ASSERT_TRUE(improved.ok());
  EXPECT_GT(improved->fetched_share, result->fetched_share + 0.1);
}

TEST(SyntheticTest, RecoversTheFittedZipfExponent) {
  SyntheticFit truth;
  truth.zipf_exponent = 1.0;
  truth.request_sizes = {20};
  const auto requests = GenerateRequests(truth, 5000, 4000, 7);
  EXPECT_EQ(GenerateRequests(truth, 5000, 10, 7), GenerateRequests(truth, 5000, 10, 7));
  const AccessProfile profile = BuildProfile(requests, 5000, 4);
  const SyntheticFit fit = FitSynthetic(profile, requests);
  // Unseen tail rows are left out of the fit, which flattens it a little.
  EXPECT_NEAR(fit.zipf_exponent, 1.0, 0.25);
  EXPECT_GT(fit.zipf_r2, 0.9);
}

TEST(SyntheticTest, FitsMovieLens) {
  WorkloadOptions options;
  options.preset = "movielens";
  options.data_dir = kDataDir;
  auto workload = LoadWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status();
  EXPECT_EQ(workload->num_rows, 9066);
  const AccessProfile profile = BuildProfile(workload->train_requests, workload->num_rows, 8);
  const SyntheticFit fit = FitSynthetic(profile, workload->train_requests);
  EXPECT_GT(fit.zipf_exponent, 0.5);
  EXPECT_GT(fit.co_access_share, 0.05);
  const auto synthetic = GenerateRequests(fit, 100000, 200, 1);
  ASSERT_EQ(synthetic.size(), 200u);
}

TEST(WorkloadTest, RejectsAmbiguousOrUnknownSources) {
  WorkloadOptions options;
  EXPECT_THAT(LoadWorkload(options).status().message(), HasSubstr("exactly one"));
  options.preset = "imagenet";
  EXPECT_THAT(LoadWorkload(options).status().message(), HasSubstr("unknown workload"));
  options.preset = "brown";
  options.data_dir = "/nonexistent";
  EXPECT_TRUE(absl::IsNotFound(LoadWorkload(options).status()));
}

// A temporary folder, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(::testing::TempDir() + "/" + name) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A novel in one file: 8 chapters of 3 paragraphs; `words` words per paragraph.
std::string Novel(int words) {
  std::mt19937_64 rng(4);
  const std::vector<std::string> vocabulary = {"the",   "house",  "was",    "dark",
                                               "and",   "she",    "walked", "to",
                                               "river", "slowly", "a",      "letter"};
  std::string text = "THE TITLE\n\nContents\nChapter I\nChapter II\n\n";
  for (int chapter = 1; chapter <= 8; ++chapter) {
    text += "CHAPTER " + std::to_string(chapter) + ".\n\n";
    for (int paragraph = 0; paragraph < 3; ++paragraph) {
      for (int w = 0; w < words; ++w) {
        text += vocabulary[rng() % vocabulary.size()] + ((w + 1) % 12 ? " " : ".\n");
      }
      text += "\n\n";
    }
  }
  return text;
}

TEST(WorkloadTest, OneFileCorpusIsCutIntoDocumentsByARule) {
  TempDir dir("veil_one_file_corpus");
  const std::string file = dir.path() + "/novel.txt";
  std::ofstream(file) << Novel(120);
  WorkloadOptions options;
  options.text = file;
  options.window_length = 16;
  options.text_split.document_words = 300;
  auto chapters = LoadWorkload(options);
  ASSERT_TRUE(chapters.ok()) << chapters.status();
  EXPECT_THAT(chapters->description, HasSubstr("chapter headings"));
  EXPECT_THAT(chapters->description, HasSubstr("8 documents"));
  EXPECT_FALSE(chapters->train_windows.empty());
  EXPECT_FALSE(chapters->validation_windows.empty());
  EXPECT_EQ(chapters->validation_clients.size(), chapters->validation_windows.size());

  options.text_split.rule = TextSplitRule::kParagraphs;
  auto paragraphs = LoadWorkload(options);
  ASSERT_TRUE(paragraphs.ok()) << paragraphs.status();
  EXPECT_THAT(paragraphs->description, HasSubstr("blank lines"));

  options.text_split.rule = TextSplitRule::kFiles;  // one document: no validation split
  auto one = LoadWorkload(options);
  EXPECT_TRUE(absl::IsInvalidArgument(one.status()));
  EXPECT_THAT(one.status().message(), HasSubstr("1 documents"));
  EXPECT_THAT(one.status().message(), HasSubstr("--text_split"));
}

TEST(WorkloadTest, BinaryCorpusAndMisplacedFoldersAreRefused) {
  TempDir dir("veil_binary_corpus");
  std::mt19937_64 rng(3);
  for (const char* name : {"a.bin", "b.bin"}) {
    std::ofstream out(dir.path() + "/" + name, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(rng()));
  }
  WorkloadOptions options;
  options.text = dir.path();
  auto binary = LoadWorkload(options);
  EXPECT_TRUE(absl::IsInvalidArgument(binary.status()));
  EXPECT_THAT(binary.status().message(), HasSubstr("a.bin: not UTF-8 text"));

  options.text = "";
  options.interactions = dir.path();
  auto folder = LoadWorkload(options);
  EXPECT_TRUE(absl::IsInvalidArgument(folder.status()));
  EXPECT_THAT(folder.status().message(), HasSubstr("is a directory"));
}

}  // namespace
}  // namespace veil::training
