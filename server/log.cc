#include "server/log.h"

#include <atomic>
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

}  // namespace

void SetLogParty(int party) { log_party.store(party); }

void LogThrottled(absl::string_view category, absl::string_view text) {
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
    Window& w = (*windows)[category];
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
  Log(suppressed == 0 ? std::string(text)
                      : absl::StrCat(text, " (", suppressed, " more \"", category,
                                     "\" lines left out)"));
}

void Log(absl::string_view text) {
  int party = log_party.load();
  std::string line = absl::StrCat(
      "veil-server", party >= 0 ? absl::StrCat("[party ", party, "]") : "", " ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), ": ", text, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace veil::server
