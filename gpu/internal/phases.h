// The kernels of the GPU backend as sequences of per-thread phases.
//
// A kernel body below is written once, as a template over a Runner that executes one phase for
// all threads of a block and then synchronises, and that says where the AES round keys are
// (run.aes(): the device's __constant__ copies, read by a warp at one address at a time, a
// constant-cache broadcast; or dpf's host constants):
//   - DeviceRunner (gpu/kernels.cu): each CUDA thread runs the items threadIdx.x,
//     threadIdx.x + blockDim.x, ... of the phase, then __syncthreads().
//   - SequentialRunner (gpu/host_run.cc): a loop runs the items one by one; the barrier is
//     implicit. ThreadedRunner (same file) runs the device's schedule on 256 host threads.
// Every phase writes disjoint locations per item (or uses the runner's atomics), so the host's
// sequential order is one valid interleaving of the device's threads: CI checks the arithmetic,
// the indexing and the tiling of the real kernels without a GPU. Control flow between phases
// depends only on block-uniform values (every thread reaches every barrier).
//
// The product is the GEMM answers[B x D] = shares[B x N] . table[N x D] (mod 2^32, or over GF(2)
// for XOR keys). A block owns up to kMaxKeysPerBlock keys and a contiguous range of tiles; a tile
// is the subtree of 2^window_log leaves under one node at depth levels - window_log, i.e.
// rows_per_tile() consecutive rows. For each tile the block fills a shares tile in shared memory
// (rows_per_tile x K words), then every thread multiplies a slice of the table tile into register
// accumulators for all K keys at once: each table word read serves K keys. Per-thread sums meet
// in shared block accumulators; at the end the block adds them into the global answers.
#ifndef VEIL_GPU_INTERNAL_PHASES_H_
#define VEIL_GPU_INTERNAL_PHASES_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "gpu/internal/device_key.h"
#include "gpu/internal/tree.h"

#if defined(__CUDACC__)
// The bodies are __host__ __device__ templates instantiated with a device-only runner in the .cu
// files and a host-only runner in host_run.cc; each instantiation is only called from its side.
#define VEIL_GPU_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
// A loop of a constant count unrolled in full, so that register arrays indexed by its variable
// stay in registers.
#define VEIL_GPU_UNROLL _Pragma("unroll")
#else
#define VEIL_GPU_EXEC_CHECK_DISABLE
#define VEIL_GPU_UNROLL _Pragma("GCC unroll 16")
#endif

namespace veil::gpu::internal {

inline constexpr int kMaxKeysPerBlock = 8;
inline constexpr int kBlockThreads = 256;
inline constexpr int kTileRowsLog2 = 10;  // aim: 1024 rows per tile
inline constexpr int kMaxWindowLog = 7;   // at most 128 leaves per tile (node buffer bound)

enum class TableKind : uint8_t {
  kWords = 0,           // uint32 rows, CUDA-core multiply-accumulate
  kInt8Scalar = 1,      // int8 rows (sign-extended), CUDA-core path (XOR keys on INT8 tables)
  kInt8TensorCore = 2,  // int8 rows, byte planes on the tensor cores
};

// Everything a launch shares for all its keys: they have equal levels and leaf layout.
struct Geometry {
  int levels = 0;
  int leaf_points_log2 = 0;
  int leaf_words = 0;
  bool xor_output = false;
  int window_log = 0;   // leaves per tile = 2^window_log
  uint64_t rows = 0;    // rows of the whole table
  uint64_t leaves = 0;  // leaves holding at least one row
  uint64_t tiles = 0;   // tiles holding at least one row

