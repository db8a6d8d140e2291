// veil-server: one party of the two-server PIR service (--protocol=dpf2), or a single bfv-bag or
// LWE (lwe-simple, lwe-double, lwe-exppack-s, lwe-exppack-d, lwe-hybrid, lwe-double-pack) server.
//   veil-server --party=0 --table=t.veil --listen=127.0.0.1:0 --backend=auto [--threads=N]
//               [--tls-cert=server.pem --tls-key=server.key | --insecure-plaintext]
//   veil-server --protocol=bfv-bag --table=fixed.veil [--bfv-log-n=13]
//   veil-server --protocol=lwe-simple|lwe-double --table=t.veil [--lwe-hint-file=PATH]
//   veil-server --protocol=lwe-exppack-s --table=t.veil [--max-galois-key-bytes=N]
//   [--metrics=127.0.0.1:9464] [--config=FILE]
// Prints the bound port on stdout; logs on stderr (key=value events, server/log.h); rolls to the
// --table file's new version on SIGHUP (dpf2); stops cleanly on SIGTERM / SIGINT.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/tls.h"
#include "server/process_memory.h"
#include "server/server.h"
#include "tools/flags.h"

ABSL_FLAG(std::string, protocol, "dpf2",
          "what this server speaks: dpf2 (one of two non-colluding servers), bfv-bag (a single "
          "server answering encrypted pooled lookups), lwe-simple or lwe-double (a single server "
          "answering LWE PIR lookups; clients download a hint once), lwe-exppack-s (LWE PIR with "
          "packed answers and no hint; clients upload expansion keys once per connection), "
          "lwe-exppack-d (the same over DoublePIR, for rows of a few bytes), lwe-hybrid "
          "(lwe-exppack-s returning only the packed ciphertexts each lookup's RGSW bits select) or "
          "lwe-double-pack (lwe-exppack-s's packed answer folded by a second query and packed "
          "again)");
ABSL_FLAG(int, party, -1, "dpf2: which key shares this server answers, 0 or 1");
ABSL_FLAG(int, bfv_log_n, 13, "bfv-bag: the BFV ring degree 2^N, 13 or 14");
ABSL_FLAG(int, max_queued_ciphertexts, 64,
          "bfv-bag and the packed LWE protocols (lwe-exppack-s, lwe-exppack-d, lwe-hybrid, "
          "lwe-double-pack): query ciphertexts (packed LWE: lookups) waiting for the worker "
          "before calls are refused");
ABSL_FLAG(int, max_queued_ciphertexts_per_connection, 8,
          "bfv-bag and the packed LWE protocols: query ciphertexts (packed LWE: lookups) one "
          "connection may have waiting");
ABSL_FLAG(
    int64_t, max_galois_key_bytes, int64_t{2} << 30,
    "bfv-bag, lwe-exppack-s, lwe-hybrid: memory for all sessions' Galois (expansion) keys; closed "
    "connections' keys, then idle sessions' keys are evicted (least recently used first) to make "
    "room");
ABSL_FLAG(int, key_resume_s, 3600,
          "bfv-bag and the packed LWE protocols: how long a closed connection's keys wait (within "
          "--max_galois_key_bytes, evicted first) for the client's next connection to resume them "
          "instead of uploading them again; 0: they go with the connection");
ABSL_FLAG(std::string, table, "",
          "table file (veil table build); dpf2: on SIGHUP it is loaded again as the next table "
          "version (see Rolling table updates below)");
ABSL_FLAG(int, epoch_grace_s, 60,
          "dpf2: after a roll, how long older table versions are still served (then they are "
          "dropped and freed, and calls naming them get FAILED_PRECONDITION)");
ABSL_FLAG(bool, lwe_hint_cache, true,
          "lwe-simple / lwe-double / lwe-exppack-s: keep the hint in a file (read at start when "
          "current, else computed and written); false computes it in memory at every start");
ABSL_FLAG(std::string, lwe_hint_file, "",
          "lwe-simple / lwe-double / lwe-exppack-s: the hint file; empty: next to the table "
          "(TABLE.lwe-simple.hint, TABLE.lwe-double.hint; lwe-exppack-s and lwe-hybrid share "
          "lwe-simple's)");
ABSL_FLAG(uint64_t, lwe_records_per_column, 0,
          "lwe-*: records per database column (the shape: a column of K records is one lookup's "
          "answer; ExpPack(S) packs it into ceil(K x row bytes / 4096) ciphertexts, which "
          "lwe-hybrid and lwe-double-pack then narrow); 0 lets the protocol choose the cheapest");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "HOST:PORT to listen on; port 0 picks a free port");
