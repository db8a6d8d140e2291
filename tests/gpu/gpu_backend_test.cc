// The CUDA backend against the CPU backend on the same random keys and tables (faiss's pattern):
// every strategy, PRG and output type, INT8 tensor cores, latency mode, batch splitting and the
// NCCL path, bit for bit. Skips where no GPU is present.
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gpu/backend.h"
#include "gpu/roofline.h"
#include "gtest/gtest.h"
#include "pir/two_server/backend.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

using dpf::DpfParameters;
using dpf::OutputType;
using dpf::Prg;

using testing::kAllPrgs;
using testing::kAllStrategies;

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

uint64_t TestSeed() { return testing::TestSeed("gpu_backend_test"); }

struct Case {
  std::vector<uint32_t> words;
  dpf::TableView table;
  std::vector<dpf::DpfKey> keys;
  std::vector<const dpf::DpfKey*> ptrs;
};

// A table of `rows` x `row_words` (INT8-valued words if int8) and `count` keys of mixed parties;
// PRGs and outputs cycle through `prgs` and `outputs` (the GPU backend takes mixed batches).
Case MakeCase(uint64_t rows, uint32_t row_words, int count, std::vector<Prg> prgs,
              std::vector<OutputType> outputs, bool int8, std::mt19937_64& rng) {
  Case c;
  c.words.resize(rows * row_words);
  for (uint32_t& w : c.words) {
    w = int8 ? static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(rng()))) : rng();
  }
  c.table = {c.words.data(), rows, row_words, 0};
  dpf::SeededRandomForTesting source(rng());
  for (int i = 0; i < count; ++i) {
    DpfParameters p;
    p.prg = prgs[i % prgs.size()];
    p.output = outputs[(i / prgs.size()) % outputs.size()];
    p.log_domain = dpf::LogDomainForRows(rows);
    const uint32_t beta = p.output == OutputType::kXor ? 1 : static_cast<uint32_t>(rng());
    auto pair = dpf::GenerateKeys(p, rng() % rows, beta, source);
    EXPECT_TRUE(pair.ok()) << pair.status();
    c.keys.push_back(i % 2 ? pair->second : pair->first);
  }
  for (const dpf::DpfKey& k : c.keys) c.ptrs.push_back(&k);
  return c;
}

// CPU answers, one key at a time (the CPU batches only keys of one output type).
std::vector<uint32_t> CpuAnswers(const Case& c) {
  std::vector<uint32_t> out(c.keys.size() * c.table.row_words);
  auto cpu = pir::CreateCpuBackend(c.table, 4);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  for (size_t k = 0; k < c.keys.size(); ++k) {
    absl::Status s =
        (*cpu)->Answer(absl::MakeConstSpan(&c.ptrs[k], 1),
                       absl::MakeSpan(out).subspan(k * c.table.row_words, c.table.row_words));
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

std::vector<uint32_t> GpuAnswers(const Case& c, const GpuBackendOptions& options) {
  std::vector<uint32_t> out(c.keys.size() * c.table.row_words, 0xdeadbeefu);
  auto gpu = CreateGpuBackend(c.table, options);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (!gpu.ok()) return out;
  EXPECT_EQ((*gpu)->name(), "gpu");
  absl::Status s = (*gpu)->Answer(c.ptrs, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// One batch mixes all PRGs, both output types and both parties.
TEST(GpuBackend, EveryStrategyAndPrgEqualsCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed());
  const std::vector<std::pair<uint64_t, uint32_t>> sizes = {
      {1, 1}, {2, 3}, {17, 16}, {1000, 17}, {1023, 1}, {1025, 16}, {(1 << 16) + 1, 3}};
  const std::vector<Prg> prgs(std::begin(kAllPrgs), std::end(kAllPrgs));
  for (auto [rows, words] : sizes) {
    Case c = MakeCase(rows, words, 23, prgs, {OutputType::kAdditive, OutputType::kXor}, false, rng);
    const std::vector<uint32_t> cpu = CpuAnswers(c);
    for (Strategy s : kAllStrategies) {
      GpuBackendOptions o;
      o.strategy = s;
      EXPECT_EQ(GpuAnswers(c, o), cpu) << StrategyName(s) << " rows=" << rows << " words=" << words;
    }
  }
}

// Small enough to run under compute-sanitizer (memcheck, racecheck, synccheck) in
// scripts/gpu-check.
TEST(GpuBackend, SmallCaseForSanitizers) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 7);
  Case c = MakeCase(1500, 17, 10, {Prg::kAes128, Prg::kChaCha12},
                    {OutputType::kAdditive, OutputType::kXor}, true, rng);
  const std::vector<uint32_t> cpu = CpuAnswers(c);
  for (Strategy s : kAllStrategies) {
    for (TableDtype dtype : {TableDtype::kUint32, TableDtype::kInt8}) {
      GpuBackendOptions o;
      o.strategy = s;
      o.dtype = dtype;
      o.keys_per_block = 3;
      o.use_nccl = false;  // the sanitizers check our kernels, not NCCL's
      EXPECT_EQ(GpuAnswers(c, o), cpu) << StrategyName(s) << " " << TableDtypeName(dtype);
    }
  }
}

TEST(GpuBackend, Int8TensorCoresEqualCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 1);
  for (auto [rows, words] : std::vector<std::pair<uint64_t, uint32_t>>{
           {1, 1}, {999, 3}, {4097, 16}, {(1 << 18) - 1, 17}}) {
    Case c = MakeCase(rows, words, 13, {Prg::kChaCha12, Prg::kAes128},
                      {OutputType::kAdditive, OutputType::kXor}, true, rng);
    const std::vector<uint32_t> cpu = CpuAnswers(c);
    for (Strategy s : kAllStrategies) {
      GpuBackendOptions o;
      o.strategy = s;
      o.dtype = TableDtype::kInt8;
      EXPECT_EQ(GpuAnswers(c, o), cpu) << "int8 " << StrategyName(s) << " rows=" << rows;
    }
  }
}

