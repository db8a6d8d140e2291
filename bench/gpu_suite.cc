// GPU suites: roofline-gpu and pir-answer-gpu (what `roofline --backend=gpu` and
// `pir-answer --backend=gpu` run). Built only where veil_gpu exists (CUDA).
//
// pir-answer-gpu's roofline is the slowest of three ceilings, all measured by roofline-gpu's
// micro-kernels in the same run:
//   PRG work      per key, the PRG blocks of one tree expansion over the leaves holding rows:
//                 ChaCha 1 block per inner node and per leaf; AES 2 per inner node and
//                 ceil(W / 4) per leaf; SipHash 4 per inner node and ceil(W / 2) per leaf;
//   multiply-add  batch x rows x words at the INT32 rate (INT8 tables: 4 byte planes at the INT8
//                 tensor-core rate);
//   memory        the table streamed once per pass (once per batch; once per key in latency mode).
// roofline_qps = batch / max(the three); roofline_ratio = qps / roofline_qps. The tree-expansion
// count is the ideal of the bounded window and level-by-level: branch-parallel's ratio shows its
// extra PRG work (a whole path per leaf).
#include <algorithm>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/suite.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gpu/backend.h"
#include "gpu/roofline.h"
#include "gpu/strategy.h"
#include "pir/two_server/backend.h"

namespace veil::bench {
namespace {

absl::Status CheckGpuFlag(const Flags& flags) {
  const std::string backend = flags.Str("backend", "gpu");
  if (backend != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU suites take --backend=gpu, not ", backend));
  }
  if (gpu::GpuDeviceCount() == 0) {
    return absl::UnavailableError("no CUDA device: the GPU suites need one");
  }
  return absl::OkStatus();
}

absl::StatusOr<gpu::DeviceRoofline> CachedRoofline(int device) {
  static std::optional<absl::StatusOr<gpu::DeviceRoofline>> cached;
  if (!cached) {
    std::cerr << "gpu roofline: measuring device " << device << "\n";
    cached = gpu::MeasureDeviceRoofline(device, 0.1);
  }
  return *cached;
}

absl::Status RooflineGpu(const Flags& flags) {
  if (absl::Status s = CheckGpuFlag(flags); !s.ok()) return s;
  const int device = static_cast<int>(flags.Int("device", 0));
  auto r = CachedRoofline(device);
  if (!r.ok()) return r.status();
  JsonLine("roofline")
      .Add("backend", "gpu")
      .Add("device", r->device_name)
      .Add("sms", r->sms)
      .Add("aes_blocks_per_s", r->aes_blocks_per_s)
      .Add("chacha12_blocks_per_s", r->chacha12_blocks_per_s)
      .Add("chacha8_blocks_per_s", r->chacha8_blocks_per_s)
      .Add("siphash_per_s", r->siphash_per_s)
      .Add("mem_read_gbps", r->mem_read_gbps)
      .Add("int32_mac_per_s", r->int32_mac_per_s)
      .Add("int8_mac_per_s", r->int8_mac_per_s)
      .Emit();
  return absl::OkStatus();
}

// PRG blocks of one key's tree expansion, and the measured rate of such blocks.
struct PrgWork {
  double blocks_per_key;
  double blocks_per_s;
};

PrgWork PrgWorkFor(const dpf::DpfParameters& p, uint64_t rows, const gpu::DeviceRoofline& r) {
  const double leaves = double(((rows - 1) >> p.leaf_points_log2()) + 1);
  const double inner = std::max(0.0, leaves - 1);
  const int words = p.leaf_block_words();
  switch (p.prg) {
    case dpf::Prg::kAes128:
      // Bitsliced: two blocks per pass, so a leaf of at most 4 words still costs a pass.
      return {2 * inner + leaves * 2 * ((words + 7) / 8), r.aes_blocks_per_s};
    case dpf::Prg::kSipHash:
      return {4 * inner + leaves * ((words + 1) / 2), r.siphash_per_s};
    case dpf::Prg::kChaCha8:
      return {inner + leaves, r.chacha8_blocks_per_s};
    case dpf::Prg::kChaCha12:
      return {inner + leaves, r.chacha12_blocks_per_s};
    case dpf::Prg::kChaCha20:
      // Not measured separately: 20 rounds cost 20/12 of 12 (the rounds dominate).
      return {inner + leaves, r.chacha12_blocks_per_s * 12.0 / 20.0};
  }
  return {inner + leaves, r.chacha12_blocks_per_s};
}

absl::StatusOr<std::vector<gpu::Strategy>> StrategiesFromFlag(const std::string& value) {
  if (value == "all") {
    return std::vector<gpu::Strategy>{gpu::Strategy::kBoundedWindow, gpu::Strategy::kLevelByLevel,
                                      gpu::Strategy::kBranchParallel};
  }
  auto s = gpu::ParseStrategy(value);
  if (!s.ok()) return s.status();
  return std::vector<gpu::Strategy>{*s};
}

absl::StatusOr<std::vector<int>> IntList(const std::string& value) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected positive integers, got '", value, "'"));
    }
    out.push_back(v);
  }
  return out;
}

