// The dpf2 protocol's table passes: DPF keys from every connection, gathered by the shared
// BatchScheduler, answered by the pir::Backend. Within a pass the keys are grouped by what one
// backend call needs them to share: the backend (one per table version, so a pass never mixes
// versions), row range, output type (and leaf width) and PRG; one backend call per group. A group's
// error fails only the calls with keys in it, so whatever keys one client sends (XOR keys, another
// PRG, another range) never change what another client gets.
#ifndef VEIL_SERVER_KEY_BATCHER_H_
#define VEIL_SERVER_KEY_BATCHER_H_

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dpf/key.h"
#include "pir/two_server/backend.h"
#include "server/limits.h"
#include "server/scheduler.h"
#include "server/stats.h"

namespace veil::server {

class KeyBatcher {
 public:
  using Shares = std::vector<uint32_t>;  // row_words words per key, in key order

  // Event-loop thread (see BatchScheduler); `stats` must outlive the batcher.
  KeyBatcher(const ServerLimits& limits, ServerStats& stats);

  // Event-loop thread. Queues validated keys (server/request.h) for `backend` (the table version
  // the call asked for, kept alive until the call is answered) and their row ranges (empty: the
  // whole table; else one validated range per key), of connection `owner`
  // (BatchScheduler::Submit). Resolves with this call's shares, or the scheduler's or backend's
  // error for it.
  kj::Promise<absl::StatusOr<Shares>> Submit(std::shared_ptr<pir::Backend> backend,
                                             std::vector<dpf::DpfKey> keys,
                                             std::vector<pir::RowRange> ranges = {},
                                             const void* owner = nullptr);

  // Event-loop thread: see BatchScheduler::Stop.
  void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) { scheduler_.Stop(wait_scope, timer); }

 private:
  std::vector<absl::Status> Pass(absl::Span<BatchItem* const> batch);

  BatchScheduler scheduler_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_KEY_BATCHER_H_
