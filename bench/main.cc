// veil-bench SUITE [--flag=value ...]: one JSON object per result line on stdout (BENCHMARKS.md).
// Flags: bench/flags.cc.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/types/optional.h"
#include "bench/suite.h"
#include "tools/flags.h"

namespace veil::bench {
void SetJsonOut(const std::string& path);

struct Suite {
  const char* help;
  SuiteFn fn;
};

std::map<std::string, Suite>& Registry() {
  static std::map<std::string, Suite> registry;
  return registry;
}

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

namespace {

// The flags of bench/flags.cc that were given, by their dashed names ("log-domain").
std::map<std::string, std::string> GivenFlags() {
  std::map<std::string, std::string> values;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::EndsWith(flag->Filename(), "bench/flags.cc")) continue;
    absl::optional<absl::optional<std::string>> value = flag->TryGet<absl::optional<std::string>>();
    if (value && *value) values[absl::StrReplaceAll(name, {{"_", "-"}})] = **value;
  }
  return values;
}

std::string Usage() {
  std::string usage =
      "veil-bench SUITE [--flag=value ...] [--json-out=FILE]: one JSON object per result line on "
      "stdout (BENCHMARKS.md), progress on stderr.\n\nsuites:\n";
  for (const auto& [name, suite] : veil::bench::Registry()) {
    absl::StrAppend(&usage, "  ", name, "\n      ", suite.help, "\n");
  }
  absl::StrAppend(&usage,
                  "\nexample:\n  veil-bench pir-answer --rows=1048576 --words=16 --batch=32 "
                  "--prg=aes128 --threads=2");
  return usage;
}

}  // namespace

int main(int argc, char** argv) {
  using veil::bench::Registry;
  const std::string usage = Usage();
  const std::vector<std::string> args = veil::tools::ParseFlags(argc, argv, usage);
  if (args.size() != 2 || args[1] == "help") {
    std::cerr << usage << "\n";
    return args.size() == 2 ? 0 : 2;
  }
  auto it = Registry().find(args[1]);
  if (it == Registry().end()) {
    std::cerr << "veil-bench: unknown suite '" << args[1] << "' (veil-bench --help lists them)\n";
    return 2;
  }
  std::map<std::string, std::string> values = GivenFlags();
  if (values.count("json-out")) veil::bench::SetJsonOut(values["json-out"]);
  veil::bench::Flags flags(values);
  absl::Status status = it->second.fn(flags);
  if (!status.ok()) {
    std::cerr << "veil-bench " << args[1] << ": " << status << "\n";
    return 1;
  }
  for (const std::string& name : flags.Unused()) {
    std::cerr << "veil-bench " << args[1] << ": flag --" << name << " was not used\n";
    return 2;
  }
  return 0;
}
