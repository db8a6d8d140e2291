// The sweep (sweep.h): determinism for a seed set at any thread count, the reachability policy,
// rows never seen in training, claims the data cannot support, the one-scan floor, and where
// co-design starts to pay — with torch-free stand-ins for the trained models.
#include "training_tools/sweep.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "training_tools/payoff.h"
#include "training_tools/sweep_report.h"
#include "training_tools/synthetic.h"

namespace veil::training {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int32_t kRows = 400;

// Requests over 400 rows: rows 0..9 are in almost every request, together with rows 2k and 2k+1
// which always come as a pair (co-accessed); `max_row` bounds the pairs' rows.
std::vector<RowRequest> PairedRequests(int count, uint64_t seed, int32_t max_row = kRows) {
  std::mt19937_64 rng(seed);
  std::vector<RowRequest> requests;
  for (int i = 0; i < count; ++i) {
    RowRequest request;
    for (int32_t hot = 0; hot < 10; ++hot) {
      if (rng() % 10 < 8) request.push_back(hot);
    }
    for (int pair = 0; pair < 3; ++pair) {
      const int32_t k = 5 + static_cast<int32_t>(rng() % (max_row / 2 - 5));
      request.push_back(2 * k);
      request.push_back(2 * k + 1);
    }
    std::sort(request.begin(), request.end());
    request.erase(std::unique(request.begin(), request.end()), request.end());
    requests.push_back(request);
  }
  return requests;
}

ValidationSet Validation(std::vector<RowRequest> requests) {
  ValidationSet validation;
  validation.requests = std::move(requests);
  for (size_t i = 0; i < validation.requests.size(); ++i) {
    validation.clients.push_back(static_cast<int32_t>(i % 25));
  }
  return validation;
}

// A stand-in for a trained recommendation model: an example's logit is the summed weight of its
// rows that are not missing plus the example's own noise; the label follows the weights of all
// its rows, so missing rows cost AUC. Each seed perturbs the weights (training variation).
// `signal` = 0 makes the rows worthless.
class FakeModel : public QualityModel {
 public:
  FakeModel(const std::vector<RowRequest>& requests, uint64_t seed, double signal = 1)
      : requests_(requests), weight_(kRows), noise_(requests.size()) {
    // One distribution per engine: std::normal_distribution keeps a drawn value for its next call.
    std::mt19937_64 truth_engine(99), model_engine(seed);
    std::normal_distribution<double> truth(0, 1), model(0, 1);
    std::vector<double> true_weight(kRows);
    for (int32_t row = 0; row < kRows; ++row) {
      true_weight[row] = signal * truth(truth_engine);
      weight_[row] = true_weight[row] + 0.2 * signal * model(model_engine);
    }
    for (size_t e = 0; e < requests.size(); ++e) {
      double total = truth(truth_engine);
      for (int32_t row : requests[e]) total += true_weight[row];
      labels_.push_back(total > 0);
      noise_[e] = 0.1 * model(model_engine);
    }
  }
  Metric metric() const override { return Metric::kAuc; }
  std::vector<double> Targets() const override { return labels_; }
  Outcomes Score(absl::Span<const ExampleQuery> queries) const override {
    Outcomes scores;
    for (const ExampleQuery& q : queries) {
      double score = noise_[q.example];
      for (int32_t row : requests_[q.example]) {
        if (!std::binary_search(q.missing->begin(), q.missing->end(), row)) score += weight_[row];
      }
      scores.push_back(score);
    }
    return scores;
  }

