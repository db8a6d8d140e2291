// GpuBackend: device resources, scheduling and the multi-GPU row split.
//
// Resources. One GpuResources object owns everything on the devices: per device a stream, the
// table slice, key and answer buffers (and the level-by-level node buffer), plus pinned host
// staging and the NCCL communicators. All of it is allocated in Create; Answer only copies and
// launches.
//
// Scheduling. Below options.single_query_rows a request is answered in batches: the keys are
// grouped by tree geometry and every block takes K keys (several keys share each table tile
// read: the answer is the GEMM shares[B x N] . table[N x D]). From single_query_rows on, one key
// already fills every SM, so keys run one at a time with K = 1 for the lowest latency.
//
// Several GPUs: see gpu/README.md. Each device holds rows [begin, end) (cut at multiples of
// kSliceAlignRows) and answers every key on its slice; the partial answers are all-gathered with
// NCCL and combined (+ or XOR) on the first device. With one device and NCCL available the same
// path runs as a one-rank communicator, so it is exercised by the single-GPU tests.
#include <cuda_runtime.h>
#if defined(VEIL_HAVE_NCCL)
#include <nccl.h>
#endif

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpf/params.h"
#include "gpu/backend.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/kernels.h"
#include "gpu/internal/launch_plan.h"
#include "gpu/internal/phases.h"

