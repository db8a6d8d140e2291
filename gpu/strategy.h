// How the GPU backend expands DPF keys (the three strategies of GPU-DPF, Lam et al., ASPLOS 2024)
// and how it reads the table. Host-only: no CUDA types.
#ifndef VEIL_GPU_STRATEGY_H_
#define VEIL_GPU_STRATEGY_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace veil::gpu {

enum class Strategy : uint8_t {
  // One thread per leaf path: every leaf walks from the root. No node memory; log N times the PRG
  // work of a tree expansion.
  kBranchParallel = 0,
  // Whole tree levels in global memory, one launch per level: the fewest PRG calls, but memory
  // O(N) per key.
  kLevelByLevel = 1,
  // A block expands one subtree (a window of leaves) at a time in shared memory, keeping the path
  // from the root: memory O(window + log N) per key, tree-expansion PRG work. The default.
  kBoundedWindow = 2,
};

enum class TableDtype : uint8_t {
  kUint32 = 0,  // rows of 32-bit words, multiplied on the CUDA cores
  // Rows whose words are sign-extended INT8 values (-128..127): the device keeps one byte per word
  // and multiplies on the tensor cores through the byte-plane decomposition. Same answers.
  kInt8 = 1,
};

std::string_view StrategyName(Strategy strategy);
// "branch-parallel", "level-by-level", "bounded-window". INVALID_ARGUMENT otherwise.
absl::StatusOr<Strategy> ParseStrategy(std::string_view name);

std::string_view TableDtypeName(TableDtype dtype);
// "u32" or "int8". INVALID_ARGUMENT otherwise.
absl::StatusOr<TableDtype> ParseTableDtype(std::string_view name);

}  // namespace veil::gpu

#endif  // VEIL_GPU_STRATEGY_H_
