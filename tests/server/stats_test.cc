#include "server/stats.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace veil::server {
namespace {

TEST(ServerStatsTest, CountsAndPercentiles) {
  ServerStats stats;
  for (int i = 1; i <= 100; ++i) stats.RecordCall("answer", 2, absl::Milliseconds(i));
  stats.RecordPass(10);
  stats.RecordPass(30);
  stats.RecordError("answer", absl::StatusCode::kInvalidArgument);
  stats.SetQueuedKeys(7);
  stats.AddConnections(3);
  stats.AddConnections(-1);
  StatsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.calls, 100u);
  EXPECT_EQ(s.keys, 200u);
  EXPECT_EQ(s.passes, 2u);
  EXPECT_DOUBLE_EQ(s.mean_batch_keys, 20.0);
  EXPECT_EQ(s.max_batch_keys, 30u);
  EXPECT_NEAR(s.latency_p50_ms, 50.0, 1e-6);
  EXPECT_NEAR(s.latency_p90_ms, 90.0, 1e-6);
  EXPECT_NEAR(s.latency_p99_ms, 99.0, 1e-6);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.queued_keys, 7u);
  EXPECT_EQ(s.connections, 2u);
}

TEST(ServerStatsTest, PercentilesCoverTheRecentWindowOnly) {
  ServerStats stats;
  for (size_t i = 0; i < ServerStats::kLatencyWindow; ++i)
    stats.RecordCall("answer", 1, absl::Seconds(1));
  for (size_t i = 0; i < ServerStats::kLatencyWindow; ++i) {
    stats.RecordCall("answer", 1, absl::Milliseconds(1));
  }
  EXPECT_NEAR(stats.Snapshot().latency_p99_ms, 1.0, 1e-6);
}

TEST(HistogramTest, BoundsAreInclusiveAndCountsCumulative) {
  Histogram h({1, 10});
  for (double v : {0.5, 1.0, 3.0, 10.0, 11.0}) h.Add(v);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{2, 4, 5}));
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 25.5);
}

TEST(ServerStatsTest, MetricsCountCallsByNameAndCode) {
  ServerStats stats;
  stats.RecordCall("answer", 3, absl::Milliseconds(2));
  stats.RecordCall("answer", 1, absl::Seconds(20));
  stats.RecordCall("answerPooled", 4, absl::Milliseconds(1));
  stats.RecordError("answer", absl::StatusCode::kInvalidArgument);
  stats.RecordError("answer", absl::StatusCode::kInvalidArgument);
  stats.RecordError("stats", absl::StatusCode::kPermissionDenied);
  stats.RecordPass(3);
  stats.RecordPass(100);
  stats.RecordRefusedConnection();
  MetricsSnapshot m = stats.Metrics();
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(m.calls_by_code, (std::map<Key, uint64_t>{{{"answer", "OK"}, 2},
                                                      {{"answer", "INVALID_ARGUMENT"}, 2},
                                                      {{"answerPooled", "OK"}, 1},
                                                      {{"stats", "PERMISSION_DENIED"}, 1}}));
  ASSERT_EQ(m.latency_s.count("answer"), 1u);
  const Histogram& answer = m.latency_s.at("answer");
  EXPECT_EQ(answer.count(), 2u);
  EXPECT_NEAR(answer.sum(), 20.002, 1e-9);
  // 2 ms is in the 2.5 ms bucket and below; 20 s only in +Inf.
  std::vector<uint64_t> cumulative = answer.CumulativeCounts();
  EXPECT_EQ(cumulative[2], 1u);  // le 0.0025
  EXPECT_EQ(cumulative[answer.bounds().size() - 1], 1u);
  EXPECT_EQ(cumulative.back(), 2u);
  EXPECT_EQ(m.batch_keys.count(), 2u);
  EXPECT_DOUBLE_EQ(m.batch_keys.sum(), 103);
  EXPECT_EQ(m.keys, 8u);
  EXPECT_EQ(m.refused_connections, 1u);
  EXPECT_EQ(stats.Snapshot().errors, 3u);
}

TEST(ServerStatsTest, EmptyIsZero) {
  StatsSnapshot s = ServerStats().Snapshot();
  EXPECT_EQ(s.latency_p50_ms, 0);
  EXPECT_EQ(s.mean_batch_keys, 0);
}

}  // namespace
}  // namespace veil::server
