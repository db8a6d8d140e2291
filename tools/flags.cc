#include "tools/flags.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace veil::tools {
namespace {

// The flags of the last ParseFlags' command line (they override a config file).
absl::flat_hash_set<std::string>& CommandLineFlags() {
  static auto* names = new absl::flat_hash_set<std::string>();
  return *names;
}

}  // namespace

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  absl::SetProgramUsageMessage(usage);
  // --help lists every flag of veil's own files (Abseil's default: only the main file's).
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) break;  // what follows is not flags
    if (std::strncmp(arg, "--", 2) != 0) continue;
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
    absl::string_view name = absl::string_view(arg + 2).substr(0, std::strcspn(arg + 2, "="));
    // --noflag sets the boolean flag "flag".
    if (absl::FindCommandLineFlag(name) == nullptr) absl::ConsumePrefix(&name, "no");
    CommandLineFlags().insert(std::string(name));
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  return std::vector<std::string>(positional.begin(), positional.end());
}

absl::Status ApplyConfigFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    auto error = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", why));
    };
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    const size_t equals = text.find('=');
    if (equals == absl::string_view::npos) {
      return error(absl::StrCat("expected flag=value, got \"", text, "\""));
    }
    absl::string_view key = absl::StripAsciiWhitespace(text.substr(0, equals));
    absl::ConsumePrefix(&key, "--");
    const std::string name = absl::StrReplaceAll(key, {{"-", "_"}});
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || flag->IsRetired() || absl::StrContains(flag->Filename(), "absl/") ||
        name == "config") {
      return error(absl::StrCat("unknown flag \"", key, "\" (see --help)"));
    }
    if (CommandLineFlags().contains(name)) continue;
    std::string why;
    if (!flag->ParseFrom(absl::StripAsciiWhitespace(text.substr(equals + 1)), &why)) {
      return error(absl::StrCat(key, ": ", why));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFlags(absl::Span<const absl::string_view> allowed) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->CurrentValue() == flag->DefaultValue()) continue;
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is not a flag of this command (see --help)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace veil::tools
