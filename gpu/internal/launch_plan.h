// Host-side planning shared by the CUDA backend and the host-run simulation: packs keys, groups
// them by tree geometry, chooses keys per block and fills LaunchArgs. No CUDA.
#ifndef VEIL_GPU_INTERNAL_LAUNCH_PLAN_H_
#define VEIL_GPU_INTERNAL_LAUNCH_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "gpu/internal/device_key.h"
#include "gpu/internal/phases.h"
#include "gpu/strategy.h"

namespace veil::gpu::internal {

// Flattens a key. Returns INVALID_ARGUMENT if it has more levels than PackedKey holds.
absl::StatusOr<PackedKey> PackKey(const dpf::DpfKey& key);

// Keys of one launch: same geometry. `index` maps back to the caller's key order.
struct KeyGroup {
  Geometry geo;
  std::vector<PackedKey> keys;
  std::vector<int> index;
};

// Splits keys by (output type, leaf layout). Every key must fit `rows` (checked by the caller).
std::vector<KeyGroup> GroupKeys(absl::Span<const PackedKey> keys, uint64_t rows);

Body BodyFor(Strategy strategy);

// How the table is multiplied for a group: INT8 tables use the tensor cores for additive keys
// and the CUDA cores (sign-extended bytes) for XOR keys.
TableKind KindFor(TableDtype dtype, const Geometry& geo);

// Largest K <= max_keys (and <= kMaxKeysPerBlock) whose shared memory fits `shared_limit` bytes.
// Returns RESOURCE_EXHAUSTED if not even one key fits (rows too wide for this path).
absl::StatusOr<int> ChooseKeysPerBlock(const Geometry& geo, uint32_t row_words, Body body,
                                       TableKind kind, int max_keys, uint32_t shared_limit);

// Converts sign-extended INT8 words to bytes. Returns INVALID_ARGUMENT naming the first word
// outside -128..127.
absl::StatusOr<std::vector<int8_t>> NarrowToInt8(const dpf::TableView& table);

// A row split (several GPUs) cuts the table at multiples of this many rows: every geometry's
// rows_per_tile() divides it, so a whole-table slice is a whole number of tiles for every key
// (a row range's slices need not be: its first and last tiles may be partial).
inline constexpr uint64_t kSliceAlignRows = uint64_t{1} << kTileRowsLog2;

// Launch arguments of one key group against rows [row_begin, row_end) of the keys' row space
// (empty when row_begin >= row_end; then tile_begin == tile_end). Table pointers (at row
// row_begin), node buffer, PRG tables and output are left for the caller.
LaunchArgs MakeLaunchArgs(const KeyGroup& group, uint32_t row_words, TableKind kind,
                          int keys_per_block, uint64_t row_begin, uint64_t row_end);

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_LAUNCH_PLAN_H_