absl::Status PirAnswerGpu(const Flags& flags) {
  if (absl::Status s = CheckGpuFlag(flags); !s.ok()) return s;
  const uint64_t rows = flags.Int("rows", 1 << 20);
  const uint32_t words = static_cast<uint32_t>(flags.Int("words", 16));
  auto batches = IntList(flags.Str("batch", "256"));
  if (!batches.ok()) return batches.status();
  auto strategies = StrategiesFromFlag(flags.Str("strategy", "bounded-window"));
  if (!strategies.ok()) return strategies.status();
  auto dtype = gpu::ParseTableDtype(flags.Str("table-dtype", "u32"));
  if (!dtype.ok()) return dtype.status();
  auto prg = dpf::ParsePrg(flags.Str("prg", "chacha12"));
  if (!prg.ok()) return prg.status();
  auto params = dpf::ParseOutput(flags.Str("output", "add16"), {dpf::LogDomainForRows(rows), *prg});
  if (!params.ok()) return params.status();
  auto devices = IntList(flags.Str("devices", "1"));  // how many devices: 0 .. n-1
  if (!devices.ok()) return devices.status();
  const int verify_keys = static_cast<int>(flags.Int("verify-keys", 4));
  const uint64_t single_query_rows = flags.Int("single-query-rows", uint64_t{4} << 20);
  const double budget_s = flags.Double("budget-s", 2.0);
  if (rows == 0 || words == 0)
    return absl::InvalidArgumentError("--rows and --words must be positive");

  auto roof = CachedRoofline(0);
  if (!roof.ok()) return roof.status();
  const int max_batch = *std::max_element(batches->begin(), batches->end());
  std::cerr << "pir-answer-gpu: " << rows << " rows x " << words << " words, " << dpf::PrgName(*prg)
            << " " << dpf::OutputName(*params) << ", " << gpu::TableDtypeName(*dtype)
            << " table, batches up to " << max_batch << "\n";

  std::vector<uint32_t> table(rows * words);
  std::mt19937_64 gen(1);
  for (uint32_t& w : table) {
    w = *dtype == gpu::TableDtype::kInt8
            ? static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(gen())))
            : static_cast<uint32_t>(gen());
  }
  const dpf::TableView view{table.data(), rows, words, 0};
  std::vector<dpf::DpfKey> keys;
  dpf::SeededRandomForTesting source(7);
  for (int i = 0; i < max_batch; ++i) {
    const uint32_t beta =  // XOR output encodes the indicator (beta 1)
        params->output == dpf::OutputType::kXor ? 1 : 1 + static_cast<uint32_t>(gen() % 1000);
    auto pair = dpf::GenerateKeys(*params, gen() % rows, beta, source);
    if (!pair.ok()) return pair.status();
    keys.push_back(i % 2 ? pair->second : pair->first);
  }
  std::vector<const dpf::DpfKey*> ptrs;
  for (const dpf::DpfKey& k : keys) ptrs.push_back(&k);

  // The CPU backend's answers for the first verify_keys keys: the GPU must match them bit for bit.
  const int checked = std::min(verify_keys, max_batch);
  std::vector<uint32_t> expected(checked * words);
  if (checked > 0) {
    auto cpu = pir::CreateCpuBackend(view, std::max(1u, std::thread::hardware_concurrency()));
    if (!cpu.ok()) return cpu.status();
    for (int k = 0; k < checked; ++k) {
      absl::Status s = (*cpu)->Answer(absl::MakeConstSpan(&ptrs[k], 1),
                                      absl::MakeSpan(expected).subspan(k * words, words));
      if (!s.ok()) return s;
    }
  }

  const PrgWork prg_work = PrgWorkFor(*params, rows, *roof);
  const bool int8 = *dtype == gpu::TableDtype::kInt8;
  const double table_bytes = double(rows) * words * (int8 ? 1 : 4);
  for (gpu::Strategy strategy : *strategies) {
    gpu::GpuBackendOptions options;
    options.strategy = strategy;
    options.dtype = *dtype;
    options.max_batch = max_batch;
    options.single_query_rows = single_query_rows;
    options.devices.clear();
    for (int d = 0; d < devices->front(); ++d) options.devices.push_back(d);
    auto backend = gpu::GpuBackend::Create(view, options);
    if (!backend.ok()) return backend.status();
    const gpu::GpuMemoryReport mem = (*backend)->memory();
    for (int batch : *batches) {
      std::vector<uint32_t> out(batch * words);
      absl::Status status;
      const double t = MedianSeconds(
          [&] {
            status =
                (*backend)->Answer(absl::MakeConstSpan(ptrs.data(), batch), absl::MakeSpan(out));
          },
          1, 15, budget_s);
      if (!status.ok()) return status;
      const int compare = std::min(checked, batch);
      const bool verified =
          std::equal(out.begin(), out.begin() + compare * words, expected.begin());
      const bool latency_mode = rows >= single_query_rows;
      const double prg_s = batch * prg_work.blocks_per_key / prg_work.blocks_per_s;
      const double mac_s = int8 ? 4.0 * batch * rows * words / roof->int8_mac_per_s
                                : double(batch) * rows * words / roof->int32_mac_per_s;
      const double mem_s = table_bytes * (latency_mode ? batch : 1) / (roof->mem_read_gbps * 1e9);
      const double qps = batch / t;
      JsonLine("pir-answer")
          .Add("backend", "gpu")
          .Add("device", roof->device_name)
          .Add("devices", devices->front())
          .Add("rows", rows)
          .Add("words", int64_t{words})
          .Add("batch", batch)
          .Add("prg", std::string(dpf::PrgName(*prg)))
          .Add("output", dpf::OutputName(*params))
          .Add("strategy", std::string(gpu::StrategyName(strategy)))
          .Add("table_dtype", std::string(gpu::TableDtypeName(*dtype)))
          .Add("latency_mode", latency_mode)
          .Add("keys_per_block", mem.keys_per_block)
          .Add("collective", (*backend)->collective())
          .Add("table_bytes", table_bytes)
          .Add("node_buffer_bytes", mem.node_buffer_bytes)
          .Add("shared_bytes_per_block", int64_t{mem.shared_bytes_per_block})
          .Add("ms_per_batch", t * 1e3)
          .Add("qps", qps)
          .AddRoofline(batch, qps, prg_s, mac_s, mem_s)
          .Add("verified_keys", compare)
          .Add("verified", verified)
          .Emit();
      if (!verified) {
        return absl::InternalError(absl::StrCat("GPU answers differ from the CPU backend (",
                                                std::string(gpu::StrategyName(strategy)),
                                                ", batch ", batch, ")"));
      }
    }
  }
  return absl::OkStatus();
}

const char kRooflineGpuHelp[] =
    "--device: the GPU's ceilings measured now (tight kernels of dpf's own PRG code): ChaCha12 / "
    "ChaCha8 / AES (sigma-MMO) blocks/s, SipHash/s, memory read GB/s, INT32 multiply-add/s "
    "(CUDA cores), INT8 multiply-add/s (tensor cores, wmma)";
const char kPirGpuHelp[] =
    "--rows --words --batch=N[,N...] --prg --output --strategy=bounded-window|level-by-level|"
    "branch-parallel|all --table-dtype=u32|int8 --devices=N --single-query-rows --verify-keys "
    "--budget-s: one party's answer to a batch on the GPU backend; checks the first keys against "
    "the CPU backend; roofline_qps from roofline-gpu's ceilings of this run (see gpu_suite.cc)";

SuiteRegistration roofline_gpu("roofline-gpu", kRooflineGpuHelp, RooflineGpu);
SuiteRegistration pir_gpu("pir-answer-gpu", kPirGpuHelp, PirAnswerGpu);

}  // namespace
}  // namespace veil::bench