 private:
  const std::vector<RowRequest>& requests_;
  std::vector<double> weight_, noise_, labels_;
};

SweepGrid SmallGrid() {
  SweepGrid grid;
  grid.hot_fractions = {0, 0.025, 0.3};
  grid.hot_bins = {5, 16};
  grid.hot_rounds = {1, 2};
  grid.cold_bins = {8, 32, 128};
  grid.cold_rounds = {0, 1, 2};
  grid.colocations = {0, 1};
  return grid;
}

std::string Csv(const SweepResult& result) {
  std::ostringstream csv;
  WriteSweepCsv(result, csv);
  return csv.str();
}

TEST(SweepTest, IsDeterministicForASeedSetAtAnyThreadCount) {
  const auto train = PairedRequests(400, 2);
  const ValidationSet validation = Validation(PairedRequests(300, 3));
  const AccessProfile profile = BuildProfile(train, kRows, 4);
  FakeModel a(validation.requests, 1), b(validation.requests, 2), c(validation.requests, 3);
  const std::vector<QualityModel*> models = {&a, &b, &c};
  SweepOptions options;
  options.seed[0] = 9;
  options.bootstrap_replicates = 200;
  options.threads = 1;
  auto one = Sweep(profile, 32, validation, SmallGrid(), options, models);
  options.threads = 3;
  auto three = Sweep(profile, 32, validation, SmallGrid(), options, models);
  options.bootstrap_seed = 2;
  auto other = Sweep(profile, 32, validation, SmallGrid(), options, models);
  ASSERT_TRUE(one.ok() && three.ok() && other.ok()) << one.status();
  EXPECT_EQ(Csv(*one), Csv(*three));
  EXPECT_EQ(SweepSummaryJson("sweep", "test", *one, ""),
            SweepSummaryJson("sweep", "test", *three, ""));
  EXPECT_NE(Csv(*one), Csv(*other)) << "the bootstrap seed moves the intervals";
  EXPECT_EQ(one->seeds, 3);
  ASSERT_GE(one->chosen, 0);
  const SweepPoint& chosen = one->points[one->chosen];
  EXPECT_TRUE(chosen.preserved);
  EXPECT_LE(chosen.loss.high, one->tolerance);
  EXPECT_LE(chosen.quality.low, chosen.quality.value);
  EXPECT_GE(chosen.quality.high, chosen.quality.value);
  EXPECT_GT(one->reference.se_seeds, 0) << "three models differ";
  for (const SweepPoint& p : one->points) {
    if (p.preserved && p.bytes() <= options.max_bytes_per_inference) {
      EXPECT_GE(p.cost.words_scanned, chosen.cost.words_scanned);
    }
  }
}

// Hot-table-only layouts (the cold table never queried) are the cheapest that keep a fetched
// share of 0.5; only --allow_unreachable_rows may choose one, and then it is marked.
TEST(SweepTest, NeverChoosesAnUnqueriedTableWithoutTheOptIn) {
  const auto train = PairedRequests(400, 2);
  const ValidationSet validation = Validation(PairedRequests(200, 3));
  const AccessProfile profile = BuildProfile(train, kRows, 4);
  SweepOptions options;
  options.min_fetched_share = 0.5;
  options.bootstrap_replicates = 100;
  auto all = Sweep(profile, 32, validation, SmallGrid(), options, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->reachable, ReachablePolicy::kAll);
  for (const SweepPoint& p : all->points) {
    EXPECT_TRUE(p.reachable);
    EXPECT_FALSE(LeavesATableUnqueried(p.choice, kRows));
    EXPECT_EQ(p.unreachable_client_share, 0);
    EXPECT_GE(p.cost.words_scanned, all->one_scan_words) << "every row scanned at least once";
  }
  ASSERT_GE(all->chosen, 0);
  const std::string all_json = SweepSummaryJson("sweep", "test", *all, "");
  EXPECT_THAT(all_json, HasSubstr("\"reachable_policy\":\"all\""));
  EXPECT_THAT(all_json, Not(HasSubstr("chosen_all_reachable")));

  options.reachable = ReachablePolicy::kOptIn;
  auto opt_in = Sweep(profile, 32, validation, SmallGrid(), options, {});
  ASSERT_TRUE(opt_in.ok()) << opt_in.status();
  ASSERT_GE(opt_in->chosen, 0);
  const SweepPoint& chosen = opt_in->points[opt_in->chosen];
  EXPECT_FALSE(chosen.reachable);
  EXPECT_EQ(chosen.choice.cold_rounds, 0);
  EXPECT_GT(chosen.unreachable_client_share, 0.5);
  EXPECT_LT(chosen.cost.words_scanned, all->points[all->chosen].cost.words_scanned);
  ASSERT_GE(opt_in->chosen_all_reachable, 0);
  EXPECT_EQ(opt_in->points[opt_in->chosen_all_reachable].cost.words_scanned,
            all->points[all->chosen].cost.words_scanned);
  const std::string json = SweepSummaryJson("sweep", "test", *opt_in, "");
  EXPECT_THAT(json, HasSubstr("\"reachable_policy\":\"opt-in\""));
  EXPECT_THAT(json, HasSubstr("\"chosen_all_reachable\":{"));
  EXPECT_THAT(json, HasSubstr("\"compute_reduction_all_reachable\":"));
  EXPECT_THAT(Csv(*opt_in), HasSubstr(",reachable,unreachable_client_share,"));
}

// A model that checks every query: under kDefault, the rows never seen in training are missing
// in every arm, the reference included, and never planned.
class UnseenCheckingModel : public FakeModel {
 public:
  UnseenCheckingModel(const std::vector<RowRequest>& requests, int32_t first_unseen)
      : FakeModel(requests, 1), requests_(requests), first_unseen_(first_unseen) {}
  Outcomes Score(absl::Span<const ExampleQuery> queries) const override {
    for (const ExampleQuery& q : queries) {
      for (int32_t row : requests_[q.example]) {
        const bool missing = std::binary_search(q.missing->begin(), q.missing->end(), row);
        if (row >= first_unseen_ && !missing) ++violations;
      }
    }
    return FakeModel::Score(queries);
  }
  mutable std::atomic<int> violations{0};

