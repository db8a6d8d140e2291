#include "tools/flags.h"

#include <algorithm>
#include <cstring>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace veil::tools {

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
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  return std::vector<std::string>(positional.begin(), positional.end());
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