// The byte planes' int32 sums wrap modulo 2^32 across tiles: a large table whose every word is
// -128 and shares that are large makes the plain sums overflow many times.
TEST(GpuBackend, Int8WrapAroundAtScale) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 2);
  Case c =
      MakeCase(uint64_t{1} << 20, 16, 16, {Prg::kChaCha12}, {OutputType::kAdditive}, true, rng);
  for (size_t i = 0; i < c.words.size(); i += 3) c.words[i] = static_cast<uint32_t>(-128);
  const std::vector<uint32_t> cpu = CpuAnswers(c);
  GpuBackendOptions o;
  o.dtype = TableDtype::kInt8;
  EXPECT_EQ(GpuAnswers(c, o), cpu);
}

TEST(GpuBackend, LatencyModeBatchSplitAndSmallNodeBuffer) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 3);
  Case c = MakeCase(50001, 5, 37, {Prg::kAes128, Prg::kSipHash},
                    {OutputType::kAdditive, OutputType::kXor}, false, rng);
  const std::vector<uint32_t> cpu = CpuAnswers(c);
  for (Strategy s : kAllStrategies) {
    GpuBackendOptions o;
    o.strategy = s;
    o.single_query_rows = 1;  // one key at a time
    EXPECT_EQ(GpuAnswers(c, o), cpu) << "latency mode " << StrategyName(s);
    o.single_query_rows = uint64_t{1} << 40;
    o.max_batch = 5;  // 37 keys in 8 passes
    o.keys_per_block = 3;
    o.level_buffer_bytes = 50001 * 16 * 2;  // level-by-level: two keys per node-buffer fill
    EXPECT_EQ(GpuAnswers(c, o), cpu) << "split batches " << StrategyName(s);
  }
}

TEST(GpuBackend, AtScale2To20Rows) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 4);
  Case c = MakeCase(uint64_t{1} << 20, 16, 64, {Prg::kChaCha12, Prg::kAes128},
                    {OutputType::kAdditive}, false, rng);
  const std::vector<uint32_t> cpu = CpuAnswers(c);
  for (Strategy s : kAllStrategies) {
    GpuBackendOptions o;
    o.strategy = s;
    EXPECT_EQ(GpuAnswers(c, o), cpu) << StrategyName(s);
  }
}

