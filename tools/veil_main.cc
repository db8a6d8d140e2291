// `veil`: the command line of the client side and of table and certificate housekeeping.
//   veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=3,17,42 [...]
//   veil lookup --protocol=lwe-simple|lwe-double|lwe-exppack-s|lwe-exppack-d|lwe-hybrid|
//               lwe-double-pack --server=HOST:PORT --rows=3,17 [...]
//   veil lookup --protocol=bfv-bag --server=HOST:PORT --rows=3,17 [--bags=1,1 --weights=2,-1]
//   veil table build|inspect|verify ...   (tools/table_cli.h)
//   veil tls-cert --out-dir=DIR [--hosts=127.0.0.1,::1,localhost] [--days=365]
// Flags: tools/veil_flags.h; each subcommand refuses the others' flags.
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "mobile_client/lwe_client.h"
#include "rpc/tls.h"
#include "tools/flags.h"
#include "tools/table_cli.h"
#include "tools/tls_cert.h"
#include "tools/veil_flags.h"

namespace {

constexpr char kUsage[] =
    "veil lookup | table | tls-cert: private lookups, table files and TLS certificates.\n"
    "\n"
    "usage:\n"
    "  veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=I,J,... [--timeout-ms=5000]\n"
    "              [--prg=aes128|chacha8|chacha12|chacha20|siphash] [--words]\n"
    "              [--bags=N,M,... [--mode=sum|mean] [--weights=W,...]]   (pooled, fixed-point)\n"
    "              [--tls-certs=PEM_FILE [--tls-name0=NAME] [--tls-name1=NAME]]\n"
    "              [--allow-plaintext]   (plaintext to a non-loopback server)\n"
    "              [--row-key=TABLE.rowkey]   (check every row's authentication tag)\n"
    "              [--min-epoch=E]   (refuse table versions older than E)\n"
    "              [--failure-latch=FILE]   (a failed check writes FILE; no lookups while it "
    "exists)\n"
    "      Fetches rows privately from two veil-server parties and prints them. Each of\n"
    "      --server0/--server1 may list replicas of its party, HOST:PORT,HOST:PORT,...: they must\n"
    "      serve the same table; a failed call is sent again to another replica and a slow one\n"
    "      (slower than the 95th percentile of recent replies) is hedged on another replica.\n"
    "  veil lookup --protocol=lwe-simple|lwe-double|lwe-exppack-s|lwe-exppack-d|lwe-hybrid|"
    "lwe-double-pack "
    "--server=HOST:PORT --rows=I,J,... [--words]\n"
    "              [--hint-cache=DIR] [--timeout-ms=5000] [--tls-certs=PEM_FILE "
    "[--tls-name0=NAME]]\n"
    "              [--allow-plaintext] [--row-key=TABLE.rowkey] [--min-epoch=E]\n"
    "              [--failure-latch=FILE]\n"
    "      Fetches rows privately from ONE LWE PIR server (SimplePIR or DoublePIR): the table's "
    "hint\n"
    "      is downloaded first (or read from --hint-cache, where it is kept per table version).\n"
    "      lwe-exppack-s needs no hint: the client uploads its expansion keys (3.4 MiB) first;\n"
    "      lwe-hybrid too, and each row also sends RGSW bits that select its packed ciphertexts;\n"
    "      lwe-exppack-d (DoublePIR, packed) too, one secret ciphertext per row byte;\n"
    "      lwe-double-pack too, its packed answer folded and packed again (8 ciphertexts down).\n"
    "  veil lookup --protocol=bfv-bag --server=HOST:PORT --rows=I,J,... [--bags=N,M,...\n"
    "              [--mode=sum|mean] [--weights=W,...]] [--words] [--timeout-ms=30000]\n"
    "              [--tls-certs=PEM_FILE [--tls-name0=NAME]] [--allow-plaintext]\n"
    "              [--row-key=TABLE.rowkey] [--min-epoch=E] [--failure-latch=FILE]\n"
    "      Pooled lookups from ONE server with BFV homomorphic encryption (fixed-point tables):\n"
    "      the server sums each bag under encryption and learns neither its rows nor its weights.\n"
    "      Without --bags each row is a bag of its own. Connecting uploads the session's Galois\n"
    "      keys (megabytes); each bag sends one query (~142 KiB per 8192 rows). --words prints\n"
    "      the exact fixed-point sums. With --row-key every sum is checked against its tag.\n"
    "  veil table build|inspect|verify ...   (veil table for its usage)\n"
    "  veil tls-cert --out-dir=DIR [--hosts=127.0.0.1,::1,localhost] [--days=365]\n"
    "      An ECDSA P-256 key (DIR/server.key, mode 0600) and a self-signed certificate for those\n"
    "      names and IP addresses (DIR/server.pem) for veil-server --tls-cert/--tls-key; clients\n"
    "      trust DIR/server.pem (--tls-certs).\n"
    "\n"
    "example:\n"
    "  veil lookup --server0=127.0.0.1:4000 --server1=127.0.0.1:4001 --rows=3,17\n"
    "  veil lookup --server0=127.0.0.1:4000,127.0.0.1:4002 --server1=127.0.0.1:4001 --rows=3\n"
    "  veil lookup --protocol=lwe-simple --server=127.0.0.1:4002 --rows=3,17 --hint-cache=hints\n"
    "  veil lookup --protocol=bfv-bag --server=127.0.0.1:4003 --rows=3,17,42 --bags=2,1\n"
    "\n"
    "Flags may be spelled with dashes or underscores; --helpfull lists them all.";

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T value;
    if (!absl::SimpleAtoi(item, &value)) return false;
    out->push_back(value);
  }
  return !out->empty();
}