#if defined(VEIL_HAVE_NCCL)
#define VEIL_NCCL_RETURN_IF_ERROR(expr)                                             \
  do {                                                                              \
    ncclResult_t veil_nccl_status_ = (expr);                                        \
    if (veil_nccl_status_ != ncclSuccess) {                                         \
      return absl::InternalError(                                                   \
          absl::StrCat(#expr, " failed: ", ncclGetErrorString(veil_nccl_status_))); \
    }                                                                               \
  } while (0)
#endif

namespace veil::gpu {

using internal::Body;
using internal::KeyGroup;
using internal::LaunchArgs;
using internal::PackedKey;
using internal::TableKind;

namespace {

// Shared memory asked of the fused kernels at most: enough for any key group at this row width
// (less where a device offers less, e.g. ~99 KiB on an L4).
constexpr uint32_t kSharedLimit = 200 * 1024;

template <class T>
absl::Status DeviceAlloc(T** ptr, uint64_t count) {
  *ptr = nullptr;
  if (count == 0) return absl::OkStatus();
  VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(ptr), count * sizeof(T)));
  return absl::OkStatus();
}

}  // namespace

// Wipes the host copies of packed keys (each holds its key's seeds and correction words) when the
// scope ends, on every way out; `keys` may be cleared and refilled in between, so its whole
// capacity is wiped.
class WipeKeysAtExit {
 public:
  explicit WipeKeysAtExit(std::vector<PackedKey>& keys) : keys_(keys) {}
  ~WipeKeysAtExit() { sodium_memzero(keys_.data(), keys_.capacity() * sizeof(PackedKey)); }
  WipeKeysAtExit(const WipeKeysAtExit&) = delete;
  WipeKeysAtExit& operator=(const WipeKeysAtExit&) = delete;

 private:
  std::vector<PackedKey>& keys_;
};

// Everything one device holds.
struct DeviceSlice {
  int device = 0;
  cudaStream_t stream = nullptr;
  uint64_t row_begin = 0, row_end = 0;
  uint32_t* d_table = nullptr;    // kUint32: rows x row_words
  int8_t* d_table_i8 = nullptr;   // kInt8: rows x row_words
  PackedKey* d_keys = nullptr;    // max_batch keys
  uint32_t* d_out = nullptr;      // max_batch x row_words partial answers
  uint32_t* d_gather = nullptr;   // ranks x max_batch x row_words (NCCL all-gather)
  dpf::Block* d_nodes = nullptr;  // level-by-level node buffer
  int sms = 0;
  int blocks_per_sm[3] = {0, 0, 0};  // occupancy of each fused kernel at the chosen layout
#if defined(VEIL_HAVE_NCCL)
  ncclComm_t comm = nullptr;
#endif
};

class GpuResources {
 public:
  dpf::TableView table;
  GpuBackendOptions options;
  std::vector<DeviceSlice> slices;
  PackedKey* h_keys = nullptr;  // pinned: max_batch keys
  uint32_t* h_out = nullptr;    // pinned: max_batch x row_words
  uint64_t level_keys = 0;      // level-by-level: keys per node-buffer fill
  bool use_nccl = false;
  uint64_t ranks = 1;       // row slices of the whole table, over all processes
  uint64_t first_rank = 0;  // the rank of slices[0]
  GpuMemoryReport memory;
  std::mutex answering;  // one Answer at a time: they share the staging buffers and streams
  std::string nccl_status = "none: built without NCCL";

  ~GpuResources() {
    // Nothing of ours runs or copies any more when the buffers are zeroed and freed (a failed
    // batch may have left work on the streams).
    for (DeviceSlice& d : slices) {
      cudaSetDevice(d.device);
      if (d.stream) cudaStreamSynchronize(d.stream);
    }
#if defined(VEIL_HAVE_NCCL)
    // Finalizing waits for every rank of a communicator to finalize: this thread's communicators
    // (ncclCommInitAll's) together in one group, so that none waits for one not yet finalized;
    // then each is freed locally.
    ncclGroupStart();
    for (DeviceSlice& d : slices) {
      if (d.comm) ncclCommFinalize(d.comm);
    }
    ncclGroupEnd();
    for (DeviceSlice& d : slices) {
      if (d.comm) ncclCommDestroy(d.comm);
    }
#endif
    for (DeviceSlice& d : slices) {
      cudaSetDevice(d.device);
      // Key-derived memory is zeroed before it goes back to the driver: the last batch's keys and
      // answers (zeroed after each batch already, unless it failed) and the node buffer's
      // expanded seeds, which stay between batches (each fill overwrites them).
      const uint64_t batch_words = options.max_batch * table.row_words;
      auto zero = [](void* p, uint64_t bytes) {
        if (p != nullptr) cudaMemset(p, 0, bytes);
      };
      zero(d.d_keys, options.max_batch * sizeof(PackedKey));
      zero(d.d_out, batch_words * sizeof(uint32_t));
      zero(d.d_gather, ranks * batch_words * sizeof(uint32_t));
      zero(d.d_nodes, level_keys * table.rows * sizeof(dpf::Block));
      cudaDeviceSynchronize();
      cudaFree(d.d_table);
      cudaFree(d.d_table_i8);
      cudaFree(d.d_keys);
      cudaFree(d.d_out);
      cudaFree(d.d_gather);
      cudaFree(d.d_nodes);
      if (d.stream) cudaStreamDestroy(d.stream);
    }
    cudaFreeHost(h_keys);
    cudaFreeHost(h_out);
  }

  absl::Status Init(const dpf::TableView& t, const GpuBackendOptions& o);
  // Answers keys over the rows of `range` (every key fits range.rows; at most max_batch keys).
  absl::Status AnswerBatch(absl::Span<const PackedKey> keys, const pir::RowRange& range,
                           absl::Span<uint32_t> out);

 private:
  // Init's steps: the options (and ranks), the shared-memory layout every key layout fits (sets
  // keys_per_block; returns the largest block's shared bytes), one device's slice of the table and
  // its buffers, and the NCCL communicator.
  absl::Status CheckOptions(const dpf::TableView& t, const GpuBackendOptions& o);
  absl::StatusOr<uint32_t> ChooseSharedLayout();
  absl::Status InitSlice(uint64_t i, absl::Span<const int8_t> narrowed, uint32_t shared_max);
  absl::Status JoinNccl();
  // Zeroes every device's copies of a batch's n keys and count answer words on its stream, then
  // waits for the stream (so also for all queued there before: the launches, the all-gather, the
  // answer's copy back). Goes through every device whatever fails; returns the first error.
  absl::Status ZeroDeviceCopies(uint64_t n, uint64_t count);
  absl::Status LaunchGroup(DeviceSlice& d, const KeyGroup& group, uint64_t key_offset,
                           const pir::RowRange& range);
};

absl::Status GpuResources::CheckOptions(const dpf::TableView& t, const GpuBackendOptions& o) {
  if (t.words == nullptr || t.rows == 0 || t.row_words == 0) {
    return absl::InvalidArgumentError("GPU backend: empty table");
  }
  if (o.devices.empty() || o.max_batch < 1 || o.max_batch > 65535 || o.keys_per_block < 1) {
    return absl::InvalidArgumentError(
        "GPU backend: need at least one device, 1 <= max_batch <= 65535 (grid rows) and "
        "keys_per_block >= 1");
  }
  const bool joined = !o.nccl_id.empty();
  if (joined) {
    if (o.devices.size() != 1 || o.ranks < 1 || o.rank < 0 || o.rank >= o.ranks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPU backend: a process joining an NCCL communicator holds one device and a rank in "
          "[0, ranks); got ",
          o.devices.size(), " devices, rank ", o.rank, " of ", o.ranks));
    }
#if defined(VEIL_HAVE_NCCL)
    if (o.nccl_id.size() != sizeof(ncclUniqueId)) {
      return absl::InvalidArgumentError(absl::StrCat("GPU backend: nccl_id has ", o.nccl_id.size(),
                                                     " bytes, NCCL ids have ",
                                                     sizeof(ncclUniqueId)));
    }
#else
    return absl::UnimplementedError(
        "GPU backend: joining an NCCL communicator needs NCCL (built "
        "without it)");
#endif
  }
  ranks = joined ? static_cast<uint64_t>(o.ranks) : o.devices.size();
  first_rank = joined ? static_cast<uint64_t>(o.rank) : 0;
  int count = 0;
  VEIL_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int dev : o.devices) {
    if (dev < 0 || dev >= count) {
      return absl::UnavailableError(
          absl::StrCat("GPU backend: no CUDA device ", dev, " (", count, " present)"));
    }
  }
