// A whole veil server process: opens the table, starts its protocol (server/protocol.h: the
// backend and the batching scheduler), accepts Cap'n Proto connections, rolls to a new version of
// the table on SIGHUP (dpf2), and stops cleanly on SIGTERM or SIGINT (or when its launcher goes).
#ifndef VEIL_SERVER_SERVER_H_
#define VEIL_SERVER_SERVER_H_

#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/limits.h"

namespace veil::server {

struct ServerOptions {
  std::string protocol = "dpf2";  // what the server speaks (server/protocol.h)
  int party = -1;                 // dpf2: 0 or 1
  int bfv_log_n = 13;             // bfv-bag: ring degree 2^13 or 2^14 (he::BagParams)
  std::string table_path;
  // lwe-simple / lwe-double: keep the hint in a file (read when current, else computed and
  // written), at lwe_hint_file or, empty, next to the table (lattice::HintPathFor); without the
  // cache it is computed in memory at every start.
  bool lwe_hint_cache = true;
  std::string lwe_hint_file;
  // lwe-*: the records each database column holds (the shape's K, lattice::ShapeOptions);
  // 0 lets the protocol choose the cheapest.
  uint64_t lwe_records_per_column = 0;
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks a free one
  std::string backend = "auto";        // cpu | gpu | auto
  int threads = 1;                     // CPU threads answering (veil-server: 0, one per core)
  std::string gpus = "all";            // GPU backend: "all" or a device list ("0,1"); the table
                                       // is split by rows across them (NCCL combines)
  // TLS (rpc/tls.h): the certificate (chain) and private key, PEM files; both or neither. With
  // them every accepted connection is TLS (1.2 or newer).
  std::string tls_cert_path;
  std::string tls_key_path;
  // Without TLS the server listens on loopback addresses only: elsewhere an observer of the
  // connections to both servers reconstructs the queried rows. This lifts the rule (with a
  // warning in the log), for networks protected otherwise.
  bool insecure_plaintext = false;
  // Recompute the table's digest at load and refuse a mismatch (off only for experiments).
  bool verify_table = true;
  // dpf2: the PRGs whose keys are accepted (and advertised in `config`). SipHash, the least
  // analysed, only when asked for.
  std::vector<dpf::Prg> prgs{std::begin(kDefaultPrgs), std::end(kDefaultPrgs)};
  // `stats` answers every peer, not only loopback ones.
  bool stats_from_any = false;
  // Prometheus endpoint (server/metrics.h): "HOST:PORT", or empty for none. Loopback addresses
  // only unless metrics_from_any.
  std::string metrics;
  bool metrics_from_any = false;
  // dpf2: after a roll (SIGHUP loads table_path again, server/table_set.h), how long the older
  // table versions are still served before they are dropped and freed.
  absl::Duration epoch_grace = absl::Seconds(60);
  // Also stop (as on SIGTERM) when standard input reaches end of file: a launcher that keeps the
  // write end of a pipe open there gets its server stopped when it exits, however it dies.
  bool stop_on_stdin_eof = false;
  ServerLimits limits;
};

// Serves until SIGTERM or SIGINT (or, with stop_on_stdin_eof, the end of stdin), then fails
// queued calls, finishes the running pass, logs the final statistics and returns OK. Once
// listening it prints the bound port as one line on stdout (tests and launchers read it). Logs go
// to stderr.
// Returns INVALID_ARGUMENT for bad options (including a plaintext listener on a non-loopback
// address without insecure_plaintext, or a bad metrics address) or unusable TLS files, the files'
// NOT_FOUND / PERMISSION_DENIED, and the table's, backend's, listener's or metrics endpoint's error
// if one cannot start.
absl::Status RunServer(const ServerOptions& options);

}  // namespace veil::server

#endif  // VEIL_SERVER_SERVER_H_