TEST(GpuBackend, RowSplitAcrossAllDevices) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 5);
  Case c = MakeCase(300007, 7, 9, {Prg::kSipHash, Prg::kChaCha8},
                    {OutputType::kAdditive, OutputType::kXor}, false, rng);
  GpuBackendOptions o;
  o.devices.clear();
  for (int d = 0; d < GpuDeviceCount(); ++d) o.devices.push_back(d);
  auto gpu = GpuBackend::Create(c.table, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::printf("row split over %zu device(s), combined by: %s\n", o.devices.size(),
              (*gpu)->collective().c_str());
  RecordProperty("collective", (*gpu)->collective());
  std::vector<uint32_t> out(c.keys.size() * c.table.row_words);
  ASSERT_TRUE((*gpu)->Answer(c.ptrs, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, CpuAnswers(c)) << o.devices.size() << " devices";
}

// Row ranges (batch-PIR bins served as ranges of one table) on the devices: ranges that start
// and end inside tiles, against the CPU backend's AnswerRange; a bad range is refused.
TEST(GpuBackend, RowRangesEqualCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 8);
  Case whole = MakeCase(70001, 6, 0, {Prg::kChaCha12}, {OutputType::kAdditive}, true, rng);
  auto cpu = pir::CreateCpuBackend(whole.table, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (pir::RowRange range : {pir::RowRange{0, 1}, pir::RowRange{5, 1000},
                              pir::RowRange{1023, 4099}, pir::RowRange{70001 - 999, 999}}) {
    // Keys for the range's rows, over the whole table's words.
    Case keys = MakeCase(range.rows, 6, 11, {Prg::kChaCha12, Prg::kAes128},
                         {OutputType::kAdditive, OutputType::kXor}, true, rng);
    std::vector<uint32_t> expected(keys.keys.size() * 6);
    for (size_t k = 0; k < keys.keys.size(); ++k) {
      ASSERT_TRUE((*cpu)->AnswerRange(absl::MakeConstSpan(&keys.ptrs[k], 1), range,
                                      absl::MakeSpan(expected).subspan(k * 6, 6))
                      .ok());
    }
    for (Strategy s : kAllStrategies) {
      for (TableDtype dtype : {TableDtype::kUint32, TableDtype::kInt8}) {
        GpuBackendOptions o;
        o.strategy = s;
        o.dtype = dtype;
        auto gpu = CreateGpuBackend(whole.table, o);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        std::vector<uint32_t> out(expected.size());
        ASSERT_TRUE((*gpu)->AnswerRange(keys.ptrs, range, absl::MakeSpan(out)).ok());
        EXPECT_EQ(out, expected) << "rows [" << range.first_row << ", +" << range.rows << ") "
                                 << StrategyName(s) << " " << TableDtypeName(dtype);
        EXPECT_EQ((*gpu)->AnswerRange(keys.ptrs, {70000, 2}, absl::MakeSpan(out)).code(),
                  absl::StatusCode::kInvalidArgument);
      }
    }
  }
}

// One process per device (GpuBackendOptions::nccl_id): with one device, this process as rank 0 of
// a one-rank communicator made from a fresh id.
TEST(GpuBackend, JoinsACommunicatorAsOneRank) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 9);
  Case c = MakeCase(40000, 5, 6, {Prg::kChaCha12, Prg::kAes128},
                    {OutputType::kAdditive, OutputType::kXor}, false, rng);
  absl::StatusOr<std::string> id = NewNcclId();
  if (!id.ok()) GTEST_SKIP() << "no NCCL: " << id.status();
  GpuBackendOptions o;
  o.nccl_id = *id;
  auto gpu = GpuBackend::Create(c.table, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->collective(), "nccl, rank 0 of 1");
  std::vector<uint32_t> out(c.keys.size() * c.table.row_words);
  ASSERT_TRUE((*gpu)->Answer(c.ptrs, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, CpuAnswers(c));
}

