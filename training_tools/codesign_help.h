// veil-codesign's help: the commands, each with what it does and one example, and a command's
// flags in groups with their defaults (`veil-codesign --help`, `veil-codesign help sweep`,
// `veil-codesign sweep --help`).
#ifndef VEIL_TRAINING_TOOLS_CODESIGN_HELP_H_
#define VEIL_TRAINING_TOOLS_CODESIGN_HELP_H_

#include <string>

namespace veil::training {

// The help for `command`, or the overview when it is empty; empty for an unknown command.
std::string CodesignHelp(const std::string& command);

// The one-line usage.
std::string CodesignUsage();

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_CODESIGN_HELP_H_
