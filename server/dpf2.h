// Protocol "dpf2": one party of two-server DPF-PIR. The process's backend (pir::Backend, CPU or
// GPU) answers DPF keys in table passes batched across connections (KeyBatcher); each connection
// gets a PirServer service that checks every call against the limits and the table before any
// work and turns failures into error replies (rpc/status.h). Its queued keys are bounded per
// connection. The table versions served (rolling updates: SIGHUP) are a TableSet
// (server/table_set.h); each call is answered from the version it names, or the newest. Runs on the
// event-loop thread; the table scan runs on the scheduler's worker.
#ifndef VEIL_SERVER_DPF2_H_
#define VEIL_SERVER_DPF2_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/protocol.h"

namespace veil::server {

// Needs options.party 0 or 1; starts the backend named by options.backend on the table.
// Returns INVALID_ARGUMENT for another party, and the backend's error if it cannot start.
absl::StatusOr<std::unique_ptr<Protocol>> CreateDpf2Protocol(const ProtocolEnv& env);

}  // namespace veil::server

#endif  // VEIL_SERVER_DPF2_H_