// Two ranks (two threads standing in for two processes, one device each): each holds half the
// rows, and both get the whole answer. Needs two devices.
TEST(GpuBackend, TwoRanksEachGetTheWholeAnswer) {
  if (GpuDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices";
  std::mt19937_64 rng(TestSeed() + 10);
  Case c = MakeCase(70001, 6, 5, {Prg::kChaCha12}, {OutputType::kAdditive, OutputType::kXor},
                    false, rng);
  absl::StatusOr<std::string> id = NewNcclId();
  if (!id.ok()) GTEST_SKIP() << "no NCCL: " << id.status();
  std::vector<uint32_t> out[2];
  absl::Status status[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      GpuBackendOptions o;
      o.devices = {r};
      o.nccl_id = *id;
      o.rank = r;
      o.ranks = 2;
      auto gpu = GpuBackend::Create(c.table, o);
      if (!gpu.ok()) {
        status[r] = gpu.status();
        return;
      }
      out[r].resize(c.keys.size() * c.table.row_words);
      status[r] = (*gpu)->Answer(c.ptrs, absl::MakeSpan(out[r]));
    });
  }
  for (std::thread& t : ranks) t.join();
  const std::vector<uint32_t> cpu = CpuAnswers(c);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(out[r], cpu) << "rank " << r;
  }
}

// Bad communicator options are refused before any device is touched (runs without a GPU too).
TEST(GpuBackend, RejectsBadCommunicatorOptions) {
  std::vector<uint32_t> words(64);
  const dpf::TableView table{words.data(), 16, 4, 0};
  GpuBackendOptions two_devices;
  two_devices.nccl_id = std::string(128, 'x');
  two_devices.devices = {0, 1};
  two_devices.ranks = 2;
  GpuBackendOptions bad_rank;
  bad_rank.nccl_id = std::string(128, 'x');
  bad_rank.rank = 2;
  bad_rank.ranks = 2;
  for (const GpuBackendOptions& o : {two_devices, bad_rank}) {
    absl::Status s = CreateGpuBackend(table, o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  GpuBackendOptions short_id;
  short_id.nccl_id = "abc";
  absl::Status s = CreateGpuBackend(table, short_id).status();
  // INVALID_ARGUMENT (wrong id size) with NCCL, UNIMPLEMENTED without it.
  EXPECT_TRUE(s.code() == absl::StatusCode::kInvalidArgument ||
              s.code() == absl::StatusCode::kUnimplemented)
      << s;
}

TEST(GpuBackend, Errors) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(TestSeed() + 6);
  Case c = MakeCase(100, 4, 1, {Prg::kAes128}, {OutputType::kAdditive}, false, rng);
  auto gpu = CreateGpuBackend(c.table, {});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<uint32_t> short_out(3);
  EXPECT_EQ((*gpu)->Answer(c.ptrs, absl::MakeSpan(short_out)).code(),
            absl::StatusCode::kInvalidArgument);
  Case other = MakeCase(5000, 4, 1, {Prg::kAes128}, {OutputType::kAdditive}, false, rng);
  std::vector<uint32_t> out(4);
  EXPECT_EQ((*gpu)->Answer(other.ptrs, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  GpuBackendOptions bad_device;
  bad_device.devices = {GpuDeviceCount() + 3};
  EXPECT_EQ(CreateGpuBackend(c.table, bad_device).status().code(), absl::StatusCode::kUnavailable);
  GpuBackendOptions int8;
  int8.dtype = TableDtype::kInt8;
  c.words[7] = 1000;
  EXPECT_EQ(CreateGpuBackend(c.table, int8).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GpuRoofline, MeasuresPositiveRates) {
  SKIP_WITHOUT_GPU();
  auto r = MeasureDeviceRoofline(0, 0.02);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->sms, 0);
  EXPECT_GT(r->chacha12_blocks_per_s, 0);
  EXPECT_GT(r->aes_blocks_per_s, 0);
  EXPECT_GT(r->mem_read_gbps, 0);
  EXPECT_GT(r->int32_mac_per_s, 0);
  EXPECT_GT(r->int8_mac_per_s, 0);
}

TEST(GpuBackend, ReportsNoDeviceAsUnavailable) {
  if (GpuDeviceCount() > 0) GTEST_SKIP() << "a device is present";
  std::vector<uint32_t> words(4);
  auto gpu = CreateGpuBackend({words.data(), 4, 1, 0}, {});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable) << gpu.status();
}

}  // namespace
}  // namespace veil::gpu