#if defined(VEIL_HAVE_NCCL)
  use_nccl = o.use_nccl || ranks > 1;
  if (!use_nccl) nccl_status = "none: one device, use_nccl = false";
#else
  if (o.devices.size() > 1) {
    return absl::UnimplementedError("GPU backend: several devices need NCCL (built without it)");
  }
#endif
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> GpuResources::ChooseSharedLayout() {
  const dpf::TableView& t = table;
  const GpuBackendOptions& o = options;
  // K must fit every key layout this table can meet: additive leaves of 1 to 16 words and XOR
  // leaves (their shares tiles and bounded-window node buffers differ in size).
  const Body body = internal::BodyFor(o.strategy);
  std::vector<internal::Geometry> layouts;
  for (int leaf_log : {0, 1, 2, 3, 4, dpf::kXorLeafBitsLog2}) {
    PackedKey probe{};
    probe.log_domain = static_cast<uint8_t>(dpf::LogDomainForRows(t.rows));
    probe.leaf_points_log2 = static_cast<uint8_t>(leaf_log);
    probe.levels = static_cast<uint8_t>(std::max(0, probe.log_domain - leaf_log));
    probe.output = static_cast<uint8_t>(
        leaf_log == dpf::kXorLeafBitsLog2 ? dpf::OutputType::kXor : dpf::OutputType::kAdditive);
    layouts.push_back(internal::MakeGeometry(probe, t.rows));
  }
  uint32_t limit = kSharedLimit;
  for (int dev : o.devices) {
    int optin = 0;
    VEIL_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    limit = std::min(limit, static_cast<uint32_t>(optin));
  }
  int kpb = std::min(o.keys_per_block, internal::kMaxKeysPerBlock);
  for (const internal::Geometry& geo : layouts) {
    absl::StatusOr<int> k = internal::ChooseKeysPerBlock(
        geo, t.row_words, body, internal::KindFor(o.dtype, geo), kpb, limit);
    if (!k.ok()) return k.status();
    kpb = *k;
  }
  uint32_t shared_max = 0;
  for (const internal::Geometry& geo : layouts) {
    const uint32_t bytes =
        internal::MakeSharedLayout(geo, kpb, t.row_words, body, internal::KindFor(o.dtype, geo))
            .bytes;
    shared_max = std::max(shared_max, bytes);
    if (geo.leaf_points_log2 == 4) memory.shared_bytes_per_block = bytes;
  }
  options.keys_per_block = kpb;
  memory.keys_per_block = kpb;
  return shared_max;
}

