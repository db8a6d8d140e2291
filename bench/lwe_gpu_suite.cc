// lwe-answer-gpu (what `lwe-answer --backend=gpu` runs): the LWE server's database product on a
// GPU, the CUDA-core path and the tensor-core (byte-plane) path side by side. Built where
// veil_gpu exists (CUDA).
//
// Figures are the kernels' device time per batch (events around the launches; the queries and
// answers cross PCIe in `e2e_ms` too). The roofline uses gpu::MeasureDeviceRoofline from this
// run: memory = the matrix streamed once per batch at the measured HBM read bandwidth; compute =
// batch x D1 x D0 multiply-adds at the INT32 rate (CUDA cores) or 4x as many byte products at the
// INT8 tensor-core rate. hbm_ratio = gbps / mem_read_gbps; tensor_over_cuda = the tensor path's
// q/s over the CUDA-core path's at the same batch.
//
// exppack-gpu: ExpPack(S)'s per-query GPU work for a table: the expansion (gpu/expansion.h), one
// pass of the packing sums (gpu/packing.h) over the packing matrix ExpPack(S)'s shape gives the
// table (ceil(D1 / N) groups x n = 1,024 keys), the switch to q', and optionally SimplePIR's
// product, against one stream of the table at the same run's HBM read bandwidth. batch8_pack_ms
// and batch8_deferred_engine_ms: the pass and the deferred engine per query when eight queries
// share one pass over the matrix (GpuPackingSums::SumLeavesBatchThen) and, in the engine's
// SumsBatch, expand side by side (GpuExpansion::ExpandBatchThen).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/lattice_devices.h"
#include "bench/suite.h"
#include "gpu/backend.h"
#include "gpu/expansion.h"
#include "gpu/exppack.h"
#include "gpu/lwe.h"
#include "gpu/packing.h"
#include "gpu/roofline.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/lwe.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/shape.h"

namespace veil::bench {
namespace {

// The shape's table of random records (the records freed once the matrix is built).
absl::StatusOr<lattice::Database> RandomDatabase(const lattice::Shape& shape,
                                                 std::mt19937_64& gen) {
  std::vector<uint8_t> records(shape.rows * shape.record_bytes);
  for (size_t i = 0; i + 8 <= records.size(); i += 8) {
    const uint64_t w = gen();
    std::memcpy(records.data() + i, &w, 8);
  }
  return lattice::Database::FromRecords(shape, records);
}

// A random D1 x D0 byte matrix of the shape (its rows' padding zero), filled on every core, for a
// product that is timed, not checked: a table through Database::FromRecords needs twice its
// memory and minutes on one thread at 64 GiB.
struct RandomMatrix {
  std::unique_ptr<int8_t[]> bytes;
  lattice::ByteMatrixView view;
};

RandomMatrix MakeRandomMatrix(const lattice::Shape& shape, uint64_t seed) {
  const uint64_t rows = shape.d1, cols = shape.d0, stride = lattice::AlignedStride(cols);
  RandomMatrix m;
  m.bytes.reset(new int8_t[rows * stride]);  // not zeroed here: each row is written once below
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint64_t state = seed ^ (uint64_t{t} << 32);
      for (uint64_t r = t; r < rows; r += threads) {
        int8_t* row = m.bytes.get() + r * stride;
        for (uint64_t c = 0; c < stride; c += 8) {
          uint64_t z = (state += 0x9e3779b97f4a7c15ull);  // splitmix64
          z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
          z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
          z ^= z >> 31;
          std::memcpy(row + c, &z, std::min<uint64_t>(8, stride - c));
        }
        std::fill(row + cols, row + stride, 0);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  m.view = {m.bytes.get(), rows, cols, stride};
  return m;
}

absl::StatusOr<std::vector<int>> Batches(const std::string& value) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batch takes positive integers, got ", value));
    }
    out.push_back(v);
  }
  return out;
}

