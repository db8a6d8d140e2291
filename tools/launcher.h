// Runs veil-server as a child process: used by the end-to-end tests, the e2e benchmarks and the
// demo, which need real servers on loopback (two dpf2 parties, or one bfv-bag server). Not part of
// a deployment (use a supervisor).
#ifndef VEIL_TOOLS_LAUNCHER_H_
#define VEIL_TOOLS_LAUNCHER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace veil::tools {

// The veil-server executable in the folder of the running program (build/bin/ holds both).
std::string ServerBinaryNextToSelf();

struct ServerProcessOptions {
  std::string binary;             // path of veil-server
  std::string protocol = "dpf2";  // --protocol
  int party = 0;                  // dpf2 only
  std::string table_path;
  std::string backend = "cpu";
  int threads = 1;
  std::string listen = "127.0.0.1:0";  // port 0: a free port, printed by the server
  // TLS: certificate and key PEM files (server/tls.h); empty: plaintext.
  std::string tls_cert_path;
  std::string tls_key_path;
  std::vector<std::string> extra_args;  // e.g. "--max_keys_per_call=8"
  // Where the server's log (stderr) goes: "" keeps this process's stderr.
  std::string log_path;
  absl::Duration start_timeout = absl::Seconds(30);
};

class ServerProcess {
 public:
  // Starts the server and waits until it prints its port. The server is killed (SIGKILL) if the
  // thread that started it ends first: a launcher that crashes leaves no server behind (holding
  // its ports, or a test runner's output pipe open). So start servers on a thread that outlives
  // them.
  // Returns INTERNAL if it cannot be started, or UNAVAILABLE (with its exit status) if it exits
  // or stays silent past start_timeout.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);

  // Stops the server (SIGTERM, then SIGKILL after 10 s) if it still runs.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const;  // "127.0.0.1:PORT"
  // The server's resident memory (VmRSS, KiB) from /proc; 0 if it cannot be read.
  uint64_t ResidentKb() const;

  // SIGTERM, then waits up to `timeout` (SIGKILL after it). Returns INTERNAL unless the server
  // exited with status 0 before the timeout.
  absl::Status Stop(absl::Duration timeout = absl::Seconds(10));
  // SIGKILL and reap: a server that dies without warning.
  void Kill();

  // A rolling table update (dpf2): copies `next_table` beside `served_path` (the server's --table
  // file), renames the copy over it (atomic: the server never reads a half-written file) and sends
  // SIGHUP. The server loads and verifies the new version in the background and serves it beside
  // the old one (its config's `epochs` say when); a refused file is only logged by the server.
  // Returns INTERNAL naming the file that cannot be copied or renamed, or FAILED_PRECONDITION if
  // the server has exited.
  absl::Status RollTable(const std::string& served_path, const std::string& next_table);

 private:
  ServerProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  // Waits for the child up to `timeout`; returns its wait status or -1 if still running.
  int WaitFor(absl::Duration timeout);

  pid_t pid_;
  int port_;
  bool reaped_ = false;
};

}  // namespace veil::tools

#endif  // VEIL_TOOLS_LAUNCHER_H_
