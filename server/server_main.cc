// veil-server: one party of the two-server PIR service.
//   veil-server --party=0 --table=t.veil --listen=127.0.0.1:0 --backend=auto --threads=1
// Prints the bound port on stdout; logs on stderr; stops cleanly on SIGTERM / SIGINT.
#include <cstdio>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "server/server.h"

ABSL_FLAG(int, party, -1, "which key shares this server answers: 0 or 1");
ABSL_FLAG(std::string, table, "", "table file (veil table build)");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "HOST:PORT to listen on; port 0 picks a free port");
ABSL_FLAG(std::string, backend, "auto", "cpu, gpu, or auto (gpu when built and present)");
ABSL_FLAG(int, threads, 1, "CPU backend threads");
ABSL_FLAG(int, max_keys_per_call, 1024, "keys accepted in one call");
ABSL_FLAG(int64_t, max_message_bytes, 1 << 20, "bytes of parameters accepted in one call");
ABSL_FLAG(int, max_queued_keys, 16384, "keys waiting for the backend before calls are refused");
ABSL_FLAG(int, max_queued_keys_per_connection, 4096,
          "keys one connection may have waiting before its calls are refused");
ABSL_FLAG(int, max_batch, 64, "keys answered in one table pass");
ABSL_FLAG(int, max_wait_us, 2000, "how long the oldest waiting key may wait for a fuller batch");
ABSL_FLAG(int, max_connections, 1024, "open connections accepted");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "veil-server --party=0|1 --table=FILE [--listen=HOST:PORT] [--backend=cpu|gpu|auto] "
      "[--threads=N]");
  absl::ParseCommandLine(argc, argv);
  for (auto [name, value] : {std::pair{"max_keys_per_call", absl::GetFlag(FLAGS_max_keys_per_call)},
                             std::pair{"max_queued_keys", absl::GetFlag(FLAGS_max_queued_keys)},
                             std::pair{"max_queued_keys_per_connection",
                                       absl::GetFlag(FLAGS_max_queued_keys_per_connection)},
                             std::pair{"max_batch", absl::GetFlag(FLAGS_max_batch)},
                             std::pair{"max_connections", absl::GetFlag(FLAGS_max_connections)}}) {
    if (value < 1) {
      std::fprintf(stderr, "veil-server: --%s must be positive\n", name);
      return 1;
    }
  }
  if (absl::GetFlag(FLAGS_max_wait_us) < 0 || absl::GetFlag(FLAGS_max_message_bytes) < 1024) {
    std::fprintf(stderr,
                 "veil-server: --max_wait_us must not be negative and --max_message_bytes must "
                 "be at least 1024\n");
    return 1;
  }
  veil::server::ServerOptions options;
  options.party = absl::GetFlag(FLAGS_party);
  options.table_path = absl::GetFlag(FLAGS_table);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.threads = absl::GetFlag(FLAGS_threads);
  veil::server::ServerLimits& limits = options.limits;
  limits.max_keys_per_call = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_keys_per_call));
  limits.max_message_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_message_bytes));
  limits.max_queued_keys = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_keys));
  limits.max_queued_keys_per_connection =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_keys_per_connection));
  limits.max_batch_keys = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_batch));
  limits.max_wait = absl::Microseconds(absl::GetFlag(FLAGS_max_wait_us));
  limits.max_connections = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_connections));
  absl::Status status = veil::server::RunServer(options);
  if (!status.ok()) {
    std::fprintf(stderr, "veil-server: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
