// What the client's transport (mobile_client/transport.h) needs to spread one party's calls over
// that party's replicas: the address list ("HOST:PORT,HOST:PORT"), the rolling latency window
// whose percentile decides when a slow call is hedged, and the backoff after which a failed
// replica is tried again.
//
// Replicas of one party serve the same table and share its key shares' meaning, so a call
// (the same keys) may go to any of them: answering is idempotent, and the first good reply wins.
#ifndef VEIL_MOBILE_CLIENT_REPLICAS_H_
#define VEIL_MOBILE_CLIENT_REPLICAS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace veil::client {

// A call still unanswered after the hedge delay is sent to another replica as well: the delay is
// the kHedgePercentile of the last kLatencyWindow reply latencies of the party, at least
// kHedgeFloor (so that ordinary jitter does not double the servers' work). Until kMinSamples
// replies were seen, the delay is the larger of the floor and a quarter of the call's timeout.
inline constexpr double kHedgePercentile = 0.95;
inline constexpr size_t kLatencyWindow = 64;
inline constexpr size_t kMinSamples = 8;
inline constexpr absl::Duration kHedgeFloor = absl::Milliseconds(10);
// A replica that failed (or lost a hedge race) is preferred again only after a backoff that
// doubles with each failure in a row: kFirstBackoff, 2x, 4x ... up to kMaxBackoff.
inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
inline constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

// The replicas of one party, from "HOST:PORT" or "HOST:PORT,HOST:PORT,..." (spaces around the
// commas are ignored; "[IPV6]:PORT" works too). `party` names the list in errors. Returns
// INVALID_ARGUMENT for an empty list, an empty entry, an entry without a port or with a port
// that is not a number in [1, 65535], or the same address twice.
absl::StatusOr<std::vector<std::string>> ParseReplicaList(absl::string_view list, int party);

// The backoff after `failures` (>= 1) failures in a row.
absl::Duration BackoffAfter(int failures);

// The latencies of a party's last kLatencyWindow replies, and the hedge delay they give.
class LatencyWindow {
 public:
  void Add(absl::Duration latency);
  // See kHedgePercentile; `timeout` is the call's timeout.
  absl::Duration HedgeDelay(absl::Duration timeout) const;

 private:
  std::vector<absl::Duration> samples_;  // a ring once full
  size_t next_ = 0;
};

// A single-server session's configuration at connect: the first replica's that answered
// (`configs`: one per replica, null where none answered). `agree(other, first, replica)` returns
// OK when that replica's config serves what the first's does; its first error is returned.
template <typename Config, typename Agree>
absl::StatusOr<const Config*> FirstAgreeingConfig(
    const std::vector<std::unique_ptr<Config>>& configs, Agree agree) {
  const Config* first = nullptr;
  for (size_t r = 0; r < configs.size(); ++r) {
    const Config* other = configs[r].get();
    if (other == nullptr) continue;
    if (first == nullptr) {
      first = other;
    } else if (absl::Status s = agree(*other, *first, static_cast<int>(r)); !s.ok()) {
      return s;
    }
  }
  return first;
}

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_REPLICAS_H_