  VEIL_HD int subtree_depth() const { return levels - window_log; }
  VEIL_HD uint32_t leaves_per_tile() const { return 1u << window_log; }
  VEIL_HD uint32_t rows_per_tile() const { return leaves_per_tile() << leaf_points_log2; }
  // Level-by-level: nodes of tree level l (0 = root) that lead to a needed leaf.
  VEIL_HD uint64_t nodes_at_level(int l) const { return ((leaves - 1) >> (levels - l)) + 1; }
};

inline Geometry MakeGeometry(const PackedKey& key, uint64_t rows) {
  Geometry g;
  g.levels = key.levels;
  g.leaf_points_log2 = key.leaf_points_log2;
  g.leaf_words = key.leaf_words;
  g.xor_output = key.is_xor();
  int w = kTileRowsLog2 - g.leaf_points_log2;
  if (w < 0) w = 0;
  if (w > kMaxWindowLog) w = kMaxWindowLog;
  if (w > g.levels) w = g.levels;
  g.window_log = w;
  g.rows = rows;
  g.leaves = ((rows - 1) >> g.leaf_points_log2) + 1;
  g.tiles = ((g.leaves - 1) >> w) + 1;
  return g;
}

// Arguments of one launch (kernel parameters on the device; plain struct on the host).
struct LaunchArgs {
  Geometry geo;
  const PackedKey* keys = nullptr;  // num_keys keys, all with geometry `geo`
  int num_keys = 0;
  int keys_per_block = 1;  // K; gridDim.y = ceil(num_keys / K)
  TableKind table_kind = TableKind::kWords;
  // The rows [row_offset, row_end) of the keys' row space (row 0 = the keys' first row: the
  // table's, or a row range's) held here; table / table_i8 point at row row_offset. A row split
  // (several GPUs) or a row range may start and end inside a tile: the tile's rows outside are
  // expanded with it but not multiplied.
  const uint32_t* table = nullptr;   // kWords: rows [row_offset, row_end)
  uint64_t table_stride = 0;         // kWords: words between rows
  const int8_t* table_i8 = nullptr;  // INT8 kinds: rows [row_offset, row_end), row_words bytes each
  uint32_t row_words = 0;            // D
  uint64_t row_offset = 0;
  uint64_t row_end = 0;     // <= geo.rows
  uint64_t tile_begin = 0;  // tiles of this launch: [tile_begin, tile_end), covering the rows
  uint64_t tile_end = 0;
  Block* level_nodes = nullptr;  // level-by-level: num_keys x geo.leaves nodes
  uint32_t* out = nullptr;       // num_keys x row_words answers, accumulated (+ or ^)

  // Rows of `tile` to multiply: [*first, return value), relative to the tile's first row.
  VEIL_HD uint32_t TileRows(uint64_t tile, uint32_t* first) const {
    const uint64_t row0 = tile * geo.rows_per_tile();
    *first = row_offset > row0 ? static_cast<uint32_t>(row_offset - row0) : 0u;
    const uint64_t end = row_end - row0;  // row_end > row0 for every tile of the launch
    return end < geo.rows_per_tile() ? static_cast<uint32_t>(end) : geo.rows_per_tile();
  }
};

VEIL_HD uint32_t RoundUp16(uint32_t x) { return (x + 15u) & ~15u; }

// Byte offsets of the block's shared-memory regions.
struct SharedLayout {
  uint32_t acc = 0;     // K x D block accumulators
  uint32_t shares = 0;  // rows_per_tile x K shares of the current tile
  uint32_t nodes = 0;   // bounded window: K x leaves_per_tile nodes of the current subtree
  uint32_t path = 0;    // bounded window: K x (subtree_depth + 1) nodes from the root
  uint32_t planes = 0;  // tensor cores: M_pad x k_pad int8 byte planes (16x16-tiled)
  uint32_t b_tile = 0;  // tensor cores: k_pad x n_pad int8 table tile (16x16-tiled)
  uint32_t c_tile = 0;  // tensor cores: M_pad x n_pad int32 products
  uint32_t bytes = 0;
};

VEIL_HD uint32_t Int8MPad(int keys_per_block) { return RoundUp16(4u * keys_per_block); }

enum class Body : uint8_t { kBranchParallel, kLevelByLevelLeaves, kBoundedWindow };

VEIL_HD SharedLayout MakeSharedLayout(const Geometry& g, int keys_per_block, uint32_t row_words,
                                      Body body, TableKind kind) {
  SharedLayout s;
  uint32_t at = 0;
  // 128-byte aligned regions: tensor-core fragment loads need 32-byte aligned tiles, and
  // aligned rows avoid split transactions.
  auto take = [&at](uint32_t bytes) {
    uint32_t start = at;
    at += (bytes + 127u) & ~127u;
    return start;
  };
  const uint32_t k = keys_per_block;
  s.acc = take(4u * k * row_words);
  s.shares = take(4u * k * g.rows_per_tile());
  if (body == Body::kBoundedWindow) {
    s.nodes = take(16u * k * g.leaves_per_tile());
    s.path = take(16u * k * (g.subtree_depth() + 1));
  }
  if (kind == TableKind::kInt8TensorCore) {
    uint32_t m = Int8MPad(keys_per_block), kp = RoundUp16(g.rows_per_tile()),
             n = RoundUp16(row_words);
    s.planes = take(m * kp);
    s.b_tile = take(kp * n);
    s.c_tile = take(4u * m * n);
  }
  s.bytes = at;
  return s;
}

// Typed views of one block's shared memory.
struct BlockShared {
  uint32_t* acc;
  uint32_t* shares;
  Block* nodes;
  Block* path;
  int8_t* planes;
  int8_t* b_tile;
  int32_t* c_tile;