 private:
  const std::vector<RowRequest>& requests_;
  int32_t first_unseen_;
};

TEST(SweepTest, RowsNeverSeenInTrainingFollowThePolicy) {
  // Training never looks up rows 380..399; validation does.
  const auto train = PairedRequests(400, 2, 380);
  const ValidationSet validation = Validation(PairedRequests(200, 3));
  const AccessProfile profile = BuildProfile(train, kRows, 4);
  int64_t wanted = 0, unseen = 0;
  for (const RowRequest& r : validation.requests) {
    wanted += static_cast<int64_t>(r.size());
    for (int32_t row : r) unseen += row >= 380;
  }
  ASSERT_GT(unseen, 0);
  UnseenCheckingModel model(validation.requests, 380);
  const std::vector<QualityModel*> models = {&model};
  SweepOptions options;
  options.bootstrap_replicates = 50;
  auto defaulted = Sweep(profile, 32, validation, SmallGrid(), options, models);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ(model.violations, 0);
  EXPECT_EQ(defaulted->unseen_rows, 20);
  EXPECT_DOUBLE_EQ(defaulted->unseen_wanted_share, static_cast<double>(unseen) / wanted);
  EXPECT_GT(defaulted->unseen_client_share, 0);
  EXPECT_THAT(SweepSummaryJson("sweep", "test", *defaulted, ""),
              HasSubstr("\"unseen_rows_policy\":\"default\""));

  options.unseen = UnseenRowsPolicy::kFetch;
  auto fetched = Sweep(profile, 32, validation, SmallGrid(), options, models);
  ASSERT_TRUE(fetched.ok());
  EXPECT_GT(model.violations, 0) << "kFetch plans them: some are fetched";
  // Planned without the unseen rows, requests collide less.
  EXPECT_GT(defaulted->points[0].fetched_share, fetched->points[0].fetched_share);
}

TEST(SweepTest, RowsWorthNothingSupportNoClaim) {
  const auto train = PairedRequests(400, 2);
  const ValidationSet validation = Validation(PairedRequests(200, 3));
  const AccessProfile profile = BuildProfile(train, kRows, 4);
  FakeModel a(validation.requests, 1, /*signal=*/0), b(validation.requests, 2, 0);
  const std::vector<QualityModel*> models = {&a, &b};
  SweepOptions options;
  options.bootstrap_replicates = 100;
  auto result = Sweep(profile, 32, validation, SmallGrid(), options, models);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->claim_supported);
  EXPECT_FALSE(result->Reduction().has_value());
  const std::string json = SweepSummaryJson("sweep", "test", *result, "");
  EXPECT_THAT(json, HasSubstr("\"compute_reduction_at_preserved_quality\":null"));
  EXPECT_THAT(json, HasSubstr("cannot support a claim"));
}

TEST(SweepTest, ReportsWhenOneScanIsTheFloorAndWhereCodesignPays) {
  const auto train = PairedRequests(400, 2);
  const ValidationSet validation = Validation(PairedRequests(200, 3));
  const AccessProfile profile = BuildProfile(train, kRows, 4);
  SweepOptions options;
  options.min_fetched_share = 0.6;  // one round over 32 random bins keeps it
  options.bootstrap_replicates = 50;
  auto result = Sweep(profile, 32, validation, SmallGrid(), options, {});
  ASSERT_TRUE(result.ok());
  ASSERT_GE(result->baseline, 0);
  EXPECT_EQ(result->points[result->baseline].choice.cold_rounds, 1);
  EXPECT_TRUE(result->OneScanIsTheFloor());
  EXPECT_THAT(SweepSummaryJson("sweep", "test", *result, ""),
              HasSubstr("\"one_scan_is_the_floor\":true"));

  PayoffOptions payoff_options;
  payoff_options.bar = 0.99;
  payoff_options.sizes = {1600, 6400};
  payoff_options.requests = 300;
  payoff_options.grid = SmallGrid();
  payoff_options.sweep.bootstrap_replicates = 50;
  const SyntheticFit fit = FitSynthetic(profile, train);
  auto payoff = FindPayoff(fit, payoff_options);
  auto again = FindPayoff(fit, payoff_options);
  ASSERT_TRUE(payoff.ok()) << payoff.status();
  ASSERT_FALSE(payoff->steps.empty());
  EXPECT_EQ(payoff->steps[0].rows, 1600);
  EXPECT_EQ(PayoffJson(*payoff), PayoffJson(*again));
  EXPECT_THAT(PayoffJson(*payoff), HasSubstr("\"fetched_share_bar\":0.990000"));
}

}  // namespace
}  // namespace veil::training
