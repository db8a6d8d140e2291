#include "gpu/host_run.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpf/params.h"
#include "gpu/internal/launch_plan.h"
#include "gpu/internal/phases.h"
#include "gpu/internal/runners.h"

namespace veil::gpu {
namespace {

using internal::BlockShared;
using internal::LaunchArgs;

// The scalar definition of what the device computes with wmma on the same staged tiles.
template <class Runner>
void Int8TileProductScalar(Runner& run, const LaunchArgs& a, const BlockShared& s) {
  const uint32_t items = internal::Int8MPad(a.keys_per_block) * internal::RoundUp16(a.row_words);
  run.Phase(items, [&](uint32_t i) { internal::Int8TileProductItem(a, s, i); });
}

// Runs a phase's items one after the other (in the host order, gpu/internal/runners.h): a valid
// schedule of the device's threads, because items of one phase never touch each other's data
// except through the atomics below.
class SequentialRunner {
 public:
  uint32_t threads() const { return internal::kBlockThreads; }
  dpf::AesKeys aes() const { return dpf::HostAesKeys(); }
  template <class F>
  void Phase(uint32_t items, F&& f) {
    internal::HostLoop(items, [&](uint64_t i) { f(static_cast<uint32_t>(i)); });
  }
  void AtomicAdd(uint32_t* p, uint32_t v) { *p += v; }
  void AtomicXor(uint32_t* p, uint32_t v) { *p ^= v; }
  void Int8TileProduct(const LaunchArgs& a, const BlockShared& s) {
    Int8TileProductScalar(*this, a, s);
  }
};

// One of kBlockThreads host threads of a simulated block, as the device runs it: every thread
// executes the whole body, takes the items tid, tid + threads, ... of each phase and waits at a
// barrier after it. Runs the bodies' barrier structure for real (a non-uniform phase sequence
// deadlocks) and lets ThreadSanitizer see any two items of one phase that race.
class ThreadedRunner {
 public:
  ThreadedRunner(uint32_t tid, std::barrier<>& barrier) : tid_(tid), barrier_(barrier) {}
  uint32_t threads() const { return internal::kBlockThreads; }
  dpf::AesKeys aes() const { return dpf::HostAesKeys(); }
  template <class F>
  void Phase(uint32_t items, F&& f) {
    for (uint32_t i = tid_; i < items; i += internal::kBlockThreads) f(i);
    barrier_.arrive_and_wait();
  }
  void AtomicAdd(uint32_t* p, uint32_t v) {
    std::atomic_ref<uint32_t>(*p).fetch_add(v, std::memory_order_relaxed);
  }
  void AtomicXor(uint32_t* p, uint32_t v) {
    std::atomic_ref<uint32_t>(*p).fetch_xor(v, std::memory_order_relaxed);
  }
  void Int8TileProduct(const LaunchArgs& a, const BlockShared& s) {
    Int8TileProductScalar(*this, a, s);
  }