// --timeout-ms, or `default_ms` where it is 0 (unset); INVALID_ARGUMENT if negative.
absl::StatusOr<absl::Duration> Timeout(int64_t default_ms) {
  const int64_t ms = absl::GetFlag(FLAGS_timeout_ms);
  if (ms < 0) return absl::InvalidArgumentError("--timeout-ms must be a positive integer");
  return absl::Milliseconds(ms == 0 ? default_ms : ms);
}

// --bags, --mode and --weights of a lookup of `rows` rows into `bags` (empty without --bags) and
// `weights` (none, or one per row with --bags). The usage error, or "" if they are good.
template <typename T>
std::string ParseBags(size_t rows, std::vector<uint32_t>* bags, std::vector<T>* weights) {
  const std::string bags_text = absl::GetFlag(FLAGS_bags);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if ((!bags_text.empty() && !ParseList(bags_text, bags)) || (mode != "sum" && mode != "mean")) {
    return "--bags must list bag sizes and --mode be sum or mean";
  }
  const std::string weights_text = absl::GetFlag(FLAGS_weights);
  if (!weights_text.empty() &&
      (bags->empty() || !ParseList(weights_text, weights) || weights->size() != rows)) {
    return "--weights must give one integer per row of --rows, with --bags";
  }
  return "";
}

// The flags every single-server client takes (--server, TLS, --row-key, --min-epoch,
// --failure-latch, and --timeout-ms, `default_ms` where unset); the usage error, or "".
template <typename Options>
std::string SingleServerOptions(int64_t default_ms, Options& options) {
  options.server = absl::GetFlag(FLAGS_server);
  options.tls_trusted_certs = absl::GetFlag(FLAGS_tls_certs);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_name0);
  options.allow_plaintext = absl::GetFlag(FLAGS_allow_plaintext);
  options.row_key_file = absl::GetFlag(FLAGS_row_key);
  options.min_epoch = absl::GetFlag(FLAGS_min_epoch);
  options.failure_latch_file = absl::GetFlag(FLAGS_failure_latch);
  absl::StatusOr<absl::Duration> timeout = Timeout(default_ms);
  if (!timeout.ok()) return std::string(timeout.status().message());
  options.timeout = *timeout;
  return "";
}

