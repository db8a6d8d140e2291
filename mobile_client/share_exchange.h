// The dpf2 protocol's client core, below the lookup API (client.h): connects to both parties (each
// party's replicas) over the transport, checks that they serve the same table and accept the
// client's keys, and exchanges key shares for answer shares, each call failed over or hedged
// across the party's replicas by the transport. A lookup's keys are split into calls that fit both
// servers' limits (bags kept whole), sent in waves that fit their per-connection queues, and every
// answer is checked against the session's table before its shares are added.
//
// Table versions (rolling updates, server/table_set.h): servers may serve several versions
// (epochs) of one table shape. The session uses the newest version both servers serve and names it
// in every call, so the two shares of a row always come from the same version. When a reply says
// its server serves a newer version, the next call first reads both configurations again and moves
// to the newest common version; a call refused with FAILED_PRECONDITION (its version is no longer
// served) does the same and, if the version changed, is sent once more with the same keys (valid
// for every version: all have the session's shape; a server seeing a key again learns only that a
// call was repeated).
#ifndef VEIL_MOBILE_CLIENT_SHARE_EXCHANGE_H_
#define VEIL_MOBILE_CLIENT_SHARE_EXCHANGE_H_

#include <sodium.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "embedding/row_tag.h"
#include "mobile_client/client.h"
#include "mobile_client/failure_latch.h"
#include "mobile_client/transport.h"
#include "pir/two_server/query.h"

namespace veil::client {

// Wipes a vector's elements when the scope ends, on every way out: for the client's copies of
// answer shares, reconstructed rows and their decoded values, which together or alone reveal the
// rows. A vector moved out before then (returned to the caller) is empty and left alone.
template <typename T>
class WipeAtExit {
 public:
  explicit WipeAtExit(std::vector<T>& v) : v_(v) {}
  ~WipeAtExit() { sodium_memzero(v_.data(), v_.size() * sizeof(T)); }
  WipeAtExit(const WipeAtExit&) = delete;
  WipeAtExit& operator=(const WipeAtExit&) = delete;

 private:
  std::vector<T>& v_;
};

class ShareExchange {
 public:
  // Connects to both servers and checks their configurations (see Client::Connect).
  static absl::StatusOr<std::unique_ptr<ShareExchange>> Connect(const ClientOptions& options);
  ~ShareExchange();

  // The session's table: its shape and the version (epoch, digest) lookups use now.
  TableInfo table() const;
  // Words of each share: the row's data words and its tag words.
  uint32_t share_words() const { return share_words_; }
  // The key of the table's row tags (row_key_file), if the client has one.
  const std::optional<embedding::RowKey>& row_key() const { return row_key_; }
  // "servers 0 (A) and 1 (B)", for messages about both answers.
  std::string ServerPair() const;
  const ClientOptions& options() const { return options_; }
  const FailureLatch& latch() const { return latch_; }

  // The reconstructed words of one Exchange and the table version (epoch) every answer came from.
  struct Answers {
    std::vector<uint32_t> words;
    uint64_t epoch = 0;
  };

  // Sends `queries` (one key pair per row or bag member; `ranges`: one row range per query, or
  // empty for whole-table keys; `bag_sizes`: empty, or the bags of an answerPooled lookup) to both
  // servers and returns the reconstructed words: share_words per query, or per bag. Records the
  // call's statistics with `lookups` rows or bags. Serialized with the other calls.
  absl::StatusOr<Answers> Exchange(std::vector<pir::QueryKeys>& queries,
                                   absl::Span<const uint32_t> bag_sizes,
                                   absl::Span<const RowRange> ranges, dpf::OutputType output,
                                   uint32_t lookups, const char* what);

  absl::StatusOr<rpc::StatsSnapshot> Stats(int party);
  CallStats last_call() const;
  CallStats totals() const;

  struct PreparedCall;
  struct ServerConfig;

 private:
  explicit ShareExchange(ClientOptions options, std::unique_ptr<Transport> transport);

  // Loop thread: reads the `config` of replica `replica` of server s and checks it; before the
  // session's table is adopted keeps it for ConfigsAtConnect, after it accepts the replica only if
  // it serves the session's table version (FAILED_PRECONDITION otherwise: the transport then
  // avoids it and tries again later).
  kj::Promise<absl::Status> ReadConfig(int s, int replica, rpc::VeilServer::Client server);
  // One replica's configuration on its own: party, PRG and key types.
  absl::Status CheckServer(int s, int replica, const ServerConfig& config) const;
  // Each server's configuration from those read at Connect: its replicas must have one shape and
  // share a version; only the versions all of them serve are kept.
  absl::StatusOr<std::vector<ServerConfig>> ConfigsAtConnect() const;
  // Both servers' configurations: the newest table version both serve, which must have the
  // session's shape if one is set; the session's limits. Changes nothing when it fails.
  absl::Status Adopt(const std::vector<ServerConfig>& configs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Reads both servers' configurations again (from the replica each one's calls go to), by
  // `deadline`, and adopts them. Sets `moved` when the session's table version changed.
  absl::Status MoveToNewestVersion(bool& moved, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Every call answered by `deadline`; `what` names the lookup in errors that arise on this side.
  absl::Status RunCalls(std::vector<PreparedCall>& calls, std::vector<uint32_t> (&shares)[2],
                        CallStats& stats, absl::Time deadline, const char* what);
  // Sends `calls` to both servers at once; their replies fill `shares` from word first_offset.
  absl::Status SendWave(absl::Span<PreparedCall> calls, size_t first_offset,
                        std::vector<uint32_t> (&shares)[2], absl::Time deadline, const char* what);
  // The status of a reply of `words` share words from replica `replica` of server s (`expected`
  // asked): its table and its size.
  absl::Status CheckReply(int s, int replica, rpc::TableId::Reader table, size_t words,
                          size_t expected) const;

  const ClientOptions options_;
  const FailureLatch latch_;
  std::optional<embedding::RowKey> row_key_;
  std::unique_ptr<Transport> transport_;
  // Written under call_mu_ and table_mu_: calls (holding call_mu_) read it freely, table() locks.
  TableInfo table_;
  mutable absl::Mutex table_mu_;
  // Set with table_; fixed once adopted (a new version must have the session's shape), read by
  // callers on other threads.
  std::atomic<uint32_t> share_words_{0};
  // Each server's newest table version at the last Adopt; a reply naming a newer one sets
  // newer_version_.
  uint64_t newest_epoch_[2] = {0, 0};
  std::atomic<bool> newer_version_{false};
  uint64_t max_message_bytes_ = 0;
  uint64_t max_queued_keys_ = 0;  // per connection, the smaller of the two; 0: no limit
  // Per server and replica: the configuration read at Connect (none: the replica is down).
  std::vector<std::optional<ServerConfig>> replica_configs_[2];
  std::atomic<bool> adopted_{false};  // table_ is the session's (set once, before any call)

  mutable absl::Mutex call_mu_;  // serializes the calls
  CallStats last_call_ ABSL_GUARDED_BY(call_mu_);
  std::atomic<uint64_t> total_lookups_{0}, total_keys_{0}, total_calls_{0};
  std::atomic<uint64_t> total_failovers_{0}, total_hedges_{0};
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_SHARE_EXCHANGE_H_
