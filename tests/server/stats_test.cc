#include "server/stats.h"

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
  for (size_t i = 0; i < ServerStats::kLatencyWindow; ++i) stats.RecordCall("answer", 1, absl::Seconds(1));
  for (size_t i = 0; i < ServerStats::kLatencyWindow; ++i) {
    stats.RecordCall("answer", 1, absl::Milliseconds(1));
  }
  EXPECT_NEAR(stats.Snapshot().latency_p99_ms, 1.0, 1e-6);
}

TEST(ServerStatsTest, EmptyIsZero) {
  StatsSnapshot s = ServerStats().Snapshot();
  EXPECT_EQ(s.latency_p50_ms, 0);
  EXPECT_EQ(s.mean_batch_keys, 0);
}

}  // namespace
}  // namespace veil::server
