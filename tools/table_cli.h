// `veil table`: builds, inspects and verifies table files from the command line. Its flags
// (--csv, --f32, --dim, --format, --frac-bits, --epoch, --out, --rows) are the `veil` command's
// Abseil flags (tools/veil_flags.h).
#ifndef VEIL_TOOLS_TABLE_CLI_H_
#define VEIL_TOOLS_TABLE_CLI_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace veil::tools {

// The usage text of `veil table`.
extern const char kTableUsage[];

// Runs one table command: args[0] is the subcommand (build, inspect, verify), the rest its
// operands; the flags are read from the parsed command line. Results go to `out`, errors to
// `err`. Returns 0 on success, 1 if the command failed (bad input file, digest mismatch, write
// error) and 2 for a usage error.
int RunTableCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace veil::tools

#endif  // VEIL_TOOLS_TABLE_CLI_H_