  VEIL_HD BlockShared(uint8_t* base, const SharedLayout& s)
      : acc(reinterpret_cast<uint32_t*>(base + s.acc)),
        shares(reinterpret_cast<uint32_t*>(base + s.shares)),
        nodes(reinterpret_cast<Block*>(base + s.nodes)),
        path(reinterpret_cast<Block*>(base + s.path)),
        planes(reinterpret_cast<int8_t*>(base + s.planes)),
        b_tile(reinterpret_cast<int8_t*>(base + s.b_tile)),
        c_tile(reinterpret_cast<int32_t*>(base + s.c_tile)) {}
};

// The slice of work of block (x, y): keys [key0, key0 + keys) and tiles [tile0, tile1).
struct BlockWork {
  int key0 = 0;
  int keys = 0;
  uint64_t tile0 = 0;
  uint64_t tile1 = 0;
};

VEIL_HD BlockWork MakeBlockWork(const LaunchArgs& a, uint32_t bx, uint32_t gx, uint32_t by) {
  BlockWork w;
  w.key0 = static_cast<int>(by) * a.keys_per_block;
  int left = a.num_keys - w.key0;
  w.keys = left < a.keys_per_block ? left : a.keys_per_block;
  uint64_t tiles = a.tile_end - a.tile_begin;
  w.tile0 = a.tile_begin + tiles * bx / gx;
  w.tile1 = a.tile_begin + tiles * (bx + 1) / gx;
  return w;
}

// Index of a point of a 16x16-tiled matrix with `cols` columns (a multiple of 16): each 16x16
// tile is 256 contiguous bytes, so every tensor-core fragment load starts 256-byte aligned.
VEIL_HD uint32_t Tiled16(uint32_t r, uint32_t c, uint32_t cols) {
  return ((r >> 4) * (cols >> 4) + (c >> 4)) * 256u + (r & 15u) * 16u + (c & 15u);
}

// Signed base-256 digits of a share: y = sum_p 2^(8p) d_p (mod 2^32) with every d_p in
// [-128, 127], so that both GEMM operands are signed INT8 (the table is signed). The top digit's
// carry falls off mod 2^32, which is all the answer needs.
VEIL_HD void SignedDigits(uint32_t y, int8_t d[4]) {
  for (int p = 0; p < 4; ++p) {
    d[p] = static_cast<int8_t>(static_cast<uint8_t>(y & 0xffu));
    y = (y - static_cast<uint32_t>(static_cast<int32_t>(d[p]))) >> 8;
  }
}

// ---- Phases -----------------------------------------------------------------------------------

// Zeroes the block accumulators.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhasePrologue(Runner& run, const LaunchArgs& a, const BlockShared& s) {
  run.Phase(static_cast<uint32_t>(a.keys_per_block) * a.row_words,
            [&](uint32_t i) { s.acc[i] = 0; });
}