// "row I: v0 v1 ..." per fetched row: words as hex, values as decimals.
template <typename T>
std::vector<std::string> RowLines(const std::vector<uint64_t>& rows, const std::vector<T>& values,
                                  size_t per_row) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line = absl::StrCat("row ", rows[i], ":");
    for (size_t j = 0; j < per_row; ++j) {
      if constexpr (std::is_same_v<T, uint32_t>) {
        absl::StrAppend(&line, " ", absl::Hex(values[i * per_row + j], absl::kZeroPad8));
      } else {
        absl::StrAppend(&line, " ", values[i * per_row + j]);
      }
    }
    lines.push_back(line);
  }
  return lines;
}

int UsageError(const std::string& command, const std::string& message) {
  std::cerr << "veil " << command << ": " << message << "\n\n" << kUsage << "\n";
  return 2;
}

int TlsCert() {
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  const int64_t days = absl::GetFlag(FLAGS_days);
  if (dir.empty()) return UsageError("tls-cert", "--out-dir is required");
  if (days < 1) return UsageError("tls-cert", "--days must be a positive integer");
  std::vector<std::string> hosts =
      absl::StrSplit(absl::GetFlag(FLAGS_hosts), ',', absl::SkipEmpty());
  auto files = veil::tools::WriteSelfSignedCertificate(dir, hosts, absl::Hours(24 * days));
  if (!files.ok()) {
    std::cerr << "veil tls-cert: " << files.status() << "\n";
    return 1;
  }
  std::cout << "certificate " << files->cert_path << " (self-signed, ECDSA P-256, " << days
            << " days) for " << absl::StrJoin(hosts, ", ") << "\nprivate key " << files->key_path
            << " (mode 0600)\n\nservers: veil-server ... --tls-cert=" << files->cert_path
            << " --tls-key=" << files->key_path
            << "\nclients: veil lookup ... --tls-certs=" << files->cert_path
            << "  (veil::client::ClientOptions::tls_trusted_certs)\n";
  return 0;
}

