// The protocol a server process speaks (veil-server --protocol). The process owns what every
// protocol shares: the listener (TLS, the loopback rule, connection limits), the limits, the
// statistics, the table file and shutdown; a Protocol owns its backend, its batching and the
// service each connection gets. A protocol with another query/answer shape or an offline download
// (a single-server protocol's hint, say) is a new Protocol and a new interface in rpc/veil.capnp
// extending `VeilServer`; nothing of dpf2 changes.
#ifndef VEIL_SERVER_PROTOCOL_H_
#define VEIL_SERVER_PROTOCOL_H_

#include <capnp/capability.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "embedding/table.h"
#include "rpc/stats_wire.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "server/server.h"
#include "server/stats.h"

namespace veil::server {

// What a protocol's service may know of its connection.
struct ConnectionPolicy {
  // The peer may call `stats`: it is on a loopback address, or the server runs --stats_from_any.
  bool stats_allowed = false;
};

class Protocol {
 public:
  virtual ~Protocol() = default;

  // For the start-up log: the backend and whatever else the protocol chose.
  virtual std::string Describe() const = 0;
  // Any thread (metrics scrapes): the table versions served now, oldest first.
  virtual std::vector<std::shared_ptr<const embedding::Table>> ServedTables() const = 0;
  // Event-loop thread: the service of one new connection (its bootstrap capability).
  virtual kj::Own<capnp::Capability::Server> NewConnection(const ConnectionPolicy& policy) = 0;
  // Event-loop thread, on SIGHUP: starts loading a new version of the table beside the served
  // one (server/table_set.h), or logs that this protocol does not roll tables.
  virtual void Roll();
  // Event-loop thread, at shutdown: fails queued calls and lets the running pass finish.
  virtual void Stop(kj::WaitScope& wait_scope, kj::Timer& timer) = 0;
};

// What a protocol is made from; `options` and `stats` outlive the protocol, which keeps `table`
// (loaded and verified) as long as it serves it. Made on the event-loop thread.
struct ProtocolEnv {
  const ServerOptions& options;
  std::shared_ptr<const embedding::Table> table;
  ServerStats& stats;
};

// The --protocol names this build serves.
std::vector<std::string> ProtocolNames();

// Returns INVALID_ARGUMENT for a name not in ProtocolNames(), else the protocol's factory's result.
absl::StatusOr<std::unique_ptr<Protocol>> CreateProtocol(absl::string_view name,
                                                         const ProtocolEnv& env);

// INVALID_ARGUMENT when a call's parameters (`words` 8-byte words) exceed max_message_bytes.
absl::Status CheckCallWords(uint64_t words, const ServerLimits& limits);

// The digest and epoch of `table`, as every protocol's answers carry them.
void FillTableId(const embedding::Table& table, rpc::TableId::Builder table_id);

// Counts and logs (throttled) a rejected call, then throws its error reply.
[[noreturn]] void RejectCall(ServerStats& stats, const absl::Status& status,
                             absl::string_view call);

// The `VeilServer` methods every protocol's service answers alike: derive a protocol's
// per-connection service from ServiceBase<rpc::TheProtocolsInterface>.
template <typename Interface>
class ServiceBase : public Interface::Server {
 public:
  ServiceBase(std::string protocol, ServerStats& stats, const ConnectionPolicy& policy)
      : protocol_(std::move(protocol)), stats_(stats), policy_(policy) {}

 protected:
  using HelloContext = rpc::VeilServer::Server::HelloContext;
  using StatsContext = rpc::VeilServer::Server::StatsContext;

  kj::Promise<void> hello(HelloContext context) override {
    rpc::Hello::Builder hello = context.getResults().initHello();
    hello.setProtocol(protocol_);
    hello.setProtocolVersion(rpc::PROTOCOL_VERSION);
    return kj::READY_NOW;
  }
  // Server-wide counts, queue lengths and latencies reveal load, not rows, but only operators
  // need them: other peers get PERMISSION_DENIED.
  kj::Promise<void> stats(StatsContext context) override {
    if (!policy_.stats_allowed) {
      Reject(absl::PermissionDeniedError(
                 "stats are answered only to loopback connections (the server's "
                 "--stats_from_any opens them to all)"),
             "stats");
    }
    rpc::WriteStats(stats_.Snapshot(), context.getResults().initStats());
    return kj::READY_NOW;
  }

  [[noreturn]] void Reject(const absl::Status& status, absl::string_view call) {
    RejectCall(stats_, status, call);
  }

  const std::string protocol_;
  ServerStats& stats_;
  const ConnectionPolicy policy_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_PROTOCOL_H_
