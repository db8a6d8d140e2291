// veil-bench SUITE [--flag=value ...]: one JSON object per result line on stdout (BENCHMARKS.md).
#include <cstring>
#include <iostream>
#include <map>

#include "bench/suite.h"

namespace veil::bench {
void SetJsonOut(const std::string& path);

namespace {
struct Suite {
  const char* help;
  SuiteFn fn;
};
std::map<std::string, Suite>& Registry() {
  static std::map<std::string, Suite> registry;
  return registry;
}
}  // namespace

SuiteRegistration::SuiteRegistration(const char* name, const char* help, SuiteFn fn) {
  Registry()[name] = {help, std::move(fn)};
}

absl::Status RunSuite(const std::string& name, const Flags& flags) {
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    return absl::NotFoundError("suite " + name + " is not in this build (it needs CUDA)");
  }
  return it->second.fn(flags);
}

}  // namespace veil::bench

int main(int argc, char** argv) {
  using veil::bench::Registry;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    std::cerr << "usage: veil-bench SUITE [--flag=value ...] [--json-out=FILE]\n\nsuites:\n";
    for (const auto& [name, suite] : Registry()) {
      std::cerr << "  " << name << "\n      " << suite.help << "\n";
    }
    return argc < 2 ? 2 : 0;
  }
  auto it = Registry().find(argv[1]);
  if (it == Registry().end()) {
    std::cerr << "veil-bench: unknown suite '" << argv[1] << "' (veil-bench --help lists them)\n";
    return 2;
  }
  std::map<std::string, std::string> values;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help") {
      std::cerr << argv[1] << ": " << it->second.help << "\n";
      return 0;
    }
    if (arg.rfind("--", 0) != 0) {
      std::cerr << "veil-bench: expected --flag=value, got '" << arg << "'\n";
      return 2;
    }
    size_t eq = arg.find('=');
    values[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : arg.substr(eq + 1);
  }
  if (values.count("json-out")) veil::bench::SetJsonOut(values["json-out"]);
  veil::bench::Flags flags(values);
  absl::Status status = it->second.fn(flags);
  if (!status.ok()) {
    std::cerr << "veil-bench " << argv[1] << ": " << status << "\n";
    return 1;
  }
  for (const std::string& name : flags.Unused()) {
    std::cerr << "veil-bench " << argv[1] << ": flag --" << name << " was not used\n";
    return 2;
  }
  return 0;
}
