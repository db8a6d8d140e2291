#include "server/log.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace veil::server {
namespace {

std::atomic<int> log_party{-1};

// `text` as a quoted value: one line whatever it holds, so that a line is always one event.
std::string Quote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

void Write(absl::string_view event, absl::string_view text, uint64_t suppressed) {
  std::string line =
      absl::StrCat(FormatLogLine(absl::Now(), log_party.load(), event, text, suppressed), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

void SetLogParty(int party) { log_party.store(party); }

std::string FormatLogLine(absl::Time time, int party, absl::string_view event,
                          absl::string_view text, uint64_t suppressed) {
  return absl::StrCat(
      "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone()),
      " prog=veil-server", party >= 0 ? absl::StrCat(" party=", party) : "", " event=", event,
      suppressed > 0 ? absl::StrCat(" suppressed=", suppressed) : "", " msg=", Quote(text));
}

void LogThrottled(absl::string_view event, absl::string_view text) {
  struct Window {
    absl::Time start = absl::InfinitePast();
    int lines = 0;
    uint64_t suppressed = 0;
  };
  static absl::Mutex mu(absl::kConstInit);
  static auto* windows = new absl::flat_hash_map<std::string, Window>();
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu);
    Window& w = (*windows)[event];
    const absl::Time now = absl::Now();
    if (now - w.start >= absl::Seconds(1)) {
      w.start = now;
      w.lines = 0;
    }
    if (w.lines >= kThrottledLinesPerSecond) {
      ++w.suppressed;
      return;
    }
    ++w.lines;
    suppressed = w.suppressed;
    w.suppressed = 0;
  }
  Write(event, text, suppressed);
}

void Log(absl::string_view event, absl::string_view text) { Write(event, text, 0); }

}  // namespace veil::server