// Writes the shares of one finished leaf into the tile's shares (row-major rows x K).
VEIL_HD void StoreLeafShares(const LaunchArgs& a, const dpf::AesKeys& aes, const PackedKey& key,
                             Block node, uint32_t leaf_in_tile, int k, uint32_t* shares) {
  const uint64_t first_point = static_cast<uint64_t>(leaf_in_tile) << key.leaf_points_log2;
  StoreLeaf(key, aes, node, shares + first_point * a.keys_per_block + k,
            static_cast<uint32_t>(a.keys_per_block));
}

// One item per (key k, leaf j of the tile) whose leaf holds rows: its finished node,
// node_of(k, j, leaf), becomes the leaf's shares. The strategies differ only in where that node
// comes from.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner, class NodeOf>
VEIL_HD void PhaseStoreLeaves(Runner& run, const LaunchArgs& a, const BlockShared& s,
                              const BlockWork& w, uint64_t tile, NodeOf&& node_of) {
  const uint32_t lpt = a.geo.leaves_per_tile();
  run.Phase(lpt * w.keys, [&](uint32_t item) {
    const uint32_t k = item / lpt, j = item % lpt;
    const uint64_t leaf = tile * lpt + j;
    if (leaf >= a.geo.leaves) return;
    StoreLeafShares(a, run.aes(), a.keys[w.key0 + k], node_of(k, j, leaf), j, static_cast<int>(k),
                    s.shares);
  });
}

// Branch-parallel: each (key, leaf) item walks its own path from the root.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseWalkLeaves(Runner& run, const LaunchArgs& a, const BlockShared& s,
                             const BlockWork& w, uint64_t tile) {
  PhaseStoreLeaves(run, a, s, w, tile, [&](uint32_t k, uint32_t, uint64_t leaf) {
    return WalkToLeaf(a.keys[w.key0 + k], run.aes(), leaf);
  });
}

// Bounded window, step 1: brings each key's root-to-subtree path to this tile. Consecutive tiles
// share the path above the highest bit in which their indices differ: on average fewer than two
// node expansions per tile and key.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseAdvancePath(Runner& run, const LaunchArgs& a, const BlockShared& s,
                              const BlockWork& w, uint64_t tile, bool first) {
  const int depth = a.geo.subtree_depth();
  run.Phase(w.keys, [&](uint32_t k) {
    const PackedKey& key = a.keys[w.key0 + k];
    Block* path = s.path + k * (depth + 1);
    int from = 0;  // first depth to recompute
    if (first) {
      path[0] = key.root;
    } else {
      uint64_t diff = tile ^ (tile - 1);
      int high = 0;
      while ((diff >> (high + 1)) != 0) ++high;
      from = depth - 1 - high;
    }
    for (int d = from; d < depth; ++d) {
      bool right = ((tile >> (depth - 1 - d)) & 1) != 0;
      path[d + 1] = CorrectedChild(key, run.aes(), path[d], d, right);
    }
    s.nodes[k * a.geo.leaves_per_tile()] = path[depth];
  });
}

// Bounded window, step 2: expands tile level l of every key's subtree in place. Node i of level l
// sits at slot i << (window_log - l); its children take slot i << (window_log - l) and the one
// half a stride further, both inside the parent's own range: no item touches another's slots.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseExpandTileLevel(Runner& run, const LaunchArgs& a, const BlockShared& s,
                                  const BlockWork& w, int l) {
  const uint32_t nodes = 1u << l;
  const int shift = a.geo.window_log - l;
  const int level = a.geo.subtree_depth() + l;
  run.Phase(nodes * w.keys, [&](uint32_t item) {
    const uint32_t k = item / nodes, i = item % nodes;
    Block* base = s.nodes + k * a.geo.leaves_per_tile();
    const uint32_t slot = i << shift;
    Block left, right;
    ExpandCorrected(a.keys[w.key0 + k], run.aes(), base[slot], level, left, right);
    base[slot] = left;
    base[slot + (1u << (shift - 1))] = right;
  });
}

