// The GPU kernels' phases, run on the host, against the CPU evaluator (dpf::EvalDotMulti) and a
// plain per-leaf reference, bit for bit: every strategy, PRG, output type, INT8 tensor-core
// decomposition and row split, on awkward sizes and on random ones (the seed is printed).
#include "gpu/host_run.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "dpf/prg_portable.h"
#include "dpf/testing/seeded_keys.h"
#include "gpu/internal/launch_plan.h"
#include "gpu/internal/phases.h"
#include "gpu/internal/tree.h"
#include "gtest/gtest.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

using dpf::DpfParameters;
using dpf::OutputType;
using dpf::Prg;

using testing::kAllPrgs;
using testing::kAllStrategies;

uint64_t TestSeed() { return testing::TestSeed("host_run_test"); }

struct Table {
  std::vector<uint32_t> words;
  dpf::TableView view;
};

// Random words; with int8 = true, sign-extended values in -128..127 (an INT8 table).
Table RandomTable(uint64_t rows, uint32_t row_words, std::mt19937_64& rng, bool int8 = false,
                  uint32_t stride = 0) {
  Table t;
  const uint32_t s = stride ? stride : row_words;
  t.words.resize(rows * s);
  for (uint32_t& w : t.words) {
    w = int8 ? static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(rng()))) : rng();
  }
  t.view = {t.words.data(), rows, row_words, stride};
  return t;
}

struct Keys {
  std::vector<dpf::DpfKey> keys;
  std::vector<const dpf::DpfKey*> ptrs;
};

// `count` keys of alternating parties for random points of a domain covering `rows`.
Keys RandomKeys(DpfParameters params, uint64_t rows, int count, std::mt19937_64& rng) {
  params.log_domain = dpf::LogDomainForRows(rows);
  Keys k;
  dpf::SeededRandomForTesting source(rng());
  for (int i = 0; i < count; ++i) {
    uint64_t alpha = rng() % rows;
    uint32_t beta = params.output == OutputType::kXor ? 1 : static_cast<uint32_t>(rng());
    auto pair = dpf::GenerateKeys(params, alpha, beta, source);
    EXPECT_TRUE(pair.ok()) << pair.status();
    k.keys.push_back(i % 2 ? pair->second : pair->first);
  }
  for (const dpf::DpfKey& key : k.keys) k.ptrs.push_back(&key);
  return k;
}

