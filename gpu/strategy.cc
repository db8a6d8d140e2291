#include "gpu/strategy.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace veil::gpu {

std::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kBranchParallel:
      return "branch-parallel";
    case Strategy::kLevelByLevel:
      return "level-by-level";
    case Strategy::kBoundedWindow:
      return "bounded-window";
  }
  return "unknown";
}

absl::StatusOr<Strategy> ParseStrategy(std::string_view name) {
  for (Strategy s :
       {Strategy::kBranchParallel, Strategy::kLevelByLevel, Strategy::kBoundedWindow}) {
    if (name == StrategyName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown strategy '", std::string(name),
                   "' (branch-parallel, level-by-level, bounded-window)"));
}

std::string_view TableDtypeName(TableDtype dtype) {
  return dtype == TableDtype::kInt8 ? "int8" : "u32";
}

absl::StatusOr<TableDtype> ParseTableDtype(std::string_view name) {
  if (name == "u32" || name == "uint32") return TableDtype::kUint32;
  if (name == "int8") return TableDtype::kInt8;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown table dtype '", std::string(name), "' (u32, int8)"));
}

}  // namespace veil::gpu