// Bounded window, step 3: leaves of the subtree -> shares.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseConvertTileLeaves(Runner& run, const LaunchArgs& a, const BlockShared& s,
                                    const BlockWork& w, uint64_t tile) {
  const uint32_t lpt = a.geo.leaves_per_tile();
  PhaseStoreLeaves(run, a, s, w, tile,
                   [&](uint32_t k, uint32_t j, uint64_t) { return s.nodes[k * lpt + j]; });
}

// Level-by-level, leaf kernel: leaves read from the global level buffer -> shares.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseConvertBufferedLeaves(Runner& run, const LaunchArgs& a, const BlockShared& s,
                                        const BlockWork& w, uint64_t tile) {
  PhaseStoreLeaves(run, a, s, w, tile, [&](uint32_t k, uint32_t, uint64_t leaf) {
    return a.level_nodes[static_cast<uint64_t>(w.key0 + k) * a.geo.leaves + leaf];
  });
}

// Table element (row relative to row_offset, column) as the 32-bit word it stands for.
template <bool kInt8>
VEIL_HD uint32_t TableWord(const LaunchArgs& a, uint64_t row, uint32_t c) {
  if (kInt8) return static_cast<uint32_t>(static_cast<int32_t>(a.table_i8[row * a.row_words + c]));
  return a.table[row * a.table_stride + c];
}

// The product of one tile on the CUDA cores: thread t owns column c = t % C (C = min(D, threads))
// and the rows r = t / C + S * i (S = threads / C slices, interleaved so that a warp reads
// consecutive rows: coalesced). Its K accumulators stay in registers (compile-time indices).
template <bool kXor, bool kInt8>
VEIL_HD void MultiplyColumn(const LaunchArgs& a, const BlockShared& s, int keys, uint64_t row0,
                            uint32_t valid, uint32_t first_row, uint32_t slices, uint32_t c,
                            uint32_t acc[kMaxKeysPerBlock]) {
  const int kpb = a.keys_per_block;
  for (uint32_t r = first_row; r < valid; r += slices) {
    const uint32_t t = TableWord<kInt8>(a, row0 + r - a.row_offset, c);
    const uint32_t* sh = s.shares + r * kpb;
    VEIL_GPU_UNROLL
    for (int k = 0; k < kMaxKeysPerBlock; ++k) {
      if (k < keys) acc[k] = kXor ? (acc[k] ^ (sh[k] & t)) : (acc[k] + sh[k] * t);
    }
  }
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseMultiplyTile(Runner& run, const LaunchArgs& a, const BlockShared& s,
                               const BlockWork& w, uint64_t tile) {
  const uint32_t threads = run.threads();
  const uint32_t cols = a.row_words < threads ? a.row_words : threads;
  const uint32_t slices = threads / cols;
  const uint64_t row0 = tile * a.geo.rows_per_tile();
  uint32_t lo = 0;
  const uint32_t valid = a.TileRows(tile, &lo);
  run.Phase(threads, [&](uint32_t t) {
    if (t >= slices * cols) return;
    // This thread's first row at or after lo.
    uint32_t first = t / cols;
    if (first < lo) first += (lo - first + slices - 1) / slices * slices;
    for (uint32_t c = t % cols; c < a.row_words; c += cols) {
      uint32_t acc[kMaxKeysPerBlock] = {};
      if (a.table_kind == TableKind::kWords) {
        if (a.geo.xor_output) {
          MultiplyColumn<true, false>(a, s, w.keys, row0, valid, first, slices, c, acc);
        } else {
          MultiplyColumn<false, false>(a, s, w.keys, row0, valid, first, slices, c, acc);
        }
      } else if (a.geo.xor_output) {
        MultiplyColumn<true, true>(a, s, w.keys, row0, valid, first, slices, c, acc);
      } else {
        MultiplyColumn<false, true>(a, s, w.keys, row0, valid, first, slices, c, acc);
      }
      VEIL_GPU_UNROLL
      for (int k = 0; k < kMaxKeysPerBlock; ++k) {
        if (k < w.keys) {
          if (a.geo.xor_output) {
            run.AtomicXor(&s.acc[k * a.row_words + c], acc[k]);
          } else {
            run.AtomicAdd(&s.acc[k * a.row_words + c], acc[k]);
          }
        }
      }
    }
  });
}

// Tensor cores, step 1: shares -> signed byte planes (A, M_pad x k_pad, row m = plane * K + key)
// and the table tile -> B (k_pad x n_pad), both 16x16-tiled and zero padded.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseStageInt8(Runner& run, const LaunchArgs& a, const BlockShared& s,
                            const BlockWork& w, uint64_t tile) {
  const uint32_t rpt = a.geo.rows_per_tile();
  const uint32_t kp = RoundUp16(rpt), n = RoundUp16(a.row_words);
  const int kpb = a.keys_per_block;
  const uint64_t row0 = tile * rpt;
  uint32_t lo = 0;
  const uint32_t valid = a.TileRows(tile, &lo);
  const uint32_t plane_items = kp * kpb;
  const uint32_t table_items = kp * n;
  run.Phase(plane_items > table_items ? plane_items : table_items, [&](uint32_t i) {
    if (i < plane_items) {
      const uint32_t r = i / kpb;
      const int k = static_cast<int>(i % kpb);
      int8_t d[4] = {0, 0, 0, 0};
      if (k < w.keys && r >= lo && r < valid) SignedDigits(s.shares[r * kpb + k], d);
      for (int p = 0; p < 4; ++p) s.planes[Tiled16(p * kpb + k, r, kp)] = d[p];
    }
    if (i < table_items) {
      const uint32_t r = i / n, c = i % n;
      int8_t v = 0;
      if (r >= lo && r < valid && c < a.row_words) {
        v = a.table_i8[(row0 + r - a.row_offset) * a.row_words + c];
      }
      s.b_tile[Tiled16(r, c, n)] = v;
    }
  });
}