int Lookup() {
  veil::client::ClientOptions options;
  options.server0 = absl::GetFlag(FLAGS_server0);
  options.server1 = absl::GetFlag(FLAGS_server1);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const bool words = absl::GetFlag(FLAGS_words);
  options.tls_trusted_certs = absl::GetFlag(FLAGS_tls_certs);
  options.tls_server_name0 = absl::GetFlag(FLAGS_tls_name0);
  options.tls_server_name1 = absl::GetFlag(FLAGS_tls_name1);
  options.allow_plaintext = absl::GetFlag(FLAGS_allow_plaintext);
  options.row_key_file = absl::GetFlag(FLAGS_row_key);
  options.min_epoch = absl::GetFlag(FLAGS_min_epoch);
  options.failure_latch_file = absl::GetFlag(FLAGS_failure_latch);
  absl::StatusOr<absl::Duration> timeout = Timeout(5000);
  if (!timeout.ok()) return UsageError("lookup", std::string(timeout.status().message()));
  options.timeout = *timeout;
  auto prg = veil::dpf::ParsePrg(absl::GetFlag(FLAGS_prg));
  if (!prg.ok()) return UsageError("lookup", std::string(prg.status().message()));
  options.prg = *prg;
  std::vector<uint64_t> rows;
  std::vector<uint32_t> bags;
  if (options.server0.empty() || options.server1.empty()) {
    return UsageError("lookup", "--server0 and --server1 are required");
  }
  if (!ParseList(absl::GetFlag(FLAGS_rows), &rows)) {
    return UsageError("lookup", "--rows must list the rows to fetch (I,J,...)");
  }
  std::vector<int32_t> weights;
  if (const std::string error = ParseBags(rows.size(), &bags, &weights); !error.empty()) {
    return UsageError("lookup", error);
  }

  auto client = veil::client::Client::Connect(options);
  if (!client.ok()) {
    std::cerr << "veil lookup: " << client.status() << "\n";
    return 1;
  }
  const veil::client::TableInfo& t = (*client)->table();
  std::cerr << "table: " << t.rows << " rows, " << veil::embedding::RowFormatName(t.format)
            << " dim " << t.dim << ", epoch " << t.epoch << ", digest "
            << t.digest_hex.substr(0, 16) << "...\n";

  size_t per_row = words ? t.row_words : t.dim;
  std::vector<std::string> lines;
  if (!bags.empty()) {
    auto pooled = (*client)->LookupPooled(
        rows, bags, weights,
        mode == "sum" ? veil::client::PoolingMode::kSum : veil::client::PoolingMode::kMean);
    if (!pooled.ok()) {
      std::cerr << "veil lookup: " << pooled.status() << "\n";
      return 1;
    }
    for (size_t b = 0; b < bags.size(); ++b) {
      std::string line = absl::StrCat("bag ", b, ":");
      for (uint32_t j = 0; j < t.dim; ++j) absl::StrAppend(&line, " ", (*pooled)[b * t.dim + j]);
      lines.push_back(line);
    }
  } else if (words) {
    auto result = (*client)->LookupWords(rows);
    if (!result.ok()) {
      std::cerr << "veil lookup: " << result.status() << "\n";
      return 1;
    }
    lines = RowLines(rows, *result, per_row);
  } else {
    auto result = (*client)->Lookup(rows);
    if (!result.ok()) {
      std::cerr << "veil lookup: " << result.status() << "\n";
      return 1;
    }
    lines = RowLines(rows, *result, per_row);
  }
  for (const std::string& line : lines) std::cout << line << "\n";
  veil::client::CallStats s = (*client)->last_call();
  std::cerr << s.lookups << " lookup(s) in " << s.latency_ms << " ms; sent " << s.bytes_up
            << " B, received " << s.bytes_down << " B (both servers)";
  if (s.failovers != 0 || s.hedges != 0) {
    std::cerr << "; " << s.failovers << " call(s) failed over and " << s.hedges
              << " hedged to another replica";
  }
  std::cerr << "\n";
  return 0;
}

// veil lookup --protocol=lwe-simple|lwe-double|lwe-exppack-s|lwe-exppack-d|lwe-hybrid|
// lwe-double-pack: one LWE PIR server.
int LookupLwe(const std::string& protocol) {
  veil::client::LweClientOptions options;
  options.protocol = protocol;
  options.hint_cache_dir = absl::GetFlag(FLAGS_hint_cache);
  const bool words = absl::GetFlag(FLAGS_words);
  // The timeout bounds connecting, each wave of hint chunks (8 MiB) and the lookup.
  if (const std::string error = SingleServerOptions(5000, options); !error.empty()) {
    return UsageError("lookup", error);
  }
  if (options.server.empty()) return UsageError("lookup", "--server is required for " + protocol);
  std::vector<uint64_t> rows;
  if (!ParseList(absl::GetFlag(FLAGS_rows), &rows)) {
    return UsageError("lookup", "--rows must list the rows to fetch (I,J,...)");
  }
  auto client = veil::client::LweClient::Connect(options);
  if (!client.ok()) {
    std::cerr << "veil lookup: " << client.status() << "\n";
    return 1;
  }
  const veil::client::LweTableInfo& t = (*client)->table();
  std::cerr << "table: " << t.rows << " rows, " << veil::embedding::RowFormatName(t.format)
            << " dim " << t.dim << ", epoch " << t.epoch << ", digest "
            << t.digest_hex.substr(0, 16) << "...; " << protocol << " " << t.d1 << " x " << t.d0
            << " database, "
            << (t.key_bytes != 0 ? absl::StrCat("expansion keys ", t.key_bytes, " B (uploaded)")
                                 : absl::StrCat("hint ", t.hint_bytes, " B ",
                                                (*client)->hint_from_cache() ? "(from the cache)"
                                                                             : "(downloaded)"))
            << "\n";
  std::vector<std::string> lines;
  if (words) {
    auto result = (*client)->LookupWords(rows);
    if (!result.ok()) {
      std::cerr << "veil lookup: " << result.status() << "\n";
      return 1;
    }
    lines = RowLines(rows, *result, t.row_words);
  } else {
    auto result = (*client)->Lookup(rows);
    if (!result.ok()) {
      std::cerr << "veil lookup: " << result.status() << "\n";
      return 1;
    }
    lines = RowLines(rows, *result, t.dim);
  }
  for (const std::string& line : lines) std::cout << line << "\n";
  const veil::client::CallStats s = (*client)->last_call();
  std::cerr << s.lookups << " lookup(s) in " << s.latency_ms << " ms; sent " << s.bytes_up
            << " B, received " << s.bytes_down << " B (one server)\n";
  return 0;
}