absl::Status GpuResources::InitSlice(uint64_t i, absl::Span<const int8_t> narrowed,
                                     uint32_t shared_max) {
  const dpf::TableView& t = table;
  const GpuBackendOptions& o = options;
  const uint64_t batch_words = static_cast<uint64_t>(o.max_batch) * t.row_words;
  const uint64_t units = (t.rows + internal::kSliceAlignRows - 1) / internal::kSliceAlignRows;
  DeviceSlice& d = slices[i];
  const uint64_t r = first_rank + i;  // this slice's rank
  d.device = o.devices[i];
  d.row_begin = std::min(t.rows, units * r / ranks * internal::kSliceAlignRows);
  d.row_end = std::min(t.rows, units * (r + 1) / ranks * internal::kSliceAlignRows);
  const uint64_t rows = d.row_end - d.row_begin;
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, d.device));
  for (Body b : {Body::kBranchParallel, Body::kLevelByLevelLeaves, Body::kBoundedWindow}) {
    absl::StatusOr<int> blocks = internal::ConfigureFusedKernel(b, shared_max);
    if (!blocks.ok()) return blocks.status();
    d.blocks_per_sm[static_cast<int>(b)] = *blocks;
  }
  if (o.dtype == TableDtype::kInt8) {
    VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_table_i8, rows * t.row_words));
    VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.d_table_i8, narrowed.data() + d.row_begin * t.row_words,
                                         rows * t.row_words, cudaMemcpyHostToDevice));
    memory.table_bytes += rows * t.row_words;
  } else {
    VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_table, rows * t.row_words));
    if (rows > 0) {
      VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(d.d_table, t.row_words * sizeof(uint32_t),
                                             t.row(d.row_begin), t.stride() * sizeof(uint32_t),
                                             t.row_words * sizeof(uint32_t), rows,
                                             cudaMemcpyHostToDevice));
    }
    memory.table_bytes += rows * t.row_words * sizeof(uint32_t);
  }
  VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_keys, o.max_batch));
  VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_out, batch_words));
  memory.staging_bytes += o.max_batch * sizeof(PackedKey) + batch_words * sizeof(uint32_t);
  if (use_nccl) {
    VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_gather, ranks * batch_words));
    memory.staging_bytes += ranks * batch_words * sizeof(uint32_t);
  }
  if (level_keys > 0) {
    VEIL_RETURN_IF_ERROR(DeviceAlloc(&d.d_nodes, level_keys * t.rows));
    memory.node_buffer_bytes += level_keys * t.rows * sizeof(dpf::Block);
  }
  return absl::OkStatus();
}

absl::Status GpuResources::JoinNccl() {
  [[maybe_unused]] const GpuBackendOptions& o = options;
#if defined(VEIL_HAVE_NCCL)
  if (!o.nccl_id.empty()) {
    // One rank of a communicator spanning processes (and hosts): blocks until all ranks join.
    ncclUniqueId id;
    std::memcpy(&id, o.nccl_id.data(), sizeof(id));
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(slices[0].device));
    VEIL_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&slices[0].comm, o.ranks, id, o.rank));
    nccl_status = absl::StrCat("nccl, rank ", o.rank, " of ", o.ranks);
  } else if (use_nccl) {
    std::vector<ncclComm_t> comms(ranks);
    const ncclResult_t init =
        ncclCommInitAll(comms.data(), static_cast<int>(ranks), o.devices.data());
    if (init == ncclSuccess) {
      for (uint64_t r = 0; r < ranks; ++r) slices[r].comm = comms[r];
      nccl_status = absl::StrCat("nccl, ", ranks, ranks == 1 ? " rank" : " ranks");
    } else if (ranks == 1) {
      // One device needs no collective: answer without NCCL rather than not at all, and say why.
      use_nccl = false;
      nccl_status = absl::StrCat("none: ncclCommInitAll failed: ", ncclGetErrorString(init));
    } else {
      return absl::InternalError(
          absl::StrCat("GPU backend: ncclCommInitAll failed: ", ncclGetErrorString(init)));
    }
  }
#endif
  return absl::OkStatus();
}