// Tensor cores, step 2 on the host (the device runs wmma on the same tiles): C = A . B, int32.
// Within one tile |C| <= rows_per_tile * 128 * 128 <= 2^24: no int32 overflow before step 3.
VEIL_HD void Int8TileProductItem(const LaunchArgs& a, const BlockShared& s, uint32_t item) {
  const uint32_t kp = RoundUp16(a.geo.rows_per_tile()), n = RoundUp16(a.row_words);
  const uint32_t m = item / n, c = item % n;
  int32_t sum = 0;
  for (uint32_t r = 0; r < kp; ++r) {
    sum += static_cast<int32_t>(s.planes[Tiled16(m, r, kp)]) *
           static_cast<int32_t>(s.b_tile[Tiled16(r, c, n)]);
  }
  s.c_tile[m * n + c] = sum;
}

// Tensor cores, step 3: acc[k][c] += sum_p 2^(8p) C[p * K + k][c] (mod 2^32, wrapping).
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseAccumulatePlanes(Runner& run, const LaunchArgs& a, const BlockShared& s,
                                   const BlockWork& w) {
  const uint32_t n = RoundUp16(a.row_words);
  const int kpb = a.keys_per_block;
  run.Phase(static_cast<uint32_t>(w.keys) * a.row_words, [&](uint32_t i) {
    const uint32_t k = i / a.row_words, c = i % a.row_words;
    uint32_t sum = 0;
    for (int p = 0; p < 4; ++p) {
      sum += static_cast<uint32_t>(s.c_tile[(p * kpb + k) * n + c]) << (8 * p);
    }
    s.acc[k * a.row_words + c] += sum;
  });
}

// Adds the block's accumulators into the global answers.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void PhaseFlush(Runner& run, const LaunchArgs& a, const BlockShared& s,
                        const BlockWork& w) {
  run.Phase(static_cast<uint32_t>(w.keys) * a.row_words, [&](uint32_t i) {
    const uint32_t k = i / a.row_words, c = i % a.row_words;
    uint32_t* dst = &a.out[static_cast<uint64_t>(w.key0 + k) * a.row_words + c];
    if (a.geo.xor_output) {
      run.AtomicXor(dst, s.acc[i]);
    } else {
      run.AtomicAdd(dst, s.acc[i]);
    }
  });
}

