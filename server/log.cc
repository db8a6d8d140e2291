#include "server/log.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace veil::server {
namespace {

std::atomic<int> log_party{-1};

}  // namespace

void SetLogParty(int party) { log_party.store(party); }

void Log(absl::string_view text) {
  int party = log_party.load();
  std::string line = absl::StrCat(
      "veil-server", party >= 0 ? absl::StrCat("[party ", party, "]") : "", " ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), ": ", text, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace veil::server
