// Structured log lines on stderr, one event per line as key=value pairs:
//   ts=2026-12-02T09:30:00.000Z prog=veil-server party=0 event=rolled msg="rolled to epoch 2 ..."
// `event` names what happened (a word of [a-z_]) so that log pipelines can count and filter; `msg`
// is the human sentence, quoted, with \ " and line breaks escaped. Lines never carry key material,
// queried rows or row indices: callers log counts, addresses, epochs and digests only.
#ifndef VEIL_SERVER_LOG_H_
#define VEIL_SERVER_LOG_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace veil::server {

// Sets the "party=P" field of later lines (-1: none).
void SetLogParty(int party);
void Log(absl::string_view event, absl::string_view text);

// Log, at most kThrottledLinesPerSecond lines per second for each `event` (refused connections,
// handshake failures, rejected calls...): a flood of the same event does not flood the log. The
// next line that gets through carries suppressed=N, the lines of that event left out.
inline constexpr int kThrottledLinesPerSecond = 5;
void LogThrottled(absl::string_view event, absl::string_view text);

// The line Log writes (without the newline), for tests: `suppressed` > 0 adds suppressed=N.
std::string FormatLogLine(absl::Time time, int party, absl::string_view event,
                          absl::string_view text, uint64_t suppressed = 0);

}  // namespace veil::server

#endif  // VEIL_SERVER_LOG_H_
