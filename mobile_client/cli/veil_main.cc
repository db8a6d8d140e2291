// `veil`: the command line of the client side.
//   veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=3,17,42 [--timeout-ms=5000]
//               [--prg=aes128] [--words] [--bags=2,1 --mode=sum|mean]
//   veil table build|inspect|verify ...   (embedding/table_cli.h)
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "embedding/table_cli.h"
#include "mobile_client/client.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  veil lookup --server0=HOST:PORT --server1=HOST:PORT --rows=I,J,... [--timeout-ms=5000]\n"
    "              [--prg=aes128|chacha8|chacha12|chacha20|siphash] [--words]\n"
    "              [--bags=N,M,... [--mode=sum|mean]]   (pooled, fixed-point tables)\n"
    "  veil table build|inspect|verify ...\n";

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T value;
    if (!absl::SimpleAtoi(item, &value)) return false;
    out->push_back(value);
  }
  return !out->empty();
}

int Lookup(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      std::cerr << "veil lookup: unexpected argument " << arg << "\n" << kUsage;
      return 2;
    }
    size_t eq = arg.find('=');
    flags[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "" : arg.substr(eq + 1);
  }
  auto take = [&](const std::string& name, const std::string& fallback) {
    auto it = flags.find(name);
    if (it == flags.end()) return fallback;
    std::string v = it->second;
    flags.erase(it);
    return v;
  };
  veil::ClientOptions options;
  options.server0 = take("server0", "");
  options.server1 = take("server1", "");
  std::string rows_text = take("rows", "");
  std::string bags_text = take("bags", "");
  std::string mode = take("mode", "sum");
  bool words = flags.count("words") != 0;
  take("words", "");
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

  auto client = veil::Client::Connect(options);
  if (!client.ok()) {
    std::cerr << "veil lookup: " << client.status() << "\n";
    return 1;
  }
  const veil::TableInfo& t = (*client)->table();
  std::cerr << "table: " << t.rows << " rows, " << veil::embedding::RowFormatName(t.format)
            << " dim " << t.dim << ", epoch " << t.epoch << ", digest "
            << t.digest_hex.substr(0, 16) << "...\n";

  size_t per_row = words ? t.row_words : t.dim;
  std::vector<std::string> lines;
  if (!bags.empty()) {
    auto pooled = (*client)->LookupPooled(
        rows, bags, {}, mode == "sum" ? veil::PoolingMode::kSum : veil::PoolingMode::kMean);
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
  veil::CallStats s = (*client)->last_call();
  std::cerr << s.lookups << " lookup(s) in " << s.latency_ms << " ms; sent " << s.bytes_up
            << " B, received " << s.bytes_down << " B (both servers)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "lookup") return Lookup(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "table") {
    return veil::embedding::RunTableCli(argc - 1, argv + 1);
  }
  std::cerr << kUsage;
  return 2;
}
