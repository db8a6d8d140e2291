#include "dpf/eval.h"

#include <sodium.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "dpf/kernels.h"

namespace veil::dpf {
namespace {

// Rows covered by one window of EvalDot: the window's table slice (256 KiB at 16 words) stays in
// L2 while every key of the batch multiplies into it.
constexpr int kDotWindowPointsLog2 = 12;
// Keys whose leaf values are held at once per window (the rest wait for the next group).
constexpr int kDotKeyGroup = 32;

// Walks one key's tree a window at a time: a window is the subtree of 2^window_levels leaves
// under one node at depth levels - window_levels. The path from the root to the current window's
// root is cached, so each tree node is expanded once over a left-to-right sweep. Memory:
// O(2^window_levels + levels) blocks, never the whole domain.
class WindowWalker {
 public:
  WindowWalker(const DpfKey& key, const Kernels& kernels, int max_window_levels)
      : key_(key),
        kernels_(kernels),
        levels_(key.params().levels()),
        window_levels_(std::min(max_window_levels, levels_)),
        top_(levels_ - window_levels_),
        words_(key.params().leaf_block_words()),
        path_(top_ + 1),
        a_(size_t{1} << window_levels_),
        b_(size_t{1} << window_levels_) {
    path_[0] = key.root();
  }
  ~WindowWalker() {
    sodium_memzero(path_.data(), path_.size() * sizeof(Block));
    sodium_memzero(a_.data(), a_.size() * sizeof(Block));
    sodium_memzero(b_.data(), b_.size() * sizeof(Block));
  }

  int window_levels() const { return window_levels_; }
  uint64_t windows() const { return uint64_t{1} << top_; }
  size_t values_per_window() const { return (size_t{1} << window_levels_) * words_; }

  // Writes the finished leaf words of window j (leaves j * 2^window_levels ...) to values.
  void Window(uint64_t j, uint32_t* values) {
    int depth = 1;
    while (depth < valid_depth_ && (j >> (top_ - depth)) == (cached_ >> (top_ - depth))) ++depth;
    for (; depth <= top_; ++depth) {
      Block children[2];
      const int level = depth - 1;
      kernels_.expand_level(key_.params().prg, &path_[depth - 1], 1, key_.cw_seed()[level],
                            key_.cw_right()[level], children);
      path_[depth] = children[(j >> (top_ - depth)) & 1];
    }
    cached_ = j;
    valid_depth_ = top_ + 1;

    Block* cur = a_.data();
    Block* next = b_.data();
    cur[0] = path_[top_];
    size_t n = 1;
    for (int level = top_; level < levels_; ++level, n *= 2) {
      kernels_.expand_level(key_.params().prg, cur, n, key_.cw_seed()[level],
                            key_.cw_right()[level], next);
      std::swap(cur, next);
    }
    kernels_.convert_leaves(key_.params().prg, cur, n, words_, key_.params().output,
                            key_.party() == 1, key_.final_cw().data(), values);
  }

 private:
  const DpfKey& key_;
  const Kernels& kernels_;
  const int levels_, window_levels_, top_, words_;
  std::vector<Block> path_;
  int valid_depth_ = 1;
  uint64_t cached_ = 0;
  std::vector<Block> a_, b_;
};

int DotWindowLevels(const DpfParameters& params) {
  return std::max(0, kDotWindowPointsLog2 - params.leaf_points_log2());
}

// Answers keys for the windows [first, last) into acc (keys x row_words, zeroed by the caller).
void DotWindows(absl::Span<const DpfKey* const> keys, const TableView& table, uint64_t first,
                uint64_t last, const Kernels& kernels, uint32_t* acc) {
  const DpfParameters& params = keys[0]->params();
  std::vector<WindowWalker> walkers;
  walkers.reserve(keys.size());
  for (const DpfKey* key : keys) walkers.emplace_back(*key, kernels, DotWindowLevels(params));
  const int window_levels = walkers[0].window_levels();
  const uint64_t points_per_window = uint64_t{1} << (window_levels + params.leaf_points_log2());
  const size_t group = std::min<size_t>(keys.size(), kDotKeyGroup);
  const size_t stride = walkers[0].values_per_window();
  std::vector<uint32_t> values(group * stride);
  std::vector<const uint32_t*> y(group);
  for (size_t g = 0; g < group; ++g) y[g] = values.data() + g * stride;
  const auto mac = params.output == OutputType::kXor ? kernels.mac_xor : kernels.mac_add;

  for (uint64_t w = first; w < last; ++w) {
    const uint64_t first_row = w * points_per_window;
    const size_t nrows = std::min<uint64_t>(points_per_window, table.rows - first_row);
    for (size_t k0 = 0; k0 < keys.size(); k0 += group) {
      const size_t kn = std::min(group, keys.size() - k0);
      for (size_t k = 0; k < kn; ++k) walkers[k0 + k].Window(w, values.data() + k * stride);
      mac(y.data(), static_cast<int>(kn), table.row(first_row), table.stride(), nrows,
          table.row_words, acc + k0 * table.row_words);
    }
  }
  sodium_memzero(values.data(), values.size() * sizeof(uint32_t));
}

}  // namespace

absl::StatusOr<uint32_t> EvalPoint(const DpfKey& key, uint64_t x) {
  const DpfParameters& params = key.params();
  if (x >= params.domain_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("point %d outside the domain of 2^%d points", x, params.log_domain));
  }
  const Kernels& kernels = KernelsFor(ActiveIsa());
  const int levels = params.levels();
  const uint64_t leaf = x >> params.leaf_points_log2();
  Block node = key.root();
  for (int level = 0; level < levels; ++level) {
    Block children[2];
    kernels.expand_level(params.prg, &node, 1, key.cw_seed()[level], key.cw_right()[level],
                         children);
    node = children[(leaf >> (levels - 1 - level)) & 1];
  }
  uint32_t values[16];
  kernels.convert_leaves(params.prg, &node, 1, params.leaf_block_words(), params.output,
                         key.party() == 1, key.final_cw().data(), values);
  const uint64_t offset = x & ((uint64_t{1} << params.leaf_points_log2()) - 1);
  uint32_t out = params.output == OutputType::kXor ? (values[offset / 32] >> (offset % 32)) & 1
                                                   : values[offset];
  sodium_memzero(values, sizeof(values));
  sodium_memzero(&node, sizeof(node));
  return out;
}