absl::Status GpuResources::Init(const dpf::TableView& t, const GpuBackendOptions& o) {
  table = t;
  options = o;
  VEIL_RETURN_IF_ERROR(CheckOptions(t, o));
  std::vector<int8_t> narrowed;
  if (o.dtype == TableDtype::kInt8) {
    absl::StatusOr<std::vector<int8_t>> n = internal::NarrowToInt8(t);
    if (!n.ok()) return n.status();
    narrowed = *std::move(n);
  }
  absl::StatusOr<uint32_t> shared_max = ChooseSharedLayout();
  if (!shared_max.ok()) return shared_max.status();

  // Level-by-level holds up to `rows` leaves per key (1-word leaves); fill it level_keys at a time.
  if (o.strategy == Strategy::kLevelByLevel) {
    level_keys = std::clamp<uint64_t>(o.level_buffer_bytes / (t.rows * sizeof(dpf::Block)), 1,
                                      static_cast<uint64_t>(o.max_batch));
  }
  const uint64_t batch_words = static_cast<uint64_t>(o.max_batch) * t.row_words;
  // On the first device of ours: cudaMallocHost on no device set would open a context on device 0.
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(o.devices[0]));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&h_keys), o.max_batch * sizeof(PackedKey)));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&h_out), batch_words * sizeof(uint32_t)));
  slices.resize(o.devices.size());
  for (uint64_t i = 0; i < slices.size(); ++i) {
    VEIL_RETURN_IF_ERROR(InitSlice(i, narrowed, *shared_max));
  }
  VEIL_RETURN_IF_ERROR(JoinNccl());
  for (DeviceSlice& d : slices) {
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
    VEIL_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  }
  return absl::OkStatus();
}

absl::Status GpuResources::LaunchGroup(DeviceSlice& d, const KeyGroup& group, uint64_t key_offset,
                                       const pir::RowRange& range) {
  // The rows of the range this device holds (none if it holds no rows or other rows only).
  const uint64_t begin = std::max(d.row_begin, range.first_row);
  const uint64_t end = std::min(d.row_end, range.first_row + range.rows);
  if (begin >= end) return absl::OkStatus();
  const Body body = internal::BodyFor(options.strategy);
  const TableKind kind = internal::KindFor(options.dtype, group.geo);
  const uint32_t words = table.row_words;
  const bool one_at_a_time = range.rows >= options.single_query_rows;
  LaunchArgs base =
      internal::MakeLaunchArgs(group, words, kind, one_at_a_time ? 1 : options.keys_per_block,
                               begin - range.first_row, end - range.first_row);
  const uint64_t local = (begin - d.row_begin) * words;  // the first row's offset in the slice
  base.table = d.d_table ? d.d_table + local : nullptr;
  base.table_stride = words;
  base.table_i8 = d.d_table_i8 ? d.d_table_i8 + local : nullptr;
  base.level_nodes = d.d_nodes;
  const uint64_t tiles = base.tile_end - base.tile_begin;
  // Blocks resident at once: the occupancy at the largest shared layout, or in latency mode (one
  // key, far less shared memory) as many as the SM's 2048 threads allow, so that one query's
  // tiles spread over more blocks. Blocks beyond residency only queue.
  const int occupancy =
      one_at_a_time ? 2048 / internal::kBlockThreads : d.blocks_per_sm[static_cast<int>(body)];
  const uint64_t resident = static_cast<uint64_t>(d.sms) * occupancy;
  const uint32_t level_grid = static_cast<uint32_t>(d.sms) * 8;
  // Keys per launch: one (latency mode), the node buffer's capacity (level-by-level), or all.
  uint64_t step = group.keys.size();
  if (one_at_a_time) step = 1;
  if (body == Body::kLevelByLevelLeaves) step = std::min<uint64_t>(step, level_keys);
  for (uint64_t k0 = 0; k0 < group.keys.size(); k0 += step) {
    LaunchArgs a = base;
    a.num_keys = static_cast<int>(std::min<uint64_t>(step, group.keys.size() - k0));
    a.keys = d.d_keys + key_offset + k0;
    a.out = d.d_out + (key_offset + k0) * words;
    const uint64_t key_blocks = (a.num_keys + a.keys_per_block - 1) / a.keys_per_block;
    // Enough blocks to fill the device, each with several consecutive tiles (the bounded window
    // reuses the path between them).
    const uint64_t grid_x = std::clamp<uint64_t>(resident / key_blocks, 1, tiles);
    VEIL_RETURN_IF_ERROR(
        internal::LaunchAnswer(a, body, static_cast<uint32_t>(grid_x), level_grid, d.stream));
  }
  return absl::OkStatus();
}

