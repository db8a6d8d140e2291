// Transport::Call: a call sent to a server's preferred replica, failed over to another replica
// when it fails and hedged on another when it is slow (mobile_client/transport.h).
#include <algorithm>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "mobile_client/transport.h"
#include "mobile_client/transport_state.h"
#include "rpc/stats_wire.h"
#include "rpc/status.h"

namespace veil::client {

// One Call(): the attempts on the server's replicas, and the hedge timers.
struct Transport::CallState {
  int s = 0;
  Send send;
  kj::Own<kj::PromiseFulfiller<absl::Status>> fulfiller;
  bool settled = false;
  std::vector<bool> tried;                // per replica
  std::vector<int> in_flight;             // endpoints with an attempt under way
  std::vector<absl::Status> errors;       // of the attempts that failed over
  std::vector<bool> reconnected;          // per replica: its stale connection was replaced
  std::list<kj::Promise<void>> attempts;  // never moved while they run; cancelled with the call
  int generation = 0;                     // of the newest attempt; older hedge timers do nothing

  void Settle(absl::Status status) {
    settled = true;
    fulfiller->fulfill(std::move(status));
  }
};

kj::Promise<absl::Status> Transport::Call(int s, Send send) {
  // Replicas whose backoff has passed are reconnected off the call's path (the connection runs on
  // by itself; calls join it once they pick the replica).
  const absl::Time now = absl::Now();
  for (int e : replicas_[s]) {
    const Endpoint& ep = *endpoints_[e];
    if (replicas(s) > 1 && ep.state == Endpoint::State::kDown && ep.retry_at <= now) {
      EnsureConnected(e, &reconnect_check_);
    }
  }
  auto call = kj::heap<CallState>();
  call->s = s;
  call->send = std::move(send);
  call->tried.assign(replicas(s), false);
  call->reconnected.assign(replicas(s), false);
  auto result = kj::newPromiseAndFulfiller<absl::Status>();
  call->fulfiller = kj::mv(result.fulfiller);
  StartAttempt(*call, /*hedge=*/false);
  return result.promise.attach(kj::mv(call));
}

bool Transport::StartAttempt(CallState& call, bool hedge) {
  // The untried replica to ask: up and not avoided; up; connecting; down with its backoff over
  // (or never connected); down (a last resort within the call's deadline).
  const absl::Time now = absl::Now();
  int best = -1, best_rank = 5;
  for (int r = 0; r < replicas(call.s); ++r) {
    if (call.tried[r]) continue;
    const Endpoint& ep = *endpoints_[replicas_[call.s][r]];
    int rank = 4;
    switch (ep.state) {
      case Endpoint::State::kUp:
        rank = ep.retry_at <= now ? 0 : 1;
        break;
      case Endpoint::State::kConnecting:
        rank = 2;
        break;
      case Endpoint::State::kIdle:
      case Endpoint::State::kDown:
        rank = ep.retry_at <= now ? 3 : 4;
        break;
    }
    if (rank < best_rank) {
      best = r;
      best_rank = rank;
    }
  }
  if (best < 0) return false;
  if (hedge) {
    ++hedges_;
  } else if (!call.errors.empty()) {
    ++failovers_;
  }
  call.tried[best] = true;
  const int e = replicas_[call.s][best];
  call.in_flight.push_back(e);
  const bool was_up = endpoints_[e]->state == Endpoint::State::kUp;
  CallState* state = &call;  // owns the attempt, so outlives it
  auto attempt = EnsureConnected(e, &reconnect_check_)
                     .then([this, state, e](absl::Status connected) -> kj::Promise<Attempt> {
                       // A replica that cannot be reached or is refused: another may do.
                       if (!connected.ok()) return Attempt{connected, true, false};
                       Endpoint& ep = *endpoints_[e];
                       return state->send(ep.connection.cap, ep.replica)
                           .then(
                               [](absl::Status status) {
                                 return Attempt{status, false, false};
                               },
                               [this, e](kj::Exception&& exception) {
                                 absl::Status status = EndpointError(e, exception);
                                 const bool local = IsLocalFailure(exception);
                                 const bool retry = local || absl::IsUnavailable(status) ||
                                                    absl::IsResourceExhausted(status) ||
                                                    absl::IsDeadlineExceeded(status);
                                 return Attempt{status, retry,
                                                local && exception.getType() ==
                                                             kj::Exception::Type::DISCONNECTED};
                               });
                     })
                     .then([this, state, e, now, was_up](Attempt result) {
                       FinishAttempt(*state, e, std::move(result), now, was_up);
                     });
  call.attempts.push_back(attempt.eagerlyEvaluate(nullptr));
  ArmHedge(call);
  return true;
}

void Transport::FinishAttempt(CallState& call, int e, Attempt attempt, absl::Time start,
                              bool was_up) {
  absl::Status status = std::move(attempt.status);
  const bool retry = attempt.retry;
  call.in_flight.erase(std::find(call.in_flight.begin(), call.in_flight.end(), e));
  if (call.settled) return;
  Endpoint& ep = *endpoints_[e];
  const absl::Time now = absl::Now();
  // An up replica that failed, or that another replica beat, is asked first again after a backoff.
  auto avoid = [now](Endpoint& slow) {
    if (slow.state != Endpoint::State::kUp) return;
    ++slow.failures;
    slow.retry_at = now + BackoffAfter(slow.failures);
  };
  if (status.ok()) {
    // Latencies of calls that waited for a connection say nothing about the replicas' replies.
    if (was_up) latency_[call.s].Add(now - start);
    ep.failures = 0;
    ep.retry_at = absl::InfinitePast();
    for (int other : call.in_flight) avoid(*endpoints_[other]);
    call.Settle(absl::OkStatus());
    return;
  }
  if (!retry) {
    call.Settle(std::move(status));
    return;
  }
  const auto& list = replicas_[call.s];
  const size_t r = std::find(list.begin(), list.end(), e) - list.begin();
  if (attempt.lost && was_up && !call.reconnected[r]) {
    // The connection was up when the call began and broke without a reply: most often the server
    // closed it while idle (its --idle_timeout_s, a restart, a network change). The replica may
    // be asked once more, on a new connection (EndpointError marked it down): lookups are reads,
    // and a call sent again reveals nothing new.
    call.reconnected[r] = true;
    call.tried[r] = false;
  } else {
    avoid(ep);
  }
  call.errors.push_back(std::move(status));
  if (!StartAttempt(call, /*hedge=*/false) && call.in_flight.empty()) {
    call.Settle(AllFailed(call.s, call.errors));
  }
}

void Transport::ArmHedge(CallState& call) {
  if (std::find(call.tried.begin(), call.tried.end(), false) == call.tried.end()) return;
  const int generation = ++call.generation;
  const absl::Duration delay = latency_[call.s].HedgeDelay(options_.timeout);
  CallState* state = &call;
  call.attempts.push_back(loop_->io->provider->getTimer()
                              .afterDelay(absl::ToInt64Nanoseconds(delay) * kj::NANOSECONDS)
                              .then([this, state, generation]() {
                                if (!state->settled && state->generation == generation) {
                                  StartAttempt(*state, /*hedge=*/true);
                                }
                              })
                              .eagerlyEvaluate(nullptr));
}

absl::Status Transport::AllFailed(int s, const std::vector<absl::Status>& errors) const {
  // One replica: its last attempt's error (an earlier one may be the stale connection it
  // replaced).
  if (replicas(s) == 1) return errors.back();
  std::string causes;
  for (const absl::Status& e : errors) {
    absl::StrAppend(&causes, causes.empty() ? "" : "; ", e.message());
  }
  return absl::UnavailableError(
      absl::StrCat("server ", s, ": all ", replicas(s), " of its replicas failed: ", causes));
}

absl::StatusOr<rpc::StatsSnapshot> Transport::Stats(int s) {
  rpc::StatsSnapshot info;
  absl::Status status = Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(servers(), true);
        (*done)[s] = false;
        auto reply = Call(s, [&info](rpc::VeilServer::Client cap, int) {
                       return cap.statsRequest().send().then(
                           [&info](capnp::Response<rpc::VeilServer::StatsResults> r) {
                             info = rpc::ReadStats(r.getStats());
                             return absl::OkStatus();
                           });
                     }).then([done, s](absl::Status result) {
          (*done)[s] = true;
          return result;
        });
        return WithTimeout(kj::mv(reply), done);
      },
      "stats");
  if (!status.ok()) return status;
  return info;
}

}  // namespace veil::client
