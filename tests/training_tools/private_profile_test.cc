#include "training_tools/private_profile.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/paillier/randomizer.h"
#include "pir/he/paillier/serialize.h"
#include "training_tools/workload.h"

namespace veil::training {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Fast tests: 1024-bit keys (the insecure comparison switch).
PrivateProfileOptions FastOptions() {
  PrivateProfileOptions options;
  options.key = {.modulus_bits = 1024, .insecure_for_comparison = true};
  options.threads = 2;
  return options;
}

std::string Csv(const AccessProfile& profile) {
  std::ostringstream out;
  WriteProfileCsv(profile, out);
  return out.str();
}

// The private profile equals the plaintext count (no co-access) byte for byte, and so does the
// layout built from it.
void ExpectEqualToPlaintext(const Workload& workload, const AccessProfile& private_profile) {
  const AccessProfile clear = BuildProfile(workload.train_requests, workload.num_rows, 0);
  EXPECT_EQ(private_profile.num_requests, clear.num_requests);
  EXPECT_EQ(private_profile.frequency, clear.frequency);
  EXPECT_EQ(Csv(private_profile), Csv(clear));
  const LayoutChoice choice{.hot_fraction = 0.1,
                            .hot_bins = 4,
                            .hot_rounds = 2,
                            .cold_bins = 8,
                            .cold_rounds = 1,
                            .colocation = 1};
  auto private_layout = DesignLayout(private_profile, workload.row_words, choice, {});
  auto clear_layout = DesignLayout(clear, workload.row_words, choice, {});
  ASSERT_TRUE(private_layout.ok() && clear_layout.ok());
  EXPECT_EQ(private_layout->Serialize(), clear_layout->Serialize());
}

TEST(PrivateProfile, ClientCountsAreBuildProfilesCounts) {
  EXPECT_THAT(ClientCounts({{0, 1, 1}, {1, 5}, {2}}, 3), ElementsAre(1, 2, 1, 3));
  EXPECT_THAT(ClientCounts({}, 2), ElementsAre(0, 0, 0));
}

TEST(PrivateProfile, EqualsThePlaintextProfileOnTheTinyLog) {
  WorkloadOptions options;
  options.interactions = VEIL_SOURCE_DIR "/tests/training_tools/testdata/tiny.csv";
  options.columns.label = "rating";
  auto workload = LoadWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status();
  PrivateProfileFigures figures;
  auto profile = BuildPrivateProfile(workload->train_requests, workload->train_clients,
                                     workload->num_rows, FastOptions(), &figures);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(figures.clients, 2);
  EXPECT_EQ(figures.ciphertexts_per_report, 1u);
  EXPECT_EQ(figures.report_bytes, he::kBatchHeaderBytes + 256);
  ExpectEqualToPlaintext(*workload, *profile);
}

// A prefix of each real workload's training requests (a few dozen clients: seconds, not minutes).
class PrivateProfileOnRealData : public ::testing::TestWithParam<const char*> {};

TEST_P(PrivateProfileOnRealData, EqualsThePlaintextProfileOnAPrefix) {
  WorkloadOptions options;
  options.preset = GetParam();
  options.data_dir = VEIL_SOURCE_DIR "/data";
  auto workload = LoadWorkload(options);
  if (!workload.ok()) GTEST_SKIP() << "no data (scripts/fetch-data): " << workload.status();
  workload->train_requests.resize(3000);
  workload->train_clients.resize(3000);
  PrivateProfileFigures figures;
  auto profile = BuildPrivateProfile(workload->train_requests, workload->train_clients,
                                     workload->num_rows, FastOptions(), &figures);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_GT(figures.clients, 10);
  EXPECT_EQ(figures.ciphertexts_per_report,
            (static_cast<size_t>(workload->num_rows) + 1 + figures.values_per_ciphertext - 1) /
                figures.values_per_ciphertext);
  ExpectEqualToPlaintext(*workload, *profile);
}

INSTANTIATE_TEST_SUITE_P(Workloads, PrivateProfileOnRealData,
                         ::testing::Values("movielens", "brown"));

class PrivateProfileRoles : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = he::GenerateKeyPair(FastOptions().key);
    ASSERT_TRUE(keys.ok());
    keys_ = std::make_unique<he::KeyPair>(*std::move(keys));
    auto randomness = he::FixedBaseRandomizer::Create(keys_->public_key);
    ASSERT_TRUE(randomness.ok());
    randomness_ = *std::move(randomness);
  }
  he::Packer MakePacker(uint32_t value_bits, uint64_t clients) {
    return *he::Packer::Create(keys_->public_key, ReportPacking(value_bits, clients));
  }
  std::unique_ptr<he::KeyPair> keys_;
  std::unique_ptr<he::FixedBaseRandomizer> randomness_;
};

TEST_F(PrivateProfileRoles, ACountAboveTheValueBitsIsRefusedByTheClient) {
  const he::Packer packer = MakePacker(1, 2);
  auto report = ClientReport(keys_->public_key, packer, *randomness_, {{0}, {0}}, 2);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("does not fit in 1 bits"));
}

TEST_F(PrivateProfileRoles, TheAggregatorRefusesForeignAndSurplusReports) {
  const he::PublicKey& key = keys_->public_key;
  const he::Packer packer = MakePacker(8, 2);
  std::vector<std::string> reports;
  for (int c = 0; c < 3; ++c) reports.push_back(*ClientReport(key, packer, *randomness_, {{c}}, 4));
  auto surplus = AggregateReports(key, packer, reports, 4, 1);
  EXPECT_EQ(surplus.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(surplus.status().message(), HasSubstr("exceeds the headroom of 2"));
  std::vector<std::string> two(reports.begin(), reports.begin() + 2);
  EXPECT_THAT(AggregateReports(key, packer, two, 5, 1).status().message(),
              HasSubstr("report 0: 5 values"));
  two[1][0] = 'X';
  EXPECT_THAT(AggregateReports(key, packer, two, 4, 1).status().message(),
              HasSubstr("report 1: Paillier ciphertext batch: bad magic"));
  two.pop_back();
  auto total = AggregateReports(key, packer, two, 4, 1);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_THAT(DecryptProfile(*keys_, packer, *total, 3).status().message(),
              HasSubstr("total holds 5 values, expected 4"));
  auto profile = DecryptProfile(*keys_, packer, *total, 4);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_THAT(profile->frequency, ElementsAre(1, 0, 0, 0));
  EXPECT_EQ(profile->num_requests, 1);
}

}  // namespace
}  // namespace veil::training
