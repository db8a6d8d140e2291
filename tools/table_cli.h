// `veil table`: builds, inspects and verifies table files from the command line.
#ifndef VEIL_TOOLS_TABLE_CLI_H_
#define VEIL_TOOLS_TABLE_CLI_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace veil::tools {

// Runs one table command. args[0] names the command (the program, or "table" when a parent command
// dispatches here) and is only used in messages; args[1] is the subcommand:
//
//   build (--csv=FILE | --f32=FILE) --dim=D --format=fp32|fp16|int8|fixed
//         [--frac-bits=16] [--epoch=N] --out=FILE
//       --dim may be left out for CSV input (taken from the first row).
//   inspect FILE [--rows=N]
//       Header fields, the digest (not recomputed) and the first N rows (3) dequantized.
//   verify FILE
//       Validates the header and recomputes the digest.
//
// Results go to `out`, errors to `err`. Returns 0 on success, 1 if the command failed (bad input
// file, digest mismatch, write error) and 2 for a usage error.
int RunTableCli(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);

// The same on main()'s arguments, with std::cout and std::cerr.
int RunTableCli(int argc, char** argv);

}  // namespace veil::tools

#endif  // VEIL_TOOLS_TABLE_CLI_H_
