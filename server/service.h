// The Cap'n Proto PirServer implementation: checks every call against the limits and the table
// before any work, queues the keys with the batching scheduler, and turns failures into error
// replies (rpc_status.h). One instance serves one connection (its queued keys are bounded per
// connection); all share the scheduler. Runs on the event-loop thread; the table scan runs on the
// scheduler's worker.
#ifndef VEIL_SERVER_SERVICE_H_
#define VEIL_SERVER_SERVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dpf/key.h"
#include "embedding/table.h"
#include "server/limits.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/stats.h"
#include "server/veil.capnp.h"

namespace veil::server {

class PirService final : public rpc::PirServer::Server {
 public:
  // `table`, `scheduler` and `stats` must outlive the service.
  PirService(int party, const embedding::Table& table, std::string backend_name,
             const ServerLimits& limits, BatchScheduler& scheduler, ServerStats& stats);

 protected:
  kj::Promise<void> config(ConfigContext context) override;
  kj::Promise<void> answer(AnswerContext context) override;
  kj::Promise<void> answerPooled(AnswerPooledContext context) override;
  kj::Promise<void> stats(StatsContext context) override;

 private:
  // Counts and logs a rejected call, then throws its error reply.
  [[noreturn]] void Reject(const absl::Status& status, absl::string_view call);
  void FillTableId(rpc::TableId::Builder table_id) const;
  // Queues this connection's keys (with their row ranges, or none for the whole table), within
  // max_queued_keys_per_connection.
  kj::Promise<absl::StatusOr<BatchScheduler::Shares>> Submit(std::vector<dpf::DpfKey> keys,
                                                             std::vector<pir::RowRange> ranges);

  const int party_;
  const embedding::Table& table_;
  const std::string backend_name_;
  const ServerLimits limits_;
  BatchScheduler& scheduler_;
  ServerStats& stats_;
  uint64_t queued_keys_ = 0;  // this connection's keys waiting for the backend
};

}  // namespace veil::server

#endif  // VEIL_SERVER_SERVICE_H_
