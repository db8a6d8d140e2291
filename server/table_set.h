// The table versions (epochs) a dpf2 server serves, each with the backend that answers from it.
//
// Rolling update: Roll() (SIGHUP) loads the table file again on a thread of its own, verifying its
// digest, while the current versions keep serving; a new version is published atomically beside
// them only if its epoch is newer and its shape (rows, row words, format, dim, fixed-point bits,
// row tags) is the current one's, so that a client's session and keys stay valid across versions.
// Otherwise it is refused with a log line and nothing changes. Once a newer version is published,
// each older one is served for `grace` more and then dropped; its memory goes when the last call
// using it has been answered. Calls name the version they want, so a batch never mixes versions.
#ifndef VEIL_SERVER_TABLE_SET_H_
#define VEIL_SERVER_TABLE_SET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "embedding/table.h"
#include "pir/two_server/backend.h"

namespace veil::server {

// One table version and its backend. Immutable once published; shared with the calls using it.
struct ServedTable {
  std::shared_ptr<const embedding::Table> table;
  std::unique_ptr<pir::Backend> backend;  // reads `table`; declared after it, destroyed first
  uint64_t epoch() const { return table->epoch(); }
};

// The backend of `served`, keeping all of `served` alive while a call holds it.
inline std::shared_ptr<pir::Backend> BackendOf(std::shared_ptr<const ServedTable> served) {
  pir::Backend* backend = served->backend.get();
  return std::shared_ptr<pir::Backend>(std::move(served), backend);
}

class TableSet {
 public:
  // Loads a table file (the server's --table) and starts a backend on it; run on the roll thread.
  using Loader = std::function<absl::StatusOr<std::unique_ptr<ServedTable>>()>;

  // Serves `first`; Roll() calls `load`.
  TableSet(std::unique_ptr<ServedTable> first, Loader load, absl::Duration grace);
  // Waits for a load in progress to finish.
  ~TableSet();
  TableSet(const TableSet&) = delete;
  TableSet& operator=(const TableSet&) = delete;

  // Any thread. The version `epoch` (with `digest` when not empty), or the newest without `epoch`.
  // Returns FAILED_PRECONDITION "epoch N is no longer served (serving M)" for a version dropped
  // (or older than any served), "epoch N is not served" for one never served, and "epoch N here
  // has digest X" when `digest` is another.
  absl::StatusOr<std::shared_ptr<const ServedTable>> Find(
      std::optional<uint64_t> epoch, absl::Span<const uint8_t> digest = {}) const;
  // Any thread: every version served now, oldest first (the last is the newest).
  std::vector<std::shared_ptr<const ServedTable>> Served() const;
  uint64_t newest_epoch() const;

  // Any thread: asks the roll thread to load the table again (a request made while a load runs
  // starts another load after it). The outcome is logged.
  void Roll();

 private:
  struct Entry {
    std::shared_ptr<const ServedTable> served;
    absl::Time retire_at = absl::InfiniteFuture();  // set when a newer version is published
  };

  void RollLoop();
  // Roll thread: loads, checks and publishes one new version; logs what happened.
  void LoadAndPublish();
  // Roll thread: drops the versions whose grace period is over.
  void RetireExpired();
  // "1, 2": the epochs served now.
  std::string ServedEpochs() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Loader load_;
  const absl::Duration grace_;

  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
  bool roll_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_TABLE_SET_H_