// The product of the current tile, on the CUDA cores or the tensor cores.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void MultiplyTile(Runner& run, const LaunchArgs& a, const BlockShared& s,
                          const BlockWork& w, uint64_t tile) {
  if (a.table_kind == TableKind::kInt8TensorCore) {
    PhaseStageInt8(run, a, s, w, tile);
    run.Int8TileProduct(a, s);
    PhaseAccumulatePlanes(run, a, s, w);
  } else {
    PhaseMultiplyTile(run, a, s, w, tile);
  }
}

// ---- Kernel bodies ----------------------------------------------------------------------------

// The whole work of one thread block (x, y) of a grid (gx, gy) for the fused strategies.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void FusedBlock(Runner& run, Body body, const LaunchArgs& a, uint8_t* smem, uint32_t bx,
                        uint32_t gx, uint32_t by) {
  const BlockWork w = MakeBlockWork(a, bx, gx, by);
  if (w.keys <= 0 || w.tile0 >= w.tile1) return;  // uniform across the block
  const SharedLayout layout =
      MakeSharedLayout(a.geo, a.keys_per_block, a.row_words, body, a.table_kind);
  const BlockShared s(smem, layout);
  PhasePrologue(run, a, s);
  for (uint64_t tile = w.tile0; tile < w.tile1; ++tile) {
    if (body == Body::kBranchParallel) {
      PhaseWalkLeaves(run, a, s, w, tile);
    } else if (body == Body::kLevelByLevelLeaves) {
      PhaseConvertBufferedLeaves(run, a, s, w, tile);
    } else {
      PhaseAdvancePath(run, a, s, w, tile, tile == w.tile0);
      for (int l = 0; l < a.geo.window_log; ++l) PhaseExpandTileLevel(run, a, s, w, l);
      PhaseConvertTileLeaves(run, a, s, w, tile);
    }
    MultiplyTile(run, a, s, w, tile);
  }
  PhaseFlush(run, a, s, w);
}

// Level-by-level: node i of level l sits at slot i << (levels - l) of its key's buffer (the root
// at slot 0); its children take that slot and the one half a stride further, the right one only
// where a needed leaf lies below it. One launch per level; items run over all keys' nodes.
VEIL_HD void ExpandBufferedItem(const LaunchArgs& a, const dpf::AesKeys& aes, int l,
                                uint64_t item) {
  const uint64_t nodes = a.geo.nodes_at_level(l);
  const uint64_t k = item / nodes, i = item % nodes;
  Block* base = a.level_nodes + k * a.geo.leaves;
  const int shift = a.geo.levels - l;
  const uint64_t slot = i << shift;
  Block left, right;
  ExpandCorrected(a.keys[k], aes, base[slot], l, left, right);
  base[slot] = left;
  if (2 * i + 1 < a.geo.nodes_at_level(l + 1)) base[slot + (uint64_t{1} << (shift - 1))] = right;
}

// One block of a level-by-level launch: level < 0 stores the roots, else expands that level.
// Block x of gx takes a contiguous share of the level's items.
VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void LevelBlock(Runner& run, const LaunchArgs& a, int level, uint32_t bx, uint32_t gx) {
  const uint64_t total =
      static_cast<uint64_t>(a.num_keys) * (level < 0 ? 1 : a.geo.nodes_at_level(level));
  const uint64_t begin = total * bx / gx, end = total * (bx + 1) / gx;
  if (begin >= end) return;
  run.Phase(static_cast<uint32_t>(end - begin), [&](uint32_t i) {
    if (level < 0) {
      a.level_nodes[(begin + i) * a.geo.leaves] = a.keys[begin + i].root;
    } else {
      ExpandBufferedItem(a, run.aes(), level, begin + i);
    }
  });
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_PHASES_H_