absl::Status EvalFullWindowed(const DpfKey& key, const LeafConsumer& consume, int window_log) {
  if (window_log < 0 || window_log > 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window log %d out of range [0, 20]", window_log));
  }
  WindowWalker walker(key, KernelsFor(ActiveIsa()), window_log);
  std::vector<uint32_t> values(walker.values_per_window());
  for (uint64_t j = 0; j < walker.windows(); ++j) {
    walker.Window(j, values.data());
    consume(j << walker.window_levels(), values);
  }
  sodium_memzero(values.data(), values.size() * sizeof(uint32_t));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> EvalFull(const DpfKey& key) {
  const DpfParameters& params = key.params();
  const bool xor_output = params.output == OutputType::kXor;
  const uint64_t domain = params.domain_size();
  std::vector<uint32_t> out(xor_output ? std::max<uint64_t>(1, domain / 32) : domain);
  const uint64_t leaf_words = params.leaf_block_words();
  absl::Status status = EvalFullWindowed(key, [&](uint64_t first_leaf,
                                                  absl::Span<const uint32_t> words) {
    const uint64_t begin = first_leaf * leaf_words;
    const uint64_t n = std::min<uint64_t>(words.size(), out.size() - begin);
    std::copy(words.begin(), words.begin() + n, out.begin() + begin);
  });
  if (!status.ok()) return status;
  if (xor_output && domain < 32) out[0] &= (uint32_t{1} << domain) - 1;
  return out;
}

absl::Status EvalDot(const DpfKey& key, const TableView& table, absl::Span<uint32_t> out,
                     int threads) {
  const DpfKey* keys[1] = {&key};
  return EvalDotMulti(keys, table, out, threads);
}

absl::Status EvalDotMulti(absl::Span<const DpfKey* const> keys, const TableView& table,
                          absl::Span<uint32_t> out, int threads) {
  if (table.words == nullptr || table.rows == 0 || table.row_words == 0 ||
      table.stride() < table.row_words) {
    return absl::InvalidArgumentError("EvalDot: empty table or stride shorter than a row");
  }
  if (keys.empty()) return absl::InvalidArgumentError("EvalDot: no keys");
  if (out.size() != keys.size() * table.row_words) {
    return absl::InvalidArgumentError(
        absl::StrFormat("EvalDot: output holds %d words, expected %d keys x %d words", out.size(),
                        keys.size(), table.row_words));
  }
  if (threads < 1) return absl::InvalidArgumentError("EvalDot: threads must be at least 1");
  const DpfParameters& params = keys[0]->params();
  for (const DpfKey* key : keys) {
    const DpfParameters& p = key->params();
    if (absl::Status fits = CheckDomainFitsRows(p, table.rows); !fits.ok()) return fits;
    if (p.output != params.output || p.leaf_words_log2 != params.leaf_words_log2) {
      return absl::InvalidArgumentError("EvalDot: keys of one batch must share the output type");
    }
  }
  const Kernels& kernels = KernelsFor(ActiveIsa());
  const uint64_t points_per_window =
      uint64_t{1} << (std::min(DotWindowLevels(params), params.levels()) +
                      params.leaf_points_log2());
  const uint64_t windows = (table.rows + points_per_window - 1) / points_per_window;
  const int workers = static_cast<int>(std::min<uint64_t>(threads, windows));

  std::vector<std::vector<uint32_t>> partial(workers,
                                             std::vector<uint32_t>(out.size(), 0));
  std::vector<std::thread> pool;
  for (int t = 0; t < workers; ++t) {
    const uint64_t first = windows * t / workers, last = windows * (t + 1) / workers;
    auto work = [&, t, first, last] {
      DotWindows(keys, table, first, last, kernels, partial[t].data());
    };
    if (t + 1 == workers) {
      work();
    } else {
      pool.emplace_back(work);
    }
  }
  for (std::thread& th : pool) th.join();
  std::fill(out.begin(), out.end(), 0);
  for (const std::vector<uint32_t>& p : partial) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = params.output == OutputType::kXor ? out[i] ^ p[i] : out[i] + p[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace veil::dpf