absl::Status GpuResources::ZeroDeviceCopies(uint64_t n, uint64_t count) {
  absl::Status status;
  for (DeviceSlice& d : slices) {
    status.Update([&]() -> absl::Status {
      VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
      VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.d_keys, 0, n * sizeof(PackedKey), d.stream));
      VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.d_out, 0, count * sizeof(uint32_t), d.stream));
      if (d.d_gather != nullptr) {
        VEIL_CUDA_RETURN_IF_ERROR(
            cudaMemsetAsync(d.d_gather, 0, ranks * count * sizeof(uint32_t), d.stream));
      }
      return absl::OkStatus();
    }());
    // Drained even when a memset failed: the caller may wipe host buffers the stream copies.
    if (const cudaError_t e = cudaStreamSynchronize(d.stream); e != cudaSuccess) {
      status.Update(internal::CudaError(e, "cudaStreamSynchronize(d.stream)", __FILE__, __LINE__));
    }
  }
  return status;
}

absl::Status GpuResources::AnswerBatch(absl::Span<const PackedKey> keys, const pir::RowRange& range,
                                       absl::Span<uint32_t> out) {
  const uint32_t words = table.row_words;
  std::vector<KeyGroup> groups = internal::GroupKeys(keys, range.rows);
  const uint64_t n = keys.size(), count = n * words;
  // The keys' host copies (grouped, pinned) and the answer's pinned copy are wiped on every way
  // out; the device copies are zeroed once used (below), on the success path. On a failure they
  // are zeroed here, which also drains the streams before the host copies are wiped (an async
  // copy into h_out or out of h_keys may still be under way).
  struct WipeHostCopies {
    ~WipeHostCopies() {
      if (!device_zeroed) r.ZeroDeviceCopies(n, count).IgnoreError();
      for (KeyGroup& g : groups) sodium_memzero(g.keys.data(), g.keys.size() * sizeof(PackedKey));
      sodium_memzero(r.h_keys, n * sizeof(PackedKey));
      sodium_memzero(r.h_out, count * sizeof(uint32_t));
    }
    std::vector<KeyGroup>& groups;
    GpuResources& r;
    uint64_t n, count;
    bool device_zeroed = false;
  } wipe{groups, *this, n, count};
  uint64_t at = 0;
  for (const KeyGroup& g : groups) {
    std::memcpy(h_keys + at, g.keys.data(), g.keys.size() * sizeof(PackedKey));
    at += g.keys.size();
  }
  for (DeviceSlice& d : slices) {
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
    VEIL_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d.d_keys, h_keys, n * sizeof(PackedKey), cudaMemcpyHostToDevice, d.stream));
    VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.d_out, 0, count * sizeof(uint32_t), d.stream));
    uint64_t offset = 0;
    for (const KeyGroup& g : groups) {
      VEIL_RETURN_IF_ERROR(LaunchGroup(d, g, offset, range));
      offset += g.keys.size();
    }
  }
  DeviceSlice& first = slices[0];
  const uint32_t* result = first.d_out;
#if defined(VEIL_HAVE_NCCL)
  if (use_nccl) {
    // All-gather the partial answers, then combine per key group (+ or XOR) on the first device.
    // The group is ended whatever fails inside it: one left open would swallow the next batch's
    // all-gathers (never launched, their zeroed buffers combined into answers).
    VEIL_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    ncclResult_t gathered = ncclSuccess;
    for (DeviceSlice& d : slices) {
      gathered = ncclAllGather(d.d_out, d.d_gather, count, ncclUint32, d.comm, d.stream);
      if (gathered != ncclSuccess) break;
    }
    const ncclResult_t ended = ncclGroupEnd();
    VEIL_NCCL_RETURN_IF_ERROR(gathered);
    VEIL_NCCL_RETURN_IF_ERROR(ended);
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(first.device));
    {
      uint64_t offset = 0;
      for (const KeyGroup& g : groups) {
        // Rank r's partial answers start at r * count; a group's words sit at the same offset
        // inside each rank's block.
        VEIL_RETURN_IF_ERROR(internal::LaunchCombine(
            first.d_gather + offset * words, static_cast<int>(ranks), count, g.keys.size() * words,
            g.geo.xor_output, first.d_out + offset * words, first.stream));
        offset += g.keys.size();
      }
    }
  }
