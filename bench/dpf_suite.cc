// CPU suites: roofline, dpf-keygen, dpf-eval, pir-answer.
//
// The roofline of pir-answer is the slowest of three ceilings, each measured in the same run:
//   PRG work      every key expands ceil(rows / W) leaves and about as many inner nodes; the time
//                 is those counts times the measured cost of one node expansion and one leaf
//                 conversion in the active kernels (hot in L1), divided over the threads;
//   multiply-add  batch x rows x words 32-bit multiply-adds at the measured rate of the
//                 multiply-accumulate kernel on an L2-resident table, over the threads;
//   memory        the table streamed once per batch at the measured read bandwidth.
// roofline_qps = batch / max(the three); roofline_ratio = achieved qps / roofline_qps. The PRG
// and the multiply-adds share each core's vector units, so a core runs them one after the other:
// core_roofline_qps = batch / max(PRG + multiply-add, memory) is the ceiling they allow together,
// and core_roofline_ratio = achieved qps / core_roofline_qps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/suite.h"
#include "dpf/eval.h"
#include "dpf/kernels.h"
#include "dpf/key.h"
#include "pir/two_server/backend.h"

namespace veil::bench {
namespace {

using dpf::Block;
using dpf::DpfParameters;

absl::StatusOr<DpfParameters> ParamsFromFlags(const Flags& flags, int log_domain) {
  auto prg = dpf::ParsePrg(flags.Str("prg", "aes128"));
  if (!prg.ok()) return prg.status();
  return dpf::ParseOutput(flags.Str("output", "add16"), {log_domain, *prg});
}

// --backend=gpu hands the run to the GPU suite of the same name (roofline-gpu, pir-answer-gpu),
// present when veil is built with CUDA. Returns true if it did, with its status in `status`.
bool ForwardToGpu(const std::string& suite, const Flags& flags, absl::Status& status) {
  const std::string backend = flags.Str("backend", "cpu");
  if (backend == "cpu") return false;
  status =
      backend == "gpu"
          ? RunSuite(suite + "-gpu", flags)
          : absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or gpu, got ", backend));
  return true;
}

// Ceilings are the fastest of repeated runs, achieved figures the median.
// Runs fn(thread) on `threads` threads at once and returns the wall time.
double Parallel(int threads, const std::function<void(int)>& fn) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Ceilings {
  double expand_per_s;   // node expansions per second (all threads)
  double convert_per_s;  // leaf conversions per second (all threads)
  double mac_per_s;      // 32-bit multiply-adds per second (all threads)
  double mem_bytes_per_s;
};

double MeasureExpand(dpf::Prg prg, int threads) {
  const dpf::Kernels& k = dpf::KernelsFor(dpf::ActiveIsa());
  constexpr size_t kNodes = 1024, kReps = 200;
  double t = FastestSeconds([&] {
    Parallel(threads, [&](int) {
      std::vector<Block> in(kNodes), out(2 * kNodes);
      for (size_t i = 0; i < kNodes; ++i) in[i] = {i * 0x9e3779b97f4a7c15ULL, i};
      for (size_t r = 0; r < kReps; ++r) {
        k.expand_level(prg, in.data(), kNodes, {1, 2}, true, out.data());
        in[r % kNodes] = out[r];
      }
    });
  });
  return double(kNodes) * kReps * threads / t;
}

double MeasureConvert(dpf::Prg prg, const DpfParameters& params, int threads) {
  const dpf::Kernels& k = dpf::KernelsFor(dpf::ActiveIsa());
  constexpr size_t kLeaves = 1024, kReps = 100;
  const int words = params.leaf_block_words();
  double t = FastestSeconds([&] {
    Parallel(threads, [&](int) {
      std::vector<Block> in(kLeaves);
      std::vector<uint32_t> out(kLeaves * words);
      const uint32_t cw[16] = {1, 2, 3};
      for (size_t i = 0; i < kLeaves; ++i) in[i] = {i * 0x9e3779b97f4a7c15ULL, i};
      for (size_t r = 0; r < kReps; ++r) {
        k.convert_leaves(prg, in.data(), kLeaves, words, params.output, false, cw, out.data());
        in[r % kLeaves].hi ^= out[r];
      }
    });
  });
  return double(kLeaves) * kReps * threads / t;
}

double MeasureMac(int threads, uint32_t row_words) {
  const dpf::Kernels& k = dpf::KernelsFor(dpf::ActiveIsa());
  constexpr size_t kRows = 2048, kReps = 20;
  constexpr int kKeys = 8;
  double t = FastestSeconds([&] {
    Parallel(threads, [&](int) {
      std::vector<uint32_t> table(kRows * row_words, 3), y(kKeys * kRows, 5);
      std::vector<uint32_t> acc(kKeys * row_words);
      const uint32_t* yp[kKeys];
      for (int i = 0; i < kKeys; ++i) yp[i] = y.data() + i * kRows;
      for (size_t r = 0; r < kReps; ++r) {
        k.mac_add(yp, kKeys, table.data(), row_words, kRows, row_words, acc.data());
      }
    });
  });
  return double(kRows) * kReps * kKeys * row_words * threads / t;
}

double MeasureMemory(int threads) {
  const size_t kBytes = size_t{512} << 20;
  std::vector<uint64_t> buf(kBytes / 8, 1);
  std::atomic<uint64_t> sink{0};
  double t = FastestSeconds(
      [&] {
        Parallel(threads, [&](int th) {
          const size_t n = buf.size() / threads;
          const uint64_t* p = buf.data() + th * n;
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = 0; i + 4 <= n; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
          }
          sink += s0 + s1 + s2 + s3;
        });
      },
      1, 5);
  return kBytes / t;
}

absl::Status Roofline(const Flags& flags) {
  if (absl::Status s; ForwardToGpu("roofline", flags, s)) return s;
  const int threads = static_cast<int>(flags.Int("threads", 1));
  std::cerr << "roofline: measuring PRG, multiply-add and memory ceilings on " << threads
            << " thread(s)\n";
  const DpfParameters add16{20};
  // One AES node expansion is 2 AES blocks; one ChaCha node expansion is 1 ChaCha block.
  const double aes = 2 * MeasureExpand(dpf::Prg::kAes128, threads);
  const double chacha12 = MeasureExpand(dpf::Prg::kChaCha12, threads);
  JsonLine("roofline")
      .Add("backend", "cpu")
      .Add("isa", std::string(dpf::IsaName(dpf::ActiveIsa())))
      .Add("threads", threads)
      .Add("aes_blocks_per_s", aes)
      .Add("chacha12_blocks_per_s", chacha12)
      .Add("aes_leaf_add16_per_s", MeasureConvert(dpf::Prg::kAes128, add16, threads))
      .Add("mem_read_gbps", MeasureMemory(threads) / 1e9)
      .Add("int32_mac_per_s", MeasureMac(threads, 16))
      .Emit();
  return absl::OkStatus();
}

absl::Status DpfKeygen(const Flags& flags) {
  auto params = ParamsFromFlags(flags, static_cast<int>(flags.Int("log-domain", 20)));
  if (!params.ok()) return params.status();
  if (auto s = dpf::ValidateParameters(*params); !s.ok()) return s;
  size_t bytes = 0;
  constexpr int kKeys = 200;
  uint64_t alpha = 0;
  double t = MedianSeconds([&] {
    for (int i = 0; i < kKeys; ++i) {
      auto keys = dpf::GenerateKeys(*params, alpha++ % params->domain_size(), 1);
      bytes = keys->first.Serialize().size();
    }
  });
  JsonLine("dpf-keygen")
      .Add("log_domain", params->log_domain)
      .Add("prg", std::string(dpf::PrgName(params->prg)))
      .Add("output", dpf::OutputName(*params))
      .Add("keys_per_s", kKeys / t)
      .Add("key_bytes", static_cast<uint64_t>(bytes))
      .Emit();
  return absl::OkStatus();
}

absl::Status DpfEval(const Flags& flags) {
  auto params = ParamsFromFlags(flags, static_cast<int>(flags.Int("log-domain", 20)));
  if (!params.ok()) return params.status();
  if (auto s = dpf::ValidateParameters(*params); !s.ok()) return s;
  const int threads = static_cast<int>(flags.Int("threads", 1));
  const std::string mode = flags.Str("mode", "full");
  const int window = static_cast<int>(flags.Int("window-log", 10));
  std::vector<dpf::DpfKey> keys;
  for (int t = 0; t < threads; ++t)
    keys.push_back(dpf::GenerateKeys(*params, 12345 % params->domain_size(), 1)->first);
  double ms;
  std::atomic<uint32_t> sink{0};
  if (mode == "full") {
    // Each thread evaluates its own key over the whole domain; the consumer folds every leaf
    // word into a checksum so no work can be skipped.
    double t = MedianSeconds([&] {
      Parallel(threads, [&](int th) {
        uint32_t check = 0;
        (void)dpf::EvalFullWindowed(
            keys[th],
            [&check](uint64_t, absl::Span<const uint32_t> words) {
              uint32_t fold = 0;
              for (uint32_t w : words) fold ^= w;
              check ^= fold;
            },
            window);
        sink += check;
      });
    });
    ms = t * 1e3 / threads;
  } else if (mode == "point") {
    constexpr int kPoints = 2000;
    double t = MedianSeconds([&] {
      Parallel(threads, [&](int th) {
        uint32_t check = 0;
        for (int i = 0; i < kPoints; ++i) {
          check ^= *dpf::EvalPoint(keys[th], (i * 2654435761u) % params->domain_size());
        }
        sink += check;
      });
    });
    ms = t * 1e3 / (threads * double(kPoints));
  } else {
    return absl::InvalidArgumentError("--mode must be full or point");
  }
  const double points = mode == "full" ? double(params->domain_size()) : 1.0;
  JsonLine("dpf-eval")
      .Add("log_domain", params->log_domain)
      .Add("prg", std::string(dpf::PrgName(params->prg)))
      .Add("output", dpf::OutputName(*params))
      .Add("mode", mode)
      .Add("threads", threads)
      .Add("isa", std::string(dpf::IsaName(dpf::ActiveIsa())))
      .Add("ms_per_eval", ms)
      .Add("leaves_per_s", points / (ms / 1e3))
      .Emit();
  return absl::OkStatus();
}

absl::Status PirAnswer(const Flags& flags) {
  if (absl::Status s; ForwardToGpu("pir-answer", flags, s)) return s;
  const uint64_t rows = flags.Int("rows", 1 << 20);
  const uint32_t words = static_cast<uint32_t>(flags.Int("words", 16));
  const int batch = static_cast<int>(flags.Int("batch", 32));
  const int threads = static_cast<int>(flags.Int("threads", 1));
  const std::string strategy = flags.Str("strategy", "window");
  if (strategy != "window") {
    return absl::InvalidArgumentError("the CPU backend has one strategy: window");
  }
  if (flags.Str("table-dtype", "u32") != "u32") {
    return absl::InvalidArgumentError("the CPU backend answers u32 tables (--table-dtype=u32)");
  }
  if (rows == 0 || words == 0 || batch < 1 || threads < 1) {
    return absl::InvalidArgumentError("--rows, --words, --batch and --threads must be positive");
  }
  auto params = ParamsFromFlags(flags, dpf::LogDomainForRows(rows));
  if (!params.ok()) return params.status();
  std::cerr << "pir-answer: " << rows << " rows x " << words << " words, batch " << batch << ", "
            << threads << " thread(s), " << dpf::PrgName(params->prg) << "\n";
  std::vector<uint32_t> table(rows * words);
  std::mt19937_64 gen(1);
  for (auto& w : table) w = static_cast<uint32_t>(gen());
  auto backend = pir::CreateCpuBackend({table.data(), rows, words, 0}, threads);
  if (!backend.ok()) return backend.status();
  std::vector<dpf::DpfKey> keys;
  for (int i = 0; i < batch; ++i) {
    keys.push_back(dpf::GenerateKeys(*params, gen() % rows, 1)->first);
  }
  std::vector<const dpf::DpfKey*> ptrs;
  for (const auto& k : keys) ptrs.push_back(&k);
  std::vector<uint32_t> out(batch * words);
  absl::Status status;
  const double t = MedianSeconds([&] { status = (*backend)->Answer(ptrs, absl::MakeSpan(out)); });
  if (!status.ok()) return status;

  std::cerr << "pir-answer: measuring the roofline\n";
  const double leaves =
      double((rows + (1ull << params->leaf_points_log2()) - 1) >> params->leaf_points_log2());
  const double prg_s = batch * (leaves / MeasureExpand(params->prg, threads) +
                                leaves / MeasureConvert(params->prg, *params, threads));
  const double mac_s = double(batch) * rows * words / MeasureMac(threads, words);
  const double table_bytes = double(rows) * words * 4;
  const double mem_s = table_bytes / MeasureMemory(threads);
  const double qps = batch / t;
  // A core runs its PRG and its multiply-adds one after the other (the header).
  const double core_s = std::max(prg_s + mac_s, mem_s);
  JsonLine("pir-answer")
      .Add("backend", "cpu")
      .Add("rows", rows)
      .Add("words", int64_t{words})
      .Add("batch", batch)
      .Add("prg", std::string(dpf::PrgName(params->prg)))
      .Add("output", dpf::OutputName(*params))
      .Add("threads", threads)
      .Add("strategy", strategy)
      .Add("isa", std::string(dpf::IsaName(dpf::ActiveIsa())))
      .Add("table_bytes", table_bytes)
      .Add("ms_per_batch", t * 1e3)
      .Add("qps", qps)
      .AddRoofline(batch, qps, prg_s, mac_s, mem_s)
      .Add("core_roofline_qps", batch / core_s)
      .Add("core_roofline_ratio", qps * core_s / batch)
      .Emit();
  return absl::OkStatus();
}

const char kRooflineHelp[] =
    "--threads: the CPU's ceilings measured now: AES and ChaCha12 blocks/s in the active DPF "
    "kernels (hot in L1), memory read bandwidth, 32-bit multiply-accumulate rate";
const char kPirHelp[] =
    "--rows --words --batch --prg --output --threads: one party's answer to a batch of keys "
    "(CPU backend). roofline_qps = batch / max(PRG time, multiply-add time, memory time), each "
    "from ceilings measured in this run: PRG time = batch x (leaves x node-expansion cost + "
    "leaves x leaf-conversion cost), multiply-add time = batch x rows x words / MAC rate, "
    "memory time = table bytes / read bandwidth (the table is streamed once per batch); "
    "core_roofline_qps = batch / max(PRG time + multiply-add time, memory time), since a core "
    "runs its PRG and its multiply-adds one after the other, and core_roofline_ratio";

SuiteRegistration roofline("roofline", kRooflineHelp, Roofline);
SuiteRegistration keygen("dpf-keygen", "--log-domain --prg --output=add16|xor: keys/s, key bytes",
                         DpfKeygen);
SuiteRegistration eval("dpf-eval",
                       "--log-domain --prg --output --threads --mode=full|point [--window-log]: "
                       "ms per evaluation of one key (full: the whole domain, window by window)",
                       DpfEval);
SuiteRegistration pir("pir-answer", kPirHelp, PirAnswer);

}  // namespace
}  // namespace veil::bench