std::vector<uint32_t> CpuAnswer(const Keys& keys, const dpf::TableView& table) {
  std::vector<uint32_t> out(keys.keys.size() * table.row_words);
  absl::Status s = dpf::EvalDotMulti(keys.ptrs, table, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// One EvalDot per key: the CPU batches only keys of one output type, the GPU backend any mix.
std::vector<uint32_t> CpuAnswerPerKey(const Keys& keys, const dpf::TableView& table) {
  std::vector<uint32_t> out(keys.keys.size() * table.row_words);
  for (size_t k = 0; k < keys.keys.size(); ++k) {
    absl::Status s = dpf::EvalDot(
        keys.keys[k], table, absl::MakeSpan(out).subspan(k * table.row_words, table.row_words));
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

std::vector<uint32_t> HostRun(const Keys& keys, const dpf::TableView& table,
                              const HostRunOptions& options) {
  std::vector<uint32_t> out(keys.keys.size() * table.row_words, 0xdeadbeefu);
  absl::Status s = HostRunAnswer(keys.ptrs, table, options, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// The plain definition, one leaf at a time from the root with dpf's own leaf conversion:
// independent of the tiling and of the kernels' leaf code.
std::vector<uint32_t> PlainAnswer(absl::Span<const internal::PackedKey> keys,
                                  const dpf::TableView& table) {
  const dpf::AesKeys aes = dpf::HostAesKeys();
  std::vector<uint32_t> out(keys.size() * table.row_words, 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    const internal::PackedKey& key = keys[k];
    const uint64_t points = uint64_t{1} << key.leaf_points_log2;
    for (uint64_t leaf = 0; leaf * points < table.rows; ++leaf) {
      const dpf::Block node = internal::WalkToLeaf(key, aes, leaf);
      uint32_t values[16];
      dpf::ConvertLeaf(key.prg_id(), aes, node, key.leaf_words, values);
      dpf::FinishLeaf(key.output_type(), key.party == 1, node.control_bit(), key.final_cw,
                      key.leaf_words, values);
      for (uint64_t i = 0; i < points && leaf * points + i < table.rows; ++i) {
        const uint32_t y =
            key.is_xor() ? 0u - ((values[i / 32] >> (i % 32)) & 1u) : values[i];
        const uint32_t* row = table.row(leaf * points + i);
        for (uint32_t c = 0; c < table.row_words; ++c) {
          uint32_t& o = out[k * table.row_words + c];
          o = key.is_xor() ? (o ^ (y & row[c])) : (o + y * row[c]);
        }
      }
    }
  }
  return out;
}

std::string Describe(Strategy s, const DpfParameters& p, uint64_t rows, uint32_t words) {
  return absl::StrCat(std::string(StrategyName(s)), " ", std::string(dpf::PrgName(p.prg)), " ",
                      dpf::OutputName(p), " rows=", rows, " words=", words);
}

DpfParameters Params(Prg prg, OutputType output, int leaf_words_log2 = 4) {
  DpfParameters p;
  p.prg = prg;
  p.output = output;
  p.leaf_words_log2 = leaf_words_log2;
  return p;
}

TEST(SignedDigits, RecomposeModulo2To32) {
  std::mt19937_64 rng(TestSeed());
  std::vector<uint32_t> values = {0,          1,          127,        128,        255,       256,
                                  0x7fffffff, 0x80000000, 0xffffffff, 0x80808080, 0x7f7f7f7f};
  for (int i = 0; i < 10000; ++i) values.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t y : values) {
    int8_t d[4];
    internal::SignedDigits(y, d);
    uint32_t back = 0;
    for (int p = 0; p < 4; ++p)
      back += static_cast<uint32_t>(static_cast<int32_t>(d[p])) << (8 * p);
    EXPECT_EQ(back, y);
  }
}

TEST(TreeSteps, CorrectedChildMatchesExpandCorrected) {
  std::mt19937_64 rng(TestSeed() + 1);
  const dpf::AesKeys aes = dpf::HostAesKeys();
  for (Prg prg : kAllPrgs) {
    internal::PackedKey key{};
    key.prg = static_cast<uint8_t>(prg);
    key.levels = 3;
    key.cw_seed[1] = {rng(), rng()};
    key.cw_right_bits = 2;
    for (int i = 0; i < 20; ++i) {
      dpf::Block node{rng(), rng()};
      dpf::Block left, right;
      internal::ExpandCorrected(key, aes, node, 1, left, right);
      dpf::Block raw_left, raw_right;  // the same through dpf's own expansion
      dpf::ExpandNode(prg, aes, node, raw_left, raw_right);
      dpf::CorrectChildren(node, key.cw_seed[1], key.cw_right(1), raw_left, raw_right);
      EXPECT_EQ(left, raw_left) << dpf::PrgName(prg);
      EXPECT_EQ(right, raw_right) << dpf::PrgName(prg);
      EXPECT_EQ(internal::CorrectedChild(key, aes, node, 1, false), left) << dpf::PrgName(prg);
      EXPECT_EQ(internal::CorrectedChild(key, aes, node, 1, true), right) << dpf::PrgName(prg);
    }
  }
}

// Every strategy x PRG x output type on awkward row counts and widths, against EvalDotMulti.
TEST(HostRun, EqualsCpuEvalDotMultiOnEdgeSizes) {
  std::mt19937_64 rng(TestSeed() + 2);
  const std::vector<uint64_t> rows_list = {1, 2, 15, 17, 1000, 1023, 1025};
  const std::vector<uint32_t> words_list = {1, 3, 16, 17};
  for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
    for (Prg prg : kAllPrgs) {
      for (uint64_t rows : rows_list) {
        const uint32_t words = words_list[rng() % words_list.size()];
        const DpfParameters params = Params(prg, output);
        Table table = RandomTable(rows, words, rng);
        Keys keys = RandomKeys(params, rows, 3, rng);
        const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
        for (Strategy s : kAllStrategies) {
          HostRunOptions options;
          options.strategy = s;
          options.keys_per_block = 2;  // two key groups, the second one partial
          EXPECT_EQ(HostRun(keys, table.view, options), cpu) << Describe(s, params, rows, words);
        }
      }
    }
  }
}

TEST(HostRun, EveryRowWidthAndLeafWidth) {
  std::mt19937_64 rng(TestSeed() + 3);
  for (uint32_t words : {1u, 2u, 3u, 16u, 17u, 33u}) {
    for (int leaf_log : {0, 1, 3, 4}) {
      const uint64_t rows = 1 + rng() % 700;
      const DpfParameters params = Params(Prg::kChaCha12, OutputType::kAdditive, leaf_log);
      Table table = RandomTable(rows, words, rng, false, words + (words % 2));
      Keys keys = RandomKeys(params, rows, 5, rng);
      const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
      for (Strategy s : kAllStrategies) {
        HostRunOptions options;
        options.strategy = s;
        EXPECT_EQ(HostRun(keys, table.view, options), cpu) << Describe(s, params, rows, words);
      }
    }
  }
}

// Several full tiles: exercises the bounded window's path reuse across consecutive tiles and
// blocks that start mid-range.
TEST(HostRun, ManyTilesPowersOfTwoPlusMinusOne) {
  std::mt19937_64 rng(TestSeed() + 4);
  for (uint64_t rows : {(uint64_t{1} << 13) - 1, (uint64_t{1} << 13) + 1}) {
    for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
      const DpfParameters params = Params(Prg::kSipHash, output);
      Table table = RandomTable(rows, 2, rng);
      Keys keys = RandomKeys(params, rows, 9, rng);
      const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
      for (Strategy s : kAllStrategies) {
        HostRunOptions options;
        options.strategy = s;
        options.blocks_per_group = 5;
        EXPECT_EQ(HostRun(keys, table.view, options), cpu) << Describe(s, params, rows, 2);
      }
    }
  }
}

TEST(HostRun, MixedOutputsAndPrgsInOneBatch) {
  std::mt19937_64 rng(TestSeed() + 5);
  const uint64_t rows = 777;
  Table table = RandomTable(rows, 5, rng);
  Keys keys;
  for (OutputType output : {OutputType::kXor, OutputType::kAdditive}) {
    for (Prg prg : kAllPrgs) {
      Keys one = RandomKeys(Params(prg, output, output == OutputType::kXor ? 4 : 2), rows, 1, rng);
      keys.keys.push_back(one.keys[0]);
    }
  }
  for (const dpf::DpfKey& key : keys.keys) keys.ptrs.push_back(&key);
  const std::vector<uint32_t> cpu = CpuAnswerPerKey(keys, table.view);
  for (Strategy s : kAllStrategies) {
    HostRunOptions options;
    options.strategy = s;
    EXPECT_EQ(HostRun(keys, table.view, options), cpu) << StrategyName(s);
  }
}

// The INT8 byte-plane path (what the tensor cores compute) equals the plain product.
TEST(HostRun, Int8BytePlanesEqualPlainProduct) {
  std::mt19937_64 rng(TestSeed() + 6);
  for (uint64_t rows : {1ull, 17ull, 1000ull, 3000ull}) {
    for (uint32_t words : {1u, 3u, 16u, 17u}) {
      for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
        const DpfParameters params = Params(Prg::kChaCha8, output);
        Table table = RandomTable(rows, words, rng, /*int8=*/true);
        Keys keys = RandomKeys(params, rows, 7, rng);
        const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
        for (Strategy s : kAllStrategies) {
          HostRunOptions options;
          options.strategy = s;
          options.dtype = TableDtype::kInt8;
          EXPECT_EQ(HostRun(keys, table.view, options), cpu)
              << "int8 " << Describe(s, params, rows, words);
        }
      }
    }
  }
}

TEST(HostRun, Int8RejectsWideWords) {
  std::vector<uint32_t> words = {1, 2, 300};
  dpf::TableView table{words.data(), 3, 1, 0};
  std::mt19937_64 rng(TestSeed() + 7);
  Keys keys = RandomKeys(Params(Prg::kAes128, OutputType::kAdditive), 3, 1, rng);
  std::vector<uint32_t> out(1);
  HostRunOptions options;
  options.dtype = TableDtype::kInt8;
  absl::Status s = HostRunAnswer(keys.ptrs, table, options, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside -128..127"), std::string::npos) << s;
}

// A row split over several simulated devices, partial answers combined as NCCL does.
TEST(HostRun, RowSplitEqualsWholeTable) {
  std::mt19937_64 rng(TestSeed() + 8);
  const uint64_t rows = 5 * internal::kSliceAlignRows + 123;
  for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
    const DpfParameters params = Params(Prg::kChaCha20, output);
    Table table = RandomTable(rows, 3, rng);
    Keys keys = RandomKeys(params, rows, 4, rng);
    const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
    for (Strategy s : kAllStrategies) {
      for (int slices : {2, 3, 8}) {
        HostRunOptions options;
        options.strategy = s;
        options.slices = slices;
        EXPECT_EQ(HostRun(keys, table.view, options), cpu)
            << Describe(s, params, rows, 3) << " slices=" << slices;
      }
    }
  }
}

// A row range (pir::Backend::AnswerRange): keys over the range's rows only, the range starting
// and ending inside tiles and inside the row split's slices, against the CPU on the range's rows.
TEST(HostRun, RowRangeEqualsCpuOnTheRangeRows) {
  std::mt19937_64 rng(TestSeed() + 13);
  const uint64_t rows = 3 * internal::kSliceAlignRows + 55;
  Table table = RandomTable(rows, 5, rng, /*int8=*/true);
  struct Range {
    uint64_t first, rows;
  };
  const Range ranges[] = {{0, 1},
                          {7, 1000},
                          {internal::kSliceAlignRows - 3, 9},
                          {333, 2 * internal::kSliceAlignRows + 1},
                          {rows - 77, 77}};
  for (const Range& r : ranges) {
    dpf::TableView view = table.view;
    view.words = table.view.row(r.first);
    view.rows = r.rows;
    view.stride_words = table.view.stride();
    for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
      const DpfParameters params = Params(Prg::kChaCha12, output, 2);
      Keys keys = RandomKeys(params, r.rows, 3, rng);
      const std::vector<uint32_t> cpu = CpuAnswer(keys, view);
      for (Strategy s : kAllStrategies) {
        for (TableDtype dtype : {TableDtype::kUint32, TableDtype::kInt8}) {
          for (int slices : {1, 3}) {
            HostRunOptions options;
            options.strategy = s;
            options.dtype = dtype;
            options.slices = slices;
            options.range_first_row = r.first;
            options.range_rows = r.rows;
            EXPECT_EQ(HostRun(keys, table.view, options), cpu)
                << "rows [" << r.first << ", +" << r.rows << ") "
                << Describe(s, params, r.rows, 5) << " " << TableDtypeName(dtype)
                << " slices=" << slices;
          }
        }
      }
    }
  }
}

TEST(HostRun, RejectsRangesOutsideTheTable) {
  std::mt19937_64 rng(TestSeed() + 14);
  Table table = RandomTable(100, 2, rng);
  Keys keys = RandomKeys(Params(Prg::kChaCha12, OutputType::kAdditive), 10, 1, rng);
  std::vector<uint32_t> out(2);
  for (auto [first, count] : {std::pair<uint64_t, uint64_t>{100, 1}, {95, 10}, {1, 100}}) {
    HostRunOptions options;
    options.range_first_row = first;
    options.range_rows = count;
    absl::Status s = HostRunAnswer(keys.ptrs, table.view, options, absl::MakeSpan(out));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << first << " +" << count;
    EXPECT_NE(s.message().find("outside the table"), std::string::npos) << s;
  }
  HostRunOptions fits;
  fits.range_first_row = 90;
  fits.range_rows = 10;
  EXPECT_TRUE(HostRunAnswer(keys.ptrs, table.view, fits, absl::MakeSpan(out)).ok());
  fits.range_rows = 3;  // the keys' domain (made for 10 rows) does not fit 3 rows
  EXPECT_EQ(HostRunAnswer(keys.ptrs, table.view, fits, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

// Every block on kBlockThreads threads with real barriers (the device's schedule): deadlocks on a
// non-uniform phase sequence, and ThreadSanitizer builds report races between items of a phase.
TEST(HostRun, ThreadedBlocksEqualCpu) {
  std::mt19937_64 rng(TestSeed() + 12);
  const uint64_t rows = 2 * internal::kSliceAlignRows + 77;
  for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
    Table table = RandomTable(rows, 17, rng, /*int8=*/true);
    Keys keys = RandomKeys(Params(Prg::kAes128, output, 3), rows, 5, rng);
    const std::vector<uint32_t> cpu = CpuAnswer(keys, table.view);
    for (Strategy s : kAllStrategies) {
      for (TableDtype dtype : {TableDtype::kUint32, TableDtype::kInt8}) {
        HostRunOptions options;
        options.strategy = s;
        options.dtype = dtype;
        options.keys_per_block = 3;
        options.blocks_per_group = 2;
        options.slices = 2;
        options.threaded = true;
        EXPECT_EQ(HostRun(keys, table.view, options), cpu)
            << "threaded " << Describe(s, Params(Prg::kAes128, output, 3), rows, 17) << " "
            << TableDtypeName(dtype);
      }
    }
  }
}

// Random correction words (not from GenerateKeys) against the plain per-leaf walk: the tree
// arithmetic holds for any key material, not just well-formed keys.
TEST(HostRun, RandomKeyMaterialEqualsPlainWalk) {
  std::mt19937_64 rng(TestSeed() + 9);
  for (int trial = 0; trial < 12; ++trial) {
    const uint64_t rows = 1 + rng() % 5000;
    const uint32_t words = 1 + rng() % 20;
    const bool xor_output = trial % 2;
    const int leaf_log = xor_output ? 7 : static_cast<int>(rng() % 5);
    const int log_domain = dpf::LogDomainForRows(rows);
    std::vector<internal::PackedKey> keys(1 + rng() % 11);
    for (internal::PackedKey& k : keys) {
      k = internal::PackedKey{};
      k.root = {rng(), rng()};
      for (dpf::Block& cw : k.cw_seed) cw = {rng(), rng()};
      for (uint32_t& w : k.final_cw) w = static_cast<uint32_t>(rng());
      k.cw_right_bits = rng();
      k.prg = static_cast<uint8_t>(kAllPrgs[rng() % 5]);
      k.output = static_cast<uint8_t>(xor_output ? OutputType::kXor : OutputType::kAdditive);
      k.party = rng() % 2;
      k.log_domain = static_cast<uint8_t>(log_domain);
      k.leaf_points_log2 = static_cast<uint8_t>(leaf_log);
      k.levels = static_cast<uint8_t>(log_domain > leaf_log ? log_domain - leaf_log : 0);
      k.leaf_words = static_cast<uint8_t>(xor_output ? 4 : 1 << leaf_log);
    }
    Table table = RandomTable(rows, words, rng);
    const std::vector<uint32_t> plain = PlainAnswer(keys, table.view);
    for (Strategy s : kAllStrategies) {
      HostRunOptions options;
      options.strategy = s;
      options.keys_per_block = 1 + static_cast<int>(rng() % 8);
      options.blocks_per_group = 1 + static_cast<int>(rng() % 7);
      std::vector<uint32_t> out(keys.size() * words);
      ASSERT_TRUE(HostRunAnswer(keys, table.view, options, absl::MakeSpan(out)).ok());
      EXPECT_EQ(out, plain) << "trial " << trial << " " << StrategyName(s) << " rows=" << rows;
    }
  }
}

TEST(HostRun, RejectsMismatchedKeysAndOutput) {
  std::mt19937_64 rng(TestSeed() + 10);
  Table table = RandomTable(100, 4, rng);
  Keys keys = RandomKeys(Params(Prg::kAes128, OutputType::kAdditive), 1000, 1, rng);
  std::vector<uint32_t> out(4);
  absl::Status s = HostRunAnswer(keys.ptrs, table.view, {}, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("log domain"), std::string::npos) << s;
  Keys fits = RandomKeys(Params(Prg::kAes128, OutputType::kAdditive), 100, 1, rng);
  std::vector<uint32_t> short_out(3);
  s = HostRunAnswer(fits.ptrs, table.view, {}, absl::MakeSpan(short_out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// The bounded window's memory does not grow with the table: only the root-to-tile path does
// (16 bytes per level and key), so a 2^36-row table needs barely more than a 2^16-row one.
TEST(LaunchPlan, BoundedWindowMemoryIsLogarithmic) {
  auto bytes = [](int log_rows) {
    internal::PackedKey key{};
    key.log_domain = static_cast<uint8_t>(log_rows);
    key.leaf_points_log2 = 4;
    key.leaf_words = 16;
    key.levels = static_cast<uint8_t>(log_rows - 4);
    const internal::Geometry geo = internal::MakeGeometry(key, uint64_t{1} << log_rows);
    return internal::MakeSharedLayout(geo, 8, 16, internal::Body::kBoundedWindow,
                                      internal::TableKind::kWords)
        .bytes;
  };
  EXPECT_LE(bytes(36) - bytes(16), 20u * 8 * 16 + 128);
  EXPECT_LT(bytes(36), 64u * 1024);
}

TEST(LaunchPlan, KeysPerBlockShrinksToFitSharedMemory) {
  internal::PackedKey key{};
  key.levels = 16;
  key.leaf_points_log2 = 4;
  key.leaf_words = 16;
  const internal::Geometry geo = internal::MakeGeometry(key, uint64_t{1} << 20);
  EXPECT_EQ(geo.rows_per_tile(), 1024u);
  EXPECT_EQ(geo.tiles, 1024u);
  auto k = internal::ChooseKeysPerBlock(geo, 16, internal::Body::kBoundedWindow,
                                        internal::TableKind::kInt8TensorCore, 8, 227 * 1024);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, 8);
  k = internal::ChooseKeysPerBlock(geo, 4096, internal::Body::kBoundedWindow,
                                   internal::TableKind::kWords, 8, 48 * 1024);
  ASSERT_TRUE(k.ok());
  EXPECT_LT(*k, 8);
  k = internal::ChooseKeysPerBlock(geo, 1 << 20, internal::Body::kBoundedWindow,
                                   internal::TableKind::kWords, 8, 48 * 1024);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace veil::gpu
