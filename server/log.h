// One-line log messages on stderr: "veil-server[party P] 2026-12-02T09:30:00Z: text".
#ifndef VEIL_SERVER_LOG_H_
#define VEIL_SERVER_LOG_H_

#include "absl/strings/string_view.h"

namespace veil::server {

// Sets the "[party P]" tag of later lines (-1: none).
void SetLogParty(int party);
void Log(absl::string_view text);

// Log, at most kThrottledLinesPerSecond lines per second for each `category` (refused connections,
// handshake failures, rejected calls...): a flood of the same event does not flood the log. The
// next line that gets through says how many were left out.
inline constexpr int kThrottledLinesPerSecond = 5;
void LogThrottled(absl::string_view category, absl::string_view text);

}  // namespace veil::server

#endif  // VEIL_SERVER_LOG_H_