// veil lookup --protocol=bfv-bag: pooled lookups from one BFV server.
int LookupBag() {
  veil::client::BagClientOptions options;
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const bool words = absl::GetFlag(FLAGS_words);
  // Connecting makes and uploads megabytes of keys: 30 s unless --timeout-ms says otherwise.
  if (const std::string error = SingleServerOptions(30000, options); !error.empty()) {
    return UsageError("lookup", error);
  }
  if (options.server.empty()) return UsageError("lookup", "--server is required for bfv-bag");
  std::vector<uint64_t> rows;
  if (!ParseList(absl::GetFlag(FLAGS_rows), &rows)) {
    return UsageError("lookup", "--rows must list the rows to fetch (I,J,...)");
  }
  std::vector<uint32_t> bags;
  std::vector<int64_t> weights;
  if (const std::string error = ParseBags(rows.size(), &bags, &weights); !error.empty()) {
    return UsageError("lookup", error);
  }
  // Without --bags every row is a bag of its own.
  const bool pooled = !bags.empty();
  if (!pooled) bags.assign(rows.size(), 1);
  if (words && mode != "sum") {
    return UsageError("lookup", "--words prints the exact sums: it takes no --mode=mean");
  }

  auto client = veil::client::BagClient::Connect(options);
  if (!client.ok()) {
    std::cerr << "veil lookup: " << client.status() << "\n";
    return 1;
  }
  const veil::client::BagTableInfo& t = (*client)->table();
  std::cerr << "table: " << t.rows << " rows, fixed dim " << t.dim << " (" << t.frac_bits
            << " fractional bits), epoch " << t.epoch << ", digest " << t.digest_hex.substr(0, 16)
            << "..." << (t.row_tag == veil::embedding::RowTag::kNone ? "" : ", sums checked")
            << "; bfv-bag N = " << (1u << t.log_n) << ", " << t.query_blocks
            << " ciphertext(s) per query, Galois keys " << t.galois_key_bytes << " B (uploaded)\n";
  // "bag B: ..." or "row I: ..." per bag, the values or the exact sums as decimals.
  const auto print = [&](const auto& values) {
    for (size_t b = 0; b < bags.size(); ++b) {
      std::string line = pooled ? absl::StrCat("bag ", b, ":") : absl::StrCat("row ", rows[b], ":");
      for (uint32_t j = 0; j < t.dim; ++j) absl::StrAppend(&line, " ", values[b * t.dim + j]);
      std::cout << line << "\n";
    }
  };
  absl::Status status;
  if (words) {
    auto sums = (*client)->LookupPooledSums(rows, bags, weights);
    status = sums.status();
    if (sums.ok()) print(*sums);
  } else {
    auto values = (*client)->LookupPooled(
        rows, bags, weights,
        mode == "sum" ? veil::client::PoolingMode::kSum : veil::client::PoolingMode::kMean);
    status = values.status();
    if (values.ok()) print(*values);
  }
  if (!status.ok()) {
    std::cerr << "veil lookup: " << status << "\n";
    return 1;
  }
  const veil::client::CallStats s = (*client)->last_call();
  std::cerr << s.lookups << " bag(s) in " << s.latency_ms << " ms; sent " << s.bytes_up
            << " B, received " << s.bytes_down << " B (one server)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything makes OpenSSL allocate: its freed buffers (TLS records) are then wiped.
  veil::rpc::WipeOpenSslMemoryOnFree();
  const std::vector<std::string> args = veil::tools::ParseFlags(argc, argv, kUsage);
  const std::string command = args.size() >= 2 ? args[1] : "";
  const std::vector<std::string> operands(args.begin() + std::min<size_t>(2, args.size()),
                                          args.end());
  absl::Status flags = absl::OkStatus();
  if (command == "lookup" && absl::GetFlag(FLAGS_protocol) == "dpf2") {
    flags = veil::tools::CheckFlags({"protocol", "server0", "server1", "rows", "bags", "mode",
                                     "weights", "words", "tls_certs", "tls_name0", "tls_name1",
                                     "allow_plaintext", "timeout_ms", "prg", "row_key", "min_epoch",
                                     "failure_latch"});
    if (flags.ok() && !operands.empty()) return UsageError(command, "unexpected " + operands[0]);
    if (flags.ok()) return Lookup();
  } else if (command == "lookup" && absl::GetFlag(FLAGS_protocol) == "bfv-bag") {
    flags = veil::tools::CheckFlags({"protocol", "server", "rows", "bags", "mode", "weights",
                                     "words", "tls_certs", "tls_name0", "allow_plaintext",
                                     "timeout_ms", "row_key", "min_epoch", "failure_latch"});
    if (flags.ok() && !operands.empty()) return UsageError(command, "unexpected " + operands[0]);
    if (flags.ok()) return LookupBag();
  } else if (command == "lookup") {
    const std::string protocol = absl::GetFlag(FLAGS_protocol);
    if (protocol != "lwe-simple" && protocol != "lwe-double" && protocol != "lwe-exppack-s" &&
        protocol != "lwe-exppack-d" && protocol != "lwe-hybrid" && protocol != "lwe-double-pack") {
      return UsageError(command,
                        "--protocol must be dpf2, bfv-bag, lwe-simple, lwe-double, "
                        "lwe-exppack-s, lwe-exppack-d, lwe-hybrid or lwe-double-pack");
    }
    flags = veil::tools::CheckFlags({"protocol", "server", "rows", "words", "tls_certs",
                                     "tls_name0", "allow_plaintext", "timeout_ms", "row_key",
                                     "hint_cache", "min_epoch", "failure_latch"});
    if (flags.ok() && !operands.empty()) return UsageError(command, "unexpected " + operands[0]);
    if (flags.ok()) return LookupLwe(protocol);
  } else if (command == "tls-cert") {
    flags = veil::tools::CheckFlags({"out_dir", "hosts", "days"});
    if (flags.ok() && !operands.empty()) return UsageError(command, "unexpected " + operands[0]);
    if (flags.ok()) return TlsCert();
  } else if (command == "table") {
    flags =
        veil::tools::CheckFlags({"csv", "f32", "dim", "format", "frac_bits", "epoch", "out", "rows",
                                 "row_tags", "row_tag_kind", "row_key", "reuse_row_key"});
    if (flags.ok()) return veil::tools::RunTableCommand(operands, std::cout, std::cerr);
  } else {
    std::cerr << kUsage << "\n";
    return 2;
  }
  return UsageError(command, std::string(flags.message()));
}