 private:
  uint32_t tid_;
  std::barrier<>& barrier_;
};

// Runs body(runner) for one simulated block.
template <class Body>
void RunBlock(bool threaded, const Body& body) {
  if (!threaded) {
    SequentialRunner run;
    body(run);
    return;
  }
  std::barrier<> barrier(internal::kBlockThreads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < internal::kBlockThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadedRunner run(t, barrier);
      body(run);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Shared memory of one simulated block.
std::vector<dpf::Block> SharedMemory(uint32_t bytes) {
  return std::vector<dpf::Block>((bytes + 15) / 16);
}

void RunLaunch(LaunchArgs a, internal::Body body, const HostRunOptions& options) {
  const uint32_t gx = static_cast<uint32_t>(options.blocks_per_group);
  const uint32_t gy = static_cast<uint32_t>((a.num_keys + a.keys_per_block - 1) / a.keys_per_block);
  std::vector<dpf::Block> nodes;
  if (body == internal::Body::kLevelByLevelLeaves) {
    nodes.resize(static_cast<size_t>(a.num_keys) * a.geo.leaves);
    a.level_nodes = nodes.data();
    for (int level = -1; level < a.geo.levels; ++level) {  // one launch per level
      internal::HostLoop(gx, [&](uint64_t bx) {
        RunBlock(options.threaded, [&](auto& run) {
          internal::LevelBlock(run, a, level, static_cast<uint32_t>(bx), gx);
        });
      });
    }
  }
  const internal::SharedLayout layout =
      internal::MakeSharedLayout(a.geo, a.keys_per_block, a.row_words, body, a.table_kind);
  std::vector<dpf::Block> smem = SharedMemory(layout.bytes);
  internal::HostLoop(gy, [&](uint64_t by) {
    internal::HostLoop(gx, [&](uint64_t bx) {
      internal::PoisonShared(smem);
      RunBlock(options.threaded, [&](auto& run) {
        internal::FusedBlock(run, body, a, reinterpret_cast<uint8_t*>(smem.data()),
                             static_cast<uint32_t>(bx), gx, static_cast<uint32_t>(by));
      });
    });
  });
}

}  // namespace

absl::Status HostRunAnswer(absl::Span<const internal::PackedKey> keys, const dpf::TableView& table,
                           const HostRunOptions& options, absl::Span<uint32_t> out) {
  if (out.size() != keys.size() * table.row_words) {
    return absl::InvalidArgumentError(
        absl::StrCat("out holds ", out.size(), " words, expected ", keys.size() * table.row_words));
  }
  if (table.rows == 0 || table.row_words == 0) {
    return absl::InvalidArgumentError("empty table");
  }
  const uint64_t first = options.range_first_row;
  const uint64_t rows = options.range_rows == 0 ? table.rows : options.range_rows;
  if (first >= table.rows || rows > table.rows - first) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", first, ", ", first, " + ", rows,
                                                   ") are outside the table (", table.rows,
                                                   " rows)"));
  }
  const int log_domain = dpf::LogDomainForRows(rows);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].log_domain != log_domain) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key ", i, " has log domain ", keys[i].log_domain, ", the table needs ", log_domain));
    }
  }
  std::vector<int8_t> table_i8;
  if (options.dtype == TableDtype::kInt8) {
    absl::StatusOr<std::vector<int8_t>> narrowed = internal::NarrowToInt8(table);
    if (!narrowed.ok()) return narrowed.status();
    table_i8 = *std::move(narrowed);
  }
  std::fill(out.begin(), out.end(), 0u);
  const internal::Body body = internal::BodyFor(options.strategy);
  const uint64_t slices = std::max(1, options.slices);
  const uint64_t aligned_tiles =
      (table.rows + internal::kSliceAlignRows - 1) / internal::kSliceAlignRows;
  for (internal::KeyGroup& group : internal::GroupKeys(keys, rows)) {
    const internal::TableKind kind = internal::KindFor(options.dtype, group.geo);
    absl::StatusOr<int> kpb = internal::ChooseKeysPerBlock(
        group.geo, table.row_words, body, kind, options.keys_per_block, options.shared_limit);
    if (!kpb.ok()) return kpb.status();
    std::vector<uint32_t> partial(group.keys.size() * table.row_words);
    std::vector<uint32_t> total(partial.size(), 0u);
    for (uint64_t s = 0; s < slices; ++s) {
      // This slice's rows of the table, then of the range.
      const uint64_t slice_begin =
          std::min(table.rows, aligned_tiles * s / slices * internal::kSliceAlignRows);
      const uint64_t slice_end =
          std::min(table.rows, aligned_tiles * (s + 1) / slices * internal::kSliceAlignRows);
      const uint64_t begin = std::max(slice_begin, first), end = std::min(slice_end, first + rows);
      if (begin >= end) continue;
      LaunchArgs a =
          internal::MakeLaunchArgs(group, table.row_words, kind, *kpb, begin - first, end - first);
      a.keys = group.keys.data();
      a.table = table.row(begin);
      a.table_stride = table.stride();
      a.table_i8 = table_i8.empty() ? nullptr : table_i8.data() + begin * table.row_words;
      std::fill(partial.begin(), partial.end(), 0u);
      a.out = partial.data();
      RunLaunch(a, body, options);
      for (size_t i = 0; i < total.size(); ++i) {
        total[i] = group.geo.xor_output ? (total[i] ^ partial[i]) : (total[i] + partial[i]);
      }
    }
    for (size_t k = 0; k < group.keys.size(); ++k) {
      std::copy_n(total.begin() + k * table.row_words, table.row_words,
                  out.begin() + group.index[k] * table.row_words);
    }
  }
  return absl::OkStatus();
}

absl::Status HostRunAnswer(absl::Span<const dpf::DpfKey* const> keys, const dpf::TableView& table,
                           const HostRunOptions& options, absl::Span<uint32_t> out) {
  std::vector<internal::PackedKey> packed;
  packed.reserve(keys.size());
  for (const dpf::DpfKey* key : keys) {
    absl::StatusOr<internal::PackedKey> p = internal::PackKey(*key);
    if (!p.ok()) return p.status();
    packed.push_back(*p);
  }
  return HostRunAnswer(packed, table, options, out);
}

}  // namespace veil::gpu