ABSL_FLAG(std::string, backend, "auto", "cpu, gpu, or auto (gpu when built and present)");
ABSL_FLAG(int, threads, 0, "CPU threads that answer queries (0: one per core)");
ABSL_FLAG(std::string, gpus, "all",
          "GPU backend: the devices that hold the table, all or a list such as 0,1 (the table is "
          "split by rows across them and the partial answers are combined with NCCL)");
ABSL_FLAG(int, max_keys_per_call, 1024, "keys accepted in one call");
ABSL_FLAG(int64_t, max_message_bytes, 1 << 20, "bytes of parameters accepted in one call");
ABSL_FLAG(int, max_queued_keys, 16384, "keys waiting for the backend before calls are refused");
ABSL_FLAG(int, max_queued_keys_per_connection, 4096,
          "keys one connection may have waiting before its calls are refused");
ABSL_FLAG(int, max_batch, 64, "keys answered in one table pass");
ABSL_FLAG(int, max_wait_us, 2000, "how long the oldest waiting key may wait for a fuller batch");
ABSL_FLAG(int, max_connections, 1024,
          "open connections (TLS handshakes included); at the limit the connection idle the "
          "longest makes room, else one of the address holding the most (if it holds two more "
          "than the newcomer's), else the new one is refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int, min_idle_to_evict_ms, 1000,
          "how long a connection must have been idle to make room for a new one at the limit");
ABSL_FLAG(int, idle_timeout_s, 60, "a connection without traffic for this long is closed");
ABSL_FLAG(int, read_timeout_ms, 10000,
          "a message must arrive whole within this time from its first byte, or its connection "
          "is closed");
ABSL_FLAG(int64_t, max_buffered_bytes, int64_t{256} << 20,
          "bytes of messages being received, all connections together (each message's declared "
          "size is reserved as it starts); a message beyond it takes the room of messages "
          "arriving under 64 KiB/s, slowest first (closing their connections), or else closes "
          "its own connection");
ABSL_FLAG(int, max_calls_per_connection, 64,
          "calls of one connection waiting for an answer; more get RESOURCE_EXHAUSTED (and a "
          "connection whose calls in flight, pipelined ones included, or unread replies exceed "
          "8 x --max_message_bytes is not read until they drain)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM file: this server's certificate (chain, leaf first); with --tls-key every "
          "connection is TLS 1.2 or newer");
ABSL_FLAG(std::string, tls_key, "", "PEM file: the private key of --tls-cert (unencrypted)");
ABSL_FLAG(bool, insecure_plaintext, false,
          "serve plaintext on a non-loopback address (refused by default: an observer of the "
          "connections to both servers learns the queried rows)");
ABSL_FLAG(bool, stop_on_stdin_eof, false,
          "also stop (as on SIGTERM) when standard input reaches end of file: a launcher that "
          "holds a pipe's write end there gets the server stopped when it exits, however it dies");
ABSL_FLAG(bool, verify_table, true,
          "recompute the table's digest while loading it and refuse a mismatch (seconds per GB "
          "in the log)");
ABSL_FLAG(std::string, prgs, "aes128,chacha8,chacha12,chacha20",  // server/limits.h kDefaultPrgs
          "dpf2: the PRGs whose keys are accepted, comma-separated (siphash, the least analysed, "
          "only when listed)");
ABSL_FLAG(bool, stats_from_any, false,
          "answer the stats call (server-wide counts, queue lengths, latencies) on every "
          "connection, not only on loopback ones");
ABSL_FLAG(int, tls_handshake_timeout_ms, 10000,
          "how long a new connection may take to finish its TLS handshake");
ABSL_FLAG(std::string, metrics, "",
          "HOST:PORT (numeric, IPv6 in brackets; port 0 picks a free one) to serve Prometheus "
          "metrics on at GET /metrics (plaintext HTTP); empty: no metrics endpoint");
ABSL_FLAG(bool, metrics_from_any, false,
          "allow --metrics on a non-loopback address (refused by default: the endpoint has no "
          "TLS or authentication)");
ABSL_FLAG(std::string, config, "",
          "a file of flag=value lines (# comments and blank lines allowed) setting any of these "
          "flags; flags on the command line override it");