#endif
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(first.device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_out, result, count * sizeof(uint32_t),
                                            cudaMemcpyDeviceToHost, first.stream));
  // Each device's copies of the keys and of its answers are zeroed on its stream, after the
  // launches, the all-gather and the copy above have read them (the next batch would overwrite
  // them, but a batch may be the last before the buffers are freed or the process exits).
  wipe.device_zeroed = true;
  VEIL_RETURN_IF_ERROR(ZeroDeviceCopies(n, count));
  uint64_t offset = 0;
  for (const KeyGroup& g : groups) {
    for (size_t k = 0; k < g.keys.size(); ++k) {
      std::memcpy(out.data() + static_cast<uint64_t>(g.index[k]) * words,
                  h_out + (offset + k) * words, words * sizeof(uint32_t));
    }
    offset += g.keys.size();
  }
  return absl::OkStatus();
}

GpuBackend::GpuBackend(std::unique_ptr<GpuResources> resources)
    : resources_(std::move(resources)) {}
GpuBackend::~GpuBackend() = default;

absl::StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::Create(const dpf::TableView& table,
                                                               const GpuBackendOptions& options) {
  auto resources = std::make_unique<GpuResources>();
  VEIL_RETURN_IF_ERROR(resources->Init(table, options));
  return std::unique_ptr<GpuBackend>(new GpuBackend(std::move(resources)));
}

const dpf::TableView& GpuBackend::table() const { return resources_->table; }
const GpuBackendOptions& GpuBackend::options() const { return resources_->options; }
GpuMemoryReport GpuBackend::memory() const { return resources_->memory; }
std::string GpuBackend::collective() const { return resources_->nccl_status; }

absl::Status GpuBackend::Answer(absl::Span<const dpf::DpfKey* const> keys,
                                absl::Span<uint32_t> out) {
  return AnswerRows(keys, {0, resources_->table.rows}, out);
}

absl::Status GpuBackend::AnswerRange(absl::Span<const dpf::DpfKey* const> keys,
                                     const pir::RowRange& range, absl::Span<uint32_t> out) {
  VEIL_RETURN_IF_ERROR(pir::CheckRange(range, resources_->table.rows));
  return AnswerRows(keys, range, out);
}

absl::Status GpuBackend::AnswerRows(absl::Span<const dpf::DpfKey* const> keys,
                                    const pir::RowRange& range, absl::Span<uint32_t> out) {
  std::lock_guard<std::mutex> lock(resources_->answering);
  const uint32_t words = resources_->table.row_words;
  if (out.size() != keys.size() * words) {
    return absl::InvalidArgumentError(absl::StrCat("GPU backend: out holds ", out.size(),
                                                   " words, expected ", keys.size() * words));
  }
  std::vector<PackedKey> packed;
  packed.reserve(std::min<size_t>(keys.size(), resources_->options.max_batch));
  const WipeKeysAtExit wipe(packed);
  const uint64_t max_batch = resources_->options.max_batch;
  for (uint64_t k0 = 0; k0 < keys.size(); k0 += max_batch) {
    const uint64_t n = std::min<uint64_t>(max_batch, keys.size() - k0);
    packed.clear();
    for (uint64_t k = k0; k < k0 + n; ++k) {
      VEIL_RETURN_IF_ERROR(dpf::CheckDomainFitsRows(keys[k]->params(), range.rows));
      absl::StatusOr<PackedKey> p = internal::PackKey(*keys[k]);
      if (!p.ok()) return p.status();
      packed.push_back(*p);
    }
    VEIL_RETURN_IF_ERROR(
        resources_->AnswerBatch(packed, range, out.subspan(k0 * words, n * words)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateGpuBackend(const dpf::TableView& table,
                                                               const GpuBackendOptions& options) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> backend = GpuBackend::Create(table, options);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<pir::Backend>(std::move(*backend));
}

absl::StatusOr<std::string> NewNcclId() {
#if defined(VEIL_HAVE_NCCL)
  ncclUniqueId id;
  VEIL_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
#else
  return absl::UnimplementedError("built without NCCL");
#endif
}

int GpuDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

}  // namespace veil::gpu
