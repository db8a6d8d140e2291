// Host-run simulation of the GPU backend's kernels: the same phase functions
// (gpu/internal/phases.h) executed block by block and thread by thread on the CPU. This is how CI
// checks the kernels' arithmetic, tiling and indexing without a GPU; it is far too slow to serve.
#ifndef VEIL_GPU_HOST_RUN_H_
#define VEIL_GPU_HOST_RUN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "gpu/internal/device_key.h"
#include "gpu/strategy.h"

namespace veil::gpu {

struct HostRunOptions {
  Strategy strategy = Strategy::kBoundedWindow;
  TableDtype dtype = TableDtype::kUint32;
  int keys_per_block = 8;              // capped by kMaxKeysPerBlock and by shared memory
  int blocks_per_group = 3;            // grid x: blocks sharing one key group's tiles
  uint32_t shared_limit = 227 * 1024;  // bytes of shared memory per block (H100/H200: 227 KiB)
  // Row split: the table is cut into `slices` parts (at multiples of kSliceAlignRows), each
  // answered on its own as one device would, and the partial answers combined (+ or ^) as the
  // NCCL reduction does.
  int slices = 1;
  // Rows [range_first_row, range_first_row + range_rows) of the table only, as
  // pir::Backend::AnswerRange (the keys' domain fits range_rows); range_rows = 0: the whole table.
  // The row split still cuts the whole table, as it does on the devices.
  uint64_t range_first_row = 0;
  uint64_t range_rows = 0;
  // Run every simulated block on kBlockThreads host threads with real barriers (as the device
  // does) instead of item by item: checks the barrier structure, and under ThreadSanitizer
  // reports items of one phase that race. Slower.
  bool threaded = false;
};

// out[k * row_words + j] = share of word j for keys[k], as the CUDA kernels compute it.
// Returns INVALID_ARGUMENT if a key does not fit the table (or range), the range lies outside
// the table, out has the wrong size, or (INT8) a table word is outside -128..127; RESOURCE_EXHAUSTED if a row does not fit the shared memory.
absl::Status HostRunAnswer(absl::Span<const internal::PackedKey> keys, const dpf::TableView& table,
                           const HostRunOptions& options, absl::Span<uint32_t> out);

// Same for DpfKey objects (packed first).
absl::Status HostRunAnswer(absl::Span<const dpf::DpfKey* const> keys, const dpf::TableView& table,
                           const HostRunOptions& options, absl::Span<uint32_t> out);

}  // namespace veil::gpu

#endif  // VEIL_GPU_HOST_RUN_H_
