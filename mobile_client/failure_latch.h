// FailureLatch: a file that stops every client given it after one answer failed its check.
//
// Why: a server can make an answer fail because of what was asked. A server that corrupts only
// row r* makes a lookup fail its row tag exactly when r* was wanted; a bfv-bag server can put any
// function of the encrypted weights into an answer, so that it fails its tag or its decryption
// exactly when some row is in the bag. If the server sees the failure (the app stops, retries or
// reports it), it learns one bit about the query (docs/privacy.md, "Failures can leak"). So a
// client stops after one such failure; and since an app that makes a new client (or restarts)
// would give the server another bit, the stop is written to a file that every client given the
// same path honours, in this process and later ones: one bit per installation, not per client.
//
// Clients trip it on the failures a server can make depend on the query: a row or pooled sum
// that fails its tag (DATA_LOSS), and every bfv-bag answer that fails (its tag, its decryption or
// its decoding: BagClient's stop). While the file exists, Connect and every
// lookup of a client given it return FAILED_PRECONDITION naming the file and the failure it
// records; removing the file (once the deployment is fixed, after the failure was reported out of
// band) lets clients look up again. A lookup already under way when another trips the latch
// finishes (its query was sent before, whatever the other's outcome). An empty path is a latch
// that never trips.
#ifndef VEIL_MOBILE_CLIENT_FAILURE_LATCH_H_
#define VEIL_MOBILE_CLIENT_FAILURE_LATCH_H_

#include <string>

#include "absl/status/status.h"

namespace veil::client {

class FailureLatch {
 public:
  explicit FailureLatch(std::string path = "") : path_(std::move(path)) {}

  const std::string& path() const { return path_; }

  // OK while nothing is at the path (or the path is empty); INVALID_ARGUMENT if the path's folder
  // does not exist or takes no new file (such a latch could not be written: probed once per folder
  // and process); FAILED_PRECONDITION naming the file and
  // the failure it records otherwise: whatever is at the path (a file, a link, a FIFO, one that
  // cannot be read), or a failure this process could not write there.
  absl::Status Check() const;

  // Records `failure` (an answer that failed its check) in the file, created with mode 0600 (an
  // existing file keeps the first failure), synced with its folder, and returns it saying that
  // lookups stop until the file is removed. If the file cannot be written, the latch stays tripped
  // in this process (Check) and the returned status says so. With an empty path, returns
  // `failure` as it is.
  absl::Status Trip(const absl::Status& failure) const;

 private:
  std::string path_;
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_FAILURE_LATCH_H_