absl::Status LweAnswerGpu(const Flags& flags) {
  if (flags.Str("backend", "gpu") != "gpu") {
    return absl::InvalidArgumentError("lwe-answer-gpu takes --backend=gpu");
  }
  if (gpu::GpuDeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  const uint64_t rows = flags.Int("rows", 1 << 20);
  const int64_t row_bytes = flags.Int("row-bytes", 64);
  auto protocol = lattice::ParseProtocol(flags.Str("protocol", "simple"));
  if (!protocol.ok()) return protocol.status();
  auto batches = Batches(flags.Str("batch", "1,32"));
  if (!batches.ok()) return batches.status();
  const std::string method_flag = flags.Str("method", "all");
  std::vector<gpu::LweGpuMethod> methods = {gpu::LweGpuMethod::kCudaCores,
                                            gpu::LweGpuMethod::kTensorCores};
  if (method_flag != "all") {
    auto m = gpu::ParseLweGpuMethod(method_flag);
    if (!m.ok()) return m.status();
    methods = {*m};
  }
  const int reps = static_cast<int>(flags.Int("reps", 20));
  const int verify = static_cast<int>(flags.Int("verify", 1));
  lattice::ShapeOptions shape_options;
  shape_options.records_per_column = flags.Int("records-per-column", 0);
  auto shape =
      lattice::ChooseShape(*protocol, rows, static_cast<uint32_t>(row_bytes), shape_options);
  if (!shape.ok()) return shape.status();
  std::cerr << "lwe-answer-gpu: " << lattice::ShapeSummary(*shape) << "\n";
  std::mt19937_64 gen(1);
  auto db = RandomDatabase(*shape, gen);
  if (!db.ok()) return db.status();
  const int max_batch = *std::max_element(batches->begin(), batches->end());
  gpu::LweGpuOptions options;
  options.max_batch = max_batch;
  auto product = gpu::LweGpuProduct::Create(db->view(), options);
  if (!product.ok()) return product.status();
  std::cerr << "lwe-answer-gpu: measuring the device roofline\n";
  auto roof = gpu::MeasureDeviceRoofline(0, 0.1);
  if (!roof.ok()) return roof.status();

  const lattice::ByteMatrixView view = db->view();
  const double db_bytes = double(view.rows) * view.stride;
  for (int batch : *batches) {
    std::vector<uint32_t> q(batch * view.cols), expected(batch * view.rows), got(expected.size());
    for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
    if (verify) {
      absl::Status s = lattice::MultiplyBytes(view, q, batch, absl::MakeSpan(expected), view.rows,
                                              std::max(1u, std::thread::hardware_concurrency()));
      if (!s.ok()) return s;
    }
    std::optional<double> cuda_qps;
    for (gpu::LweGpuMethod method : methods) {
      const auto start = std::chrono::steady_clock::now();
      if (absl::Status s = (*product)->MultiplyWith(method, q, batch, absl::MakeSpan(got));
          !s.ok()) {
        return s;
      }
      const double e2e_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const bool verified = !verify || got == expected;
      auto t = (*product)->TimeKernels(method, batch, reps);
      if (!t.ok()) return t.status();
      const bool tensor = method == gpu::LweGpuMethod::kTensorCores;
      const double macs = double(batch) * view.rows * view.cols;
      const double mac_s = tensor ? 4 * macs / roof->int8_mac_per_s : macs / roof->int32_mac_per_s;
      const double mem_s = db_bytes / (roof->mem_read_gbps * 1e9);
      const double qps = batch / *t;
      JsonLine line("lwe-answer");
      line.Add("backend", "gpu")
          .Add("device", roof->device_name)
          .Add("method", std::string(gpu::LweGpuMethodName(method)))
          .Add("protocol", std::string(lattice::ProtocolName(*protocol)))
          .Add("rows", rows)
          .Add("row_bytes", row_bytes)
          .Add("batch", batch)
          .Add("d0", shape->d0)
          .Add("d1", shape->d1)
          .Add("db_bytes", db_bytes)
          .Add("ms_per_batch", *t * 1e3)
          .Add("e2e_ms", e2e_s * 1e3)
          .Add("gbps", db_bytes / *t / 1e9)
          .Add("qps", qps)
          .Add("mem_read_gbps", roof->mem_read_gbps)
          .Add("hbm_ratio", db_bytes / *t / 1e9 / roof->mem_read_gbps)
          .Add("int32_mac_per_s", roof->int32_mac_per_s)
          .Add("int8_mac_per_s", roof->int8_mac_per_s)
          .AddRoofline(batch, qps, 0, mac_s, mem_s)
          .Add("verified", verified);
      if (!tensor) cuda_qps = qps;
      if (tensor && cuda_qps) line.Add("tensor_over_cuda", qps / *cuda_qps);
      line.Emit();
      if (!verified) {
        return absl::InternalError(absl::StrCat("the GPU product differs from the CPU's (",
                                                std::string(gpu::LweGpuMethodName(method)),
                                                ", batch ", batch, ")"));
      }
    }
  }
  return absl::OkStatus();
}

const char kHelp[] =
    "--rows --row-bytes --batch=1,32 --protocol --method=all|cuda-cores|tensor-cores [--reps "
    "--verify=1]: the LWE database product on the GPU (the matrix the protocol's shape gives), "
    "both methods: device time per batch, gbps, hbm_ratio, roofline_ratio, tensor_over_cuda; "
    "checked against the CPU product";
SuiteRegistration lwe_answer_gpu("lwe-answer-gpu", kHelp, LweAnswerGpu);

absl::Status ExpPackGpu(const Flags& flags) {
  const uint64_t rows = flags.Int("rows", 1 << 24);
  const int64_t row_bytes = flags.Int("row-bytes", 64);
  const int reps = static_cast<int>(flags.Int("reps", 10));
  const bool with_product = flags.Int("with-product", 0) != 0;
  if (row_bytes < 1 || reps < 1) return absl::InvalidArgumentError("bad --row-bytes or --reps");
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  lattice::ShapeOptions options;
  options.packed_ring_n = static_cast<uint32_t>(ctx.n());
  auto shape = lattice::ChooseShape(lattice::Protocol::kSimplePir, rows,
                                    static_cast<uint32_t>(row_bytes), options);
  if (!shape.ok()) return shape.status();
  std::cerr << "exppack-gpu: " << lattice::ShapeSummary(*shape) << "\n";
  auto roof = gpu::MeasureDeviceRoofline(0, 0.1);
  if (!roof.ok()) return roof.status();
  std::mt19937_64 gen(4);

  // The expansion of one query's ciphertext (n = 1,024), checked against the CPU's.
  const uint32_t n = lattice::kLweDimension;
  const he::SecretKey key = he::GenerateSecretKey(*ctx.expansion());
  const lattice::RlweSecret z = lattice::RlweSecret::FromKey(ctx, key);
  auto keys = lattice::ParseExpansionKeys(ctx, n, *lattice::MakeExpansionKeys(ctx, key, n));
  if (!keys.ok()) return keys.status();
  std::vector<uint32_t> secret(n);
  for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
  auto ct = lattice::EncryptLweSecret(ctx, z, secret);
  if (!ct.ok()) return ct.status();
  auto expansion = gpu::GpuExpansion::Create(ctx, *keys, n);
  if (!expansion.ok()) return expansion.status();
  auto leaves = (*expansion)->Expand(*ct);
  if (!leaves.ok()) return leaves.status();
  const size_t words = ctx.k() * ctx.n();
  std::vector<uint64_t> cpu_leaves(leaves->leaves.size());
  std::mutex mu;
  if (absl::Status s = lattice::ExpandLweSecret(
          ctx, *keys, n, *ct, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
          [&](int, uint32_t count, const uint32_t* index, const uint64_t* beta,
              const uint64_t* alpha) {
            std::lock_guard<std::mutex> lock(mu);
            for (uint32_t i = 0; i < count; ++i) {
              uint64_t* to = cpu_leaves.data() + uint64_t{index[i]} * 2 * words;
              std::copy_n(beta + i * words, words, to);
              std::copy_n(alpha + i * words, words, to + words);
            }
          });
      !s.ok()) {
    return s;
  }
  const bool expansion_verified = cpu_leaves == leaves->leaves;
  auto expand_s = (*expansion)->MeasureExpand(*ct, reps);
  if (!expand_s.ok()) return expand_s.status();

  // The packing sums over the table's packing matrix (the hint's a-parts; their values do not
  // change the cost), checked against the host run on 16 keys.
  std::vector<uint32_t> a(shape->d1 * n);
  for (uint32_t& w : a) w = static_cast<uint32_t>(gen());
  auto matrix = lattice::PackingMatrix::Create(ctx, a, shape->d1, n);
  if (!matrix.ok()) return matrix.status();
  a = {};
  auto packing = gpu::GpuPackingSums::Create(ctx, *matrix);
  if (!packing.ok()) return packing.status();
  std::vector<uint32_t> index(16);
  std::vector<uint64_t> beta(16 * words), alpha(16 * words);
  for (uint32_t j = 0; j < 16; ++j) {
    index[j] = (j * 97) % n;
    std::copy_n(cpu_leaves.begin() + uint64_t{index[j]} * 2 * words, words,
                beta.begin() + j * words);
    std::copy_n(cpu_leaves.begin() + (uint64_t{index[j]} * 2 + 1) * words, words,
                alpha.begin() + j * words);
  }
  std::vector<uint64_t> expected(lattice::PackingSumWords(ctx, *matrix), 0), got = expected;
  if (absl::Status s =
          gpu::HostRunPackingSums(ctx, *matrix, index, beta, alpha, absl::MakeSpan(expected));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*packing)->Accumulate(index, beta, alpha, absl::MakeSpan(got)); !s.ok()) {
    return s;
  }
  const bool packing_verified = got == expected;
  auto pass_s = (*packing)->MeasurePass(reps);
  if (!pass_s.ok()) return pass_s.status();
  // The same pass for a batch's eight queries at once (the matrix read once for all).
  auto batch_pass_s = (*packing)->MeasurePass(reps, gpu::GpuPackingSums::kMaxBatch);
  if (!batch_pass_s.ok()) return batch_pass_s.status();
  // The servers' engine (gpu/exppack.h): expansion, packing sums and the sums back to the host,
  // one session's keys uploaded at the first call; checked against the host run of the sums over
  // the CPU's leaves, timed on the wall clock (the later calls).
  gpu::GpuPackingEngineOptions full;
  full.deferred_levels = 0;
  full.max_batch = 1;  // one query at a time: a batch's buffers are 890 MB a query at n = 1,024
  auto engine = gpu::GpuPackingEngine::Create(ctx, *matrix, full);
  if (!engine.ok()) return engine.status();
  const auto session = std::make_shared<const he::GaloisKeys>(*keys);
  std::vector<uint64_t> engine_want(lattice::PackingSumWords(ctx, *matrix)),
      engine_got(engine_want.size());
  if (absl::Status s = gpu::HostRunSumLeaves(ctx, *matrix, cpu_leaves, absl::MakeSpan(engine_want));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*engine)->Sums(session, *ct, 1, absl::MakeSpan(engine_got)); !s.ok()) {
    return s;
  }
  const bool engine_verified = engine_got == engine_want;
  const double engine_s = MedianSeconds(
      [&] {
        if (absl::Status s = (*engine)->Sums(session, *ct, 1, absl::MakeSpan(engine_got));
            !s.ok()) {
          std::cerr << "exppack-gpu: " << s << "\n";
        }
      },
      0, reps);
  // The same with the servers' deferred levels (pack_simple.cc's choice): the top levels'
  // expansion, the sums over the folded matrix and the deferred switches; checked against the
  // CPU engine's sums with as many levels deferred.
  const int host_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  gpu::GpuPackingEngineOptions deferred;
  deferred.deferred_levels = lattice::BestDeferredLevels(n, matrix->groups());
  deferred.fold_threads = host_threads;
  auto deferred_engine = gpu::GpuPackingEngine::Create(ctx, *matrix, deferred);
  if (!deferred_engine.ok()) return deferred_engine.status();
  std::vector<uint64_t> deferred_got(engine_want.size());
  {
    const lattice::CpuPackingEngine cpu(ctx, *matrix, deferred.deferred_levels, host_threads);
    if (absl::Status s = cpu.Sums(session, *ct, host_threads, absl::MakeSpan(engine_want));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*deferred_engine)->Sums(session, *ct, 1, absl::MakeSpan(deferred_got));
      !s.ok()) {
    return s;
  }
  bool deferred_verified = deferred_got == engine_want;
  const double deferred_s = MedianSeconds(
      [&] {
        if (absl::Status s =
                (*deferred_engine)->Sums(session, *ct, 1, absl::MakeSpan(deferred_got));
            !s.ok()) {
          std::cerr << "exppack-gpu: " << s << "\n";
        }
      },
      0, reps);
  // A batch of eight queries through SumsBatch (one pass over the folded matrix for all), each
  // checked against the CPU engine's sums; timed per query.
  const size_t batch = gpu::GpuPackingSums::kMaxBatch;
  const std::vector<std::shared_ptr<const he::GaloisKeys>> batch_keys(batch, session);
  const std::vector<absl::Span<const uint8_t>> batch_cts(batch, *ct);
  std::vector<std::vector<uint64_t>> batch_sums(batch, std::vector<uint64_t>(engine_want.size()));
  std::vector<absl::Span<uint64_t>> batch_spans;
  for (std::vector<uint64_t>& v : batch_sums) batch_spans.push_back(absl::MakeSpan(v));
  const auto run_batch = [&] {
    for (const absl::Status& s :
         (*deferred_engine)->SumsBatch(batch_keys, batch_cts, batch_spans, 1)) {
      if (!s.ok()) std::cerr << "exppack-gpu: " << s << "\n";
    }
  };
  run_batch();
  for (const std::vector<uint64_t>& v : batch_sums) deferred_verified &= v == engine_want;
  const double batch_deferred_s = MedianSeconds(run_batch, 0, reps) / batch;
  // The switch of the packed ciphertexts to q' (one per group), checked against the CPU's.
  auto switcher = gpu::GpuResponseSwitch::Create(ctx);
  if (!switcher.ok()) return switcher.status();
  std::vector<lattice::RlweCiphertext> packed(matrix->groups());
  for (lattice::RlweCiphertext& ct : packed) {
    ct.c0.assign(cpu_leaves.begin(), cpu_leaves.begin() + words);  // any residues below the primes
    ct.c1.assign(cpu_leaves.begin() + words, cpu_leaves.begin() + 2 * words);
  }
  auto switched = (*switcher)->Switch(packed);
  if (!switched.ok()) return switched.status();
  const std::vector<lattice::SwitchedCiphertext> cpu_switched =
      lattice::SwitchResponse(ctx, packed);
  bool switch_verified = switched->size() == cpu_switched.size();
  for (size_t t = 0; switch_verified && t < cpu_switched.size(); ++t) {
    switch_verified =
        (*switched)[t].c0 == cpu_switched[t].c0 && (*switched)[t].c1 == cpu_switched[t].c1;
  }
  auto switch_s = (*switcher)->MeasureSwitch(static_cast<uint32_t>(matrix->groups()), reps);
  if (!switch_s.ok()) return switch_s.status();
  const double matrix_bytes = static_cast<double>((*packing)->matrix_bytes());
  const double db_bytes = static_cast<double>(shape->d1) * lattice::AlignedStride(shape->d0);
  const double floor_s = db_bytes / (roof->mem_read_gbps * 1e9);

  JsonLine line("exppack-gpu");
  line.Add("backend", "gpu")
      .Add("device", roof->device_name)
      .Add("rows", rows)
      .Add("row_bytes", row_bytes)
      .Add("d0", shape->d0)
      .Add("d1", shape->d1)
      .Add("groups", matrix->groups())
      .Add("db_bytes", db_bytes)
      .Add("mem_read_gbps", roof->mem_read_gbps)
      .Add("floor_ms", floor_s * 1e3)
      .Add("expand_ms", *expand_s * 1e3)
      .Add("key_switches_per_s", (n - 1) / *expand_s)
      .Add("pack_ms", *pass_s * 1e3)
      .Add("matrix_bytes", matrix_bytes)
      .Add("pack_gbps", matrix_bytes / *pass_s / 1e9)
      .Add("pack_hbm_ratio", matrix_bytes / *pass_s / 1e9 / roof->mem_read_gbps)
      .Add("batch8_pack_ms", *batch_pass_s / batch * 1e3)
      .Add("switch_ms", *switch_s * 1e3)
      .Add("engine_ms", engine_s * 1e3)
      .Add("deferred_levels", uint64_t{(*deferred_engine)->deferred_levels()})
      .Add("deferred_engine_ms", deferred_s * 1e3)
      .Add("batch8_deferred_engine_ms", batch_deferred_s * 1e3);
  if (with_product) {
    // SimplePIR's product of one query over the table (the CUDA-core mat-vec).
    const RandomMatrix db = MakeRandomMatrix(*shape, gen());
    auto product = gpu::LweGpuProduct::Create(db.view, {});
    if (!product.ok()) return product.status();
    std::vector<uint32_t> q(shape->d0), answer(shape->d1);
    for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
    if (absl::Status st =
            (*product)->MultiplyWith(gpu::LweGpuMethod::kCudaCores, q, 1, absl::MakeSpan(answer));
        !st.ok()) {
      return st;
    }
    auto product_s = (*product)->TimeKernels(gpu::LweGpuMethod::kCudaCores, 1, reps);
    if (!product_s.ok()) return product_s.status();
    const double server_s = *product_s + *expand_s + *pass_s + *switch_s;
    // With the deferred engine (its wall clock, the sums' copy back included).
    const double deferred_server_s = *product_s + deferred_s + *switch_s;
    line.Add("product_ms", *product_s * 1e3)
        .Add("server_ms", server_s * 1e3)
        .Add("floor_ratio", server_s / floor_s)
        .Add("deferred_server_ms", deferred_server_s * 1e3)
        .Add("deferred_floor_ratio", deferred_server_s / floor_s);
  }
  line.Add("verified", expansion_verified && packing_verified && switch_verified &&
                           engine_verified && deferred_verified)
      .Emit();
  if (!engine_verified)
    return absl::InternalError("the GPU engine's sums differ from the host run's");
  if (!deferred_verified) {
    return absl::InternalError("the GPU engine's deferred sums differ from the CPU engine's");
  }
  if (!switch_verified) return absl::InternalError("the GPU switch differs from the CPU's");
  if (!expansion_verified) return absl::InternalError("the GPU expansion differs from the CPU's");
  if (!packing_verified) {
    return absl::InternalError("the GPU packing sums differ from the host run's");
  }
  return absl::OkStatus();
}

