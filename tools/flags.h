// The command-line convention of every veil binary: Abseil flags, spelled with dashes or with
// underscores (--tls-cert, --tls_cert), --help listing each flag with its default.
#ifndef VEIL_TOOLS_FLAGS_H_
#define VEIL_TOOLS_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace veil::tools {

// Sets `usage` as the program's usage message and parses argv with absl::ParseCommandLine after
// turning the dashes of each "--flag-name[=value]" name (never of its value) into underscores.
// Returns the positional arguments, argv[0] first. An unknown flag or a bad value ends the
// program with absl's message (exit status 1).
std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage);

// Sets flags from a configuration file of "flag=value" lines (the flag spelled with dashes or
// underscores, with or without a leading "--"; blank lines and lines starting with # are skipped;
// spaces around the flag and the value are ignored). A flag given on the command line of the last
// ParseFlags call keeps that value: the command line overrides the file. Call it after ParseFlags.
// Returns NOT_FOUND if the file cannot be read, INVALID_ARGUMENT "PATH:LINE: ..." for a line that
// is not flag=value, names no flag of this program (Abseil's own flags and `config`, the flag
// naming the file, are not allowed), or whose value does not parse.
absl::Status ApplyConfigFile(const std::string& path);

// For a command with subcommands sharing one set of flags: returns INVALID_ARGUMENT naming the
// first flag set to a non-default value that is not among `allowed` (e.g. a `veil lookup` flag
// given to `veil tls-cert`). Abseil's own flags (--help, --flagfile, ...) always pass.
absl::Status CheckFlags(absl::Span<const absl::string_view> allowed);

}  // namespace veil::tools

#endif  // VEIL_TOOLS_FLAGS_H_
