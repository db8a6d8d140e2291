#include "mobile_client/replicas.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace veil::client {

absl::StatusOr<std::vector<std::string>> ParseReplicaList(absl::string_view list, int party) {
  const std::string which = absl::StrCat("the address list of server ", party, " (\"", list, "\")");
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no address for server ", party));
  }
  std::vector<std::string> replicas;
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " has an empty entry; give HOST:PORT,HOST:PORT"));
    }
    const size_t colon = entry.rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(entry.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": \"", entry, "\" cannot be parsed as HOST:PORT (a port in [1, 65535])"));
    }
    if (!seen.insert(std::string(entry)).second) {
      return absl::InvalidArgumentError(absl::StrCat(which, " names ", entry, " twice"));
    }
    replicas.emplace_back(entry);
  }
  return replicas;
}

absl::Duration BackoffAfter(int failures) {
  absl::Duration backoff = kFirstBackoff;
  for (int i = 1; i < failures && backoff < kMaxBackoff; ++i) backoff *= 2;
  return std::min(backoff, kMaxBackoff);
}

void LatencyWindow::Add(absl::Duration latency) {
  if (samples_.size() < kLatencyWindow) {
    samples_.push_back(latency);
    return;
  }
  samples_[next_] = latency;
  next_ = (next_ + 1) % kLatencyWindow;
}

absl::Duration LatencyWindow::HedgeDelay(absl::Duration timeout) const {
  if (samples_.size() < kMinSamples) return std::max(kHedgeFloor, timeout / 4);
  std::vector<absl::Duration> sorted = samples_;
  const size_t at = std::min(sorted.size() - 1,
                             static_cast<size_t>(std::ceil(kHedgePercentile * sorted.size())) - 1);
  std::nth_element(sorted.begin(), sorted.begin() + at, sorted.end());
  return std::max(kHedgeFloor, sorted[at]);
}

}  // namespace veil::client