// lattice --backend=gpu: the lattice suite's packed protocols with the LWE product and the
// packing engine (expansion, sums, switch) on device 0; floor_ratio against its HBM bandwidth.
absl::Status LatticeGpu(const Flags& flags) {
  if (gpu::GpuDeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  auto roof = gpu::MeasureDeviceRoofline(0, 0.1);
  if (!roof.ok()) return roof.status();
  LatticeDevices devices;
  devices.backend = "gpu";
  devices.read_bytes_per_s = roof->mem_read_gbps * 1e9;
  devices.product = [](const lattice::ByteMatrixView& db,
                       int max_batch) -> absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>> {
    gpu::LweGpuOptions options;
    options.max_batch = max_batch;
    auto product = gpu::LweGpuProduct::Create(db, options);
    if (!product.ok()) return product.status();
    return std::unique_ptr<lattice::DatabaseProduct>(*std::move(product));
  };
  devices.engine = [](const lattice::RingContext& ring, const lattice::PackingMatrix& matrix)
      -> absl::StatusOr<std::unique_ptr<lattice::PackingEngine>> {
    // As the servers' --backend=gpu (server/backend_select.cc): their CPU engine's levels.
    gpu::GpuPackingEngineOptions options;
    options.deferred_levels = lattice::BestDeferredLevels(matrix.lwe_n(), matrix.groups());
    options.fold_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto engine = gpu::GpuPackingEngine::Create(ring, matrix, options);
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<lattice::PackingEngine>(*std::move(engine));
  };
  return PackedLattice(flags, flags.Str("protocol", "exppack-s"), devices);
}

SuiteRegistration lattice_gpu(
    "lattice-gpu",
    "what `lattice --backend=gpu` runs: the packed protocols' server with its product and packing "
    "engine on the GPU (the lattice suite's figures)",
    LatticeGpu);

SuiteRegistration exppack_gpu(
    "exppack-gpu",
    "--rows --row-bytes [--reps --with-product=0|1]: ExpPack(S)'s per-query work on the GPU for "
    "the table's shape: expand_ms (one query's expansion, n = 1,024, checked against the CPU's), "
    "pack_ms (the packing sums over the packing matrix, keys on the device; pack_hbm_ratio), "
    "switch_ms (the packed ciphertexts to q', inverse NTT fused), engine_ms (the servers' engine, "
    "gpu/exppack.h, expanding fully, on the wall clock: expansion, leaves narrowed and summed on "
    "the device, the sums copied back; checked against the host run), deferred_engine_ms (the "
    "same engine with the servers' deferred_levels: top levels, folded matrix, deferred switches; "
    "checked against the CPU engine's sums), floor_ms (one stream of the "
    "table at this run's HBM read bandwidth); --with-product=1 also builds the table and times "
    "SimplePIR's product (CUDA cores, batch 1): server_ms = product + expansion + packing + "
    "switch and floor_ratio = server_ms / floor_ms, and deferred_server_ms = product + "
    "deferred_engine_ms + switch with its deferred_floor_ratio. PackedCiphertext's encoding of "
    "the b-parts (CPU) and the transfers are not counted",
    ExpPackGpu);

}  // namespace
}  // namespace veil::bench