namespace {

constexpr char kUsage[] =
    "veil-server [--protocol=dpf2] --party=0|1 --table=FILE [--listen=HOST:PORT] "
    "[--backend=cpu|gpu|auto] [--threads=N] [--gpus=all|0,1,...] [--tls-cert=PEM_FILE "
    "--tls-key=PEM_FILE | --insecure-plaintext]\n"
    "veil-server --protocol=bfv-bag --table=FIXED_POINT_FILE [--bfv-log-n=13|14] "
    "[--max-galois-key-bytes=N] [--listen, --threads, TLS as above]\n"
    "veil-server --protocol=lwe-simple|lwe-double --table=FILE [--lwe-hint-file=PATH | "
    "--lwe-hint-cache=false] [--lwe-records-per-column=K] [--listen, --threads, TLS, limits as "
    "above]\n"
    "veil-server --protocol=lwe-exppack-s|lwe-exppack-d|lwe-hybrid|lwe-double-pack --table=FILE "
    "[--max-galois-key-bytes=N] [--lwe-records-per-column=K] "
    "[hint file, "
    "--listen, --threads, TLS, limits as above]\n"
    "\n"
    "Protocols: dpf2 is one of two non-colluding servers (the client adds their answers); bfv-bag "
    "is a single server that answers EmbeddingBag lookups whose weights it receives encrypted "
    "under the client's BFV key (it learns nothing of the bag; it needs each client's Galois "
    "keys, uploaded once per connection); lwe-simple and lwe-double are single servers of LWE "
    "PIR (SimplePIR, DoublePIR): each client downloads the table's hint once, then every lookup "
    "is an encrypted query the server cannot read (queries count as keys in the key limits); "
    "lwe-exppack-s is SimplePIR whose answers the server packs into RLWE ciphertexts, so that "
    "clients need no hint but upload 3.4 MiB of expansion keys once per connection (held within "
    "--max-galois-key-bytes; queries count in --max-queued-ciphertexts); lwe-hybrid is "
    "lwe-exppack-s whose lookups also send RGSW ciphertexts of the bits that select the packed "
    "ciphertexts holding their row, so that fewer come back; lwe-exppack-d packs DoublePIR's "
    "answers instead (one secret ciphertext and one expansion per row byte: for rows of a few "
    "bytes); lwe-double-pack folds lwe-exppack-s's packed ciphertexts with a second query and "
    "packs the result again (8 ciphertexts down whatever the table's height).\n"
    "\n"
    "Transport: with --tls-cert and --tls-key every connection is TLS (1.2 or newer; 1.3 with "
    "OpenSSL 3 clients) and clients authenticate the server by its certificate (veil tls-cert "
    "--out-dir=DIR --hosts=NAME,IP makes a self-signed one; clients trust DIR/server.pem). "
    "Without them the server speaks plaintext and listens on loopback addresses only "
    "(127.0.0.1, ::1): anyone who can read the connections to both servers adds the two DPF keys "
    "or the two answer shares and learns every queried row. --insecure-plaintext lifts that rule "
    "for networks protected otherwise (with a warning in the log).\n"
    "\n"
    "Privacy policy: dpf2 accepts AES-128 and ChaCha keys (--prgs adds siphash); stats are "
    "answered on loopback connections only (--stats-from-any). docs/privacy.md says what each "
    "protocol reveals.\n"
    "Rolling table updates (dpf2): build the new version with a larger --epoch (and the same "
    "rows, dim, format and row key: veil table build --reuse-row-key=OLD.rowkey), move it over "
    "the --table file (mv is atomic; the running server holds its own copy) and send SIGHUP. The "
    "server loads and verifies it on a background thread while the old version keeps serving, "
    "then serves both; clients move to the newest version both parties serve, and the old one is "
    "freed --epoch-grace-s seconds later. A file that fails its digest, has another shape or an "
    "epoch not newer than the served one is refused (logged) and the old version keeps serving. "
    "Roll both parties within the grace period. See docs/serving.md.\n"
    "\n"
    "Operations: --metrics=127.0.0.1:9464 serves Prometheus metrics (calls by RPC and status "
    "code, latency and batch-size histograms, queue depth, connections, the served table "
    "versions, resident memory) on loopback unless --metrics-from-any. --config=FILE reads "
    "flag=value lines, e.g. \"max_connections=256\"; flags on the command line override the "
    "file.\n"
    "\n"
    "Example: veil-server --party=0 --table=t.veil --listen=127.0.0.1:7000 "
    "--metrics=127.0.0.1:9464\n"
    "\n"
    "Flags may be spelled with dashes or underscores (--tls-cert, --tls_cert); --helpfull lists "
    "them all.";

}  // namespace

