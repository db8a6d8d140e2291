#include "server/log.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace veil::server {
namespace {

const absl::Time kTime = absl::FromUnixMillis(1764758400123);  // 2025-12-03T10:40:00.123Z

TEST(LogLineTest, FieldsAsKeyValuePairs) {
  EXPECT_EQ(FormatLogLine(kTime, 1, "rolled", "rolled to epoch 2"),
            "ts=2025-12-03T10:40:00.123Z prog=veil-server party=1 event=rolled "
            "msg=\"rolled to epoch 2\"");
  EXPECT_EQ(FormatLogLine(kTime, -1, "serving", "x"),
            "ts=2025-12-03T10:40:00.123Z prog=veil-server event=serving msg=\"x\"");
  EXPECT_EQ(FormatLogLine(kTime, 0, "refused", "y", 12),
            "ts=2025-12-03T10:40:00.123Z prog=veil-server party=0 event=refused suppressed=12 "
            "msg=\"y\"");
}

// A message holding quotes or line breaks (a peer's error text, say) stays one line, one value.
TEST(LogLineTest, MessagesAreQuotedOnOneLine) {
  EXPECT_EQ(FormatLogLine(kTime, -1, "rejected", "bad \"key\"\nevent=forged \\"),
            "ts=2025-12-03T10:40:00.123Z prog=veil-server event=rejected "
            "msg=\"bad \\\"key\\\"\\nevent=forged \\\\\"");
}

}  // namespace
}  // namespace veil::server
