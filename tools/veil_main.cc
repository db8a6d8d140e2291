// `veil`: the command line of the client side.
//   veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=3,17,42 [--timeout-ms=5000]
//               [--prg=aes128] [--words] [--bags=2,1 --mode=sum|mean]
//               [--tls-certs=PEM_FILE [--tls-name0=NAME --tls-name1=NAME]] [--allow-plaintext]
//   veil table build|inspect|verify ...   (embedding/table_cli.h)
//   veil tls-cert --out-dir=DIR [--hosts=127.0.0.1,::1,localhost] [--days=365]
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/table_cli.h"
#include "mobile_client/client.h"
#include "rpc/tls.h"
#include "tools/tls_cert.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=I,J,... [--timeout-ms=5000]\n"
    "              [--prg=aes128|chacha8|chacha12|chacha20|siphash] [--words]\n"
    "              [--bags=N,M,... [--mode=sum|mean]]   (pooled, fixed-point tables)\n"
    "              [--tls-certs=PEM_FILE [--tls-name0=NAME] [--tls-name1=NAME]]\n"
    "              [--allow-plaintext]   (plaintext to a non-loopback server)\n"
    "  veil table build|inspect|verify ...\n"
    "  veil tls-cert --out-dir=DIR [--hosts=127.0.0.1,::1,localhost] [--days=365]\n"
    "              an ECDSA P-256 key (DIR/server.key, mode 0600) and a self-signed certificate\n"
    "              for those names and IP addresses (DIR/server.pem) for veil-server\n"
    "              --tls-cert/--tls-key; clients trust DIR/server.pem (--tls-certs)\n";

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T value;
    if (!absl::SimpleAtoi(item, &value)) return false;
    out->push_back(value);
  }
  return !out->empty();
}

// The "--name=value" (or "--name") arguments after the command; false after printing why not.
bool ParseFlags(int argc, char** argv, const char* command,
                std::map<std::string, std::string>* flags) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      std::cerr << "veil " << command << ": unexpected argument " << arg << "\n" << kUsage;
      return false;
    }
    size_t eq = arg.find('=');
    (*flags)[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "" : arg.substr(eq + 1);
  }
  return true;
}

// Removes and returns flag `name`'s value (`fallback` if absent).
std::string Take(std::map<std::string, std::string>& flags, const std::string& name,
                 const std::string& fallback) {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  std::string v = it->second;
  flags.erase(it);
  return v;
}

int TlsCert(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  if (!ParseFlags(argc, argv, "tls-cert", &flags)) return 2;
  const std::string dir = Take(flags, "out-dir", "");
  const std::string hosts_text = Take(flags, "hosts", "127.0.0.1,::1,localhost");
  int64_t days = 0;
  if (!absl::SimpleAtoi(Take(flags, "days", "365"), &days) || days < 1) {
    std::cerr << "veil tls-cert: --days must be a positive integer\n";
    return 2;
  }
  if (!flags.empty() || dir.empty()) {
    std::cerr << (flags.empty() ? "veil tls-cert: --out-dir is required\n"
                                : "veil tls-cert: unknown flag --" + flags.begin()->first + "\n")
              << kUsage;
    return 2;
  }
  std::vector<std::string> hosts = absl::StrSplit(hosts_text, ',', absl::SkipEmpty());
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

int Lookup(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  if (!ParseFlags(argc, argv, "lookup", &flags)) return 2;
  auto take = [&](const std::string& name, const std::string& fallback) {
    return Take(flags, name, fallback);
  };
  veil::client::ClientOptions options;
  options.server0 = take("server0", "");
  options.server1 = take("server1", "");
  std::string rows_text = take("rows", "");
  std::string bags_text = take("bags", "");
  std::string mode = take("mode", "sum");
  bool words = flags.count("words") != 0;
  take("words", "");
  options.tls_trusted_certs = take("tls-certs", "");
  options.tls_server_name0 = take("tls-name0", "");
  options.tls_server_name1 = take("tls-name1", "");
  options.allow_plaintext = flags.count("allow-plaintext") != 0;
  take("allow-plaintext", "");
  int64_t timeout_ms = 5000;
  if (!absl::SimpleAtoi(take("timeout-ms", "5000"), &timeout_ms) || timeout_ms <= 0) {
    std::cerr << "veil lookup: --timeout-ms must be a positive integer\n";
    return 2;
  }
  options.timeout = absl::Milliseconds(timeout_ms);
  auto prg = veil::dpf::ParsePrg(take("prg", "aes128"));
  if (!prg.ok()) {
    std::cerr << "veil lookup: " << prg.status().message() << "\n";
    return 2;
  }
  options.prg = *prg;
  if (!flags.empty()) {
    std::cerr << "veil lookup: unknown flag --" << flags.begin()->first << "\n" << kUsage;
    return 2;
  }
  std::vector<uint64_t> rows;
  std::vector<uint32_t> bags;
  if (options.server0.empty() || options.server1.empty() || !ParseList(rows_text, &rows) ||
      (!bags_text.empty() && !ParseList(bags_text, &bags)) || (mode != "sum" && mode != "mean")) {
    std::cerr << kUsage;
    return 2;
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
        rows, bags, {}, mode == "sum" ? veil::client::PoolingMode::kSum : veil::client::PoolingMode::kMean);
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
    for (size_t i = 0; i < rows.size(); ++i) {
      std::string line = absl::StrCat("row ", rows[i], ":");
      for (size_t j = 0; j < per_row; ++j) {
        absl::StrAppend(&line, " ", absl::Hex((*result)[i * per_row + j], absl::kZeroPad8));
      }
      lines.push_back(line);
    }
  } else {
    auto result = (*client)->Lookup(rows);
    if (!result.ok()) {
      std::cerr << "veil lookup: " << result.status() << "\n";
      return 1;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      std::string line = absl::StrCat("row ", rows[i], ":");
      for (size_t j = 0; j < per_row; ++j) absl::StrAppend(&line, " ", (*result)[i * per_row + j]);
      lines.push_back(line);
    }
  }
  for (const std::string& line : lines) std::cout << line << "\n";
  veil::client::CallStats s = (*client)->last_call();
  std::cerr << s.lookups << " lookup(s) in " << s.latency_ms << " ms; sent " << s.bytes_up
            << " B, received " << s.bytes_down << " B (both servers)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "lookup") return Lookup(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "tls-cert") return TlsCert(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "table") {
    return veil::tools::RunTableCli(argc - 1, argv + 1);
  }
  std::cerr << kUsage;
  return 2;
}