int main(int argc, char** argv) {
  veil::server::KeepFreedMemoryForReuse();
  // Before anything makes OpenSSL allocate: its freed buffers (TLS records) are then wiped.
  veil::rpc::WipeOpenSslMemoryOnFree();
  veil::tools::ParseFlags(argc, argv, kUsage);
  if (const std::string config = absl::GetFlag(FLAGS_config); !config.empty()) {
    if (absl::Status s = veil::tools::ApplyConfigFile(config); !s.ok()) {
      std::fprintf(stderr, "veil-server: --config: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  for (auto [name, value] :
       {std::pair{"max_keys_per_call", absl::GetFlag(FLAGS_max_keys_per_call)},
        std::pair{"max_queued_keys", absl::GetFlag(FLAGS_max_queued_keys)},
        std::pair{"max_queued_keys_per_connection",
                  absl::GetFlag(FLAGS_max_queued_keys_per_connection)},
        std::pair{"max_batch", absl::GetFlag(FLAGS_max_batch)},
        std::pair{"max_connections", absl::GetFlag(FLAGS_max_connections)},
        std::pair{"min_idle_to_evict_ms", absl::GetFlag(FLAGS_min_idle_to_evict_ms)},
        std::pair{"idle_timeout_s", absl::GetFlag(FLAGS_idle_timeout_s)},
        std::pair{"read_timeout_ms", absl::GetFlag(FLAGS_read_timeout_ms)},
        std::pair{"max_calls_per_connection", absl::GetFlag(FLAGS_max_calls_per_connection)},
        std::pair{"max_queued_ciphertexts", absl::GetFlag(FLAGS_max_queued_ciphertexts)},
        std::pair{"max_queued_ciphertexts_per_connection",
                  absl::GetFlag(FLAGS_max_queued_ciphertexts_per_connection)},
        std::pair{"tls_handshake_timeout_ms", absl::GetFlag(FLAGS_tls_handshake_timeout_ms)}}) {
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
  options.protocol = absl::GetFlag(FLAGS_protocol);
  options.party = absl::GetFlag(FLAGS_party);
  options.bfv_log_n = absl::GetFlag(FLAGS_bfv_log_n);
  options.table_path = absl::GetFlag(FLAGS_table);
  options.lwe_hint_cache = absl::GetFlag(FLAGS_lwe_hint_cache);
  options.lwe_hint_file = absl::GetFlag(FLAGS_lwe_hint_file);
  options.lwe_records_per_column = absl::GetFlag(FLAGS_lwe_records_per_column);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.threads = absl::GetFlag(FLAGS_threads);
  if (options.threads < 0) {
    std::fprintf(stderr, "veil-server: --threads must not be negative (0: one per core)\n");
    return 1;
  }
  if (options.threads == 0) {
    options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  options.gpus = absl::GetFlag(FLAGS_gpus);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.insecure_plaintext = absl::GetFlag(FLAGS_insecure_plaintext);
  options.verify_table = absl::GetFlag(FLAGS_verify_table);
  options.stop_on_stdin_eof = absl::GetFlag(FLAGS_stop_on_stdin_eof);
  options.stats_from_any = absl::GetFlag(FLAGS_stats_from_any);
  options.metrics = absl::GetFlag(FLAGS_metrics);
  options.metrics_from_any = absl::GetFlag(FLAGS_metrics_from_any);
  options.prgs.clear();
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_prgs), ',', absl::SkipEmpty())) {
    absl::StatusOr<veil::dpf::Prg> prg =
        veil::dpf::ParsePrg(std::string_view(name.data(), name.size()));
    if (!prg.ok()) {
      std::fprintf(stderr, "veil-server: --prgs: %s\n",
                   std::string(prg.status().message()).c_str());
      return 1;
    }
    options.prgs.push_back(*prg);
  }
  if (options.prgs.empty()) {
    std::fprintf(stderr, "veil-server: --prgs names no PRG\n");
    return 1;
  }
  options.epoch_grace = absl::Seconds(absl::GetFlag(FLAGS_epoch_grace_s));
  veil::server::ServerLimits& limits = options.limits;
  limits.max_keys_per_call = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_keys_per_call));
  limits.max_message_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_message_bytes));
  limits.max_queued_keys = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_keys));
  limits.max_queued_keys_per_connection =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_keys_per_connection));
  limits.max_batch_keys = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_batch));
  limits.max_wait = absl::Microseconds(absl::GetFlag(FLAGS_max_wait_us));
  limits.max_connections = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_connections));
  limits.min_idle_to_evict = absl::Milliseconds(absl::GetFlag(FLAGS_min_idle_to_evict_ms));
  limits.idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_idle_timeout_s));
  limits.read_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_read_timeout_ms));
  limits.max_buffered_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_buffered_bytes));
  limits.max_calls_per_connection =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_calls_per_connection));
  limits.tls_handshake_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_tls_handshake_timeout_ms));
  limits.max_queued_ciphertexts =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_ciphertexts));
  limits.max_queued_ciphertexts_per_connection =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_queued_ciphertexts_per_connection));
  limits.max_galois_key_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_max_galois_key_bytes)));
  if (absl::GetFlag(FLAGS_key_resume_s) < 0) {
    std::fprintf(stderr, "veil-server: --key_resume_s must not be negative\n");
    return 1;
  }
  limits.key_resume = absl::Seconds(absl::GetFlag(FLAGS_key_resume_s));
  absl::Status status = veil::server::RunServer(options);
  if (!status.ok()) {
    std::fprintf(stderr, "veil-server: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
