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
// packing-gpu: ring packing's sums (gpu/packing.h) for the packing matrix ExpPack(S)'s shape gives
// a table (ceil(D1 / N) groups x n = 1024 keys at the default ring): device time of one pass
// over the matrix (one query's packing with all its keys on the device), gbps of matrix read,
// hbm_ratio against the same run's read bandwidth; verified against the host run on 16 keys.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/suite.h"
#include "gpu/backend.h"
#include "gpu/lwe.h"
#include "gpu/packing.h"
#include "gpu/roofline.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/lwe.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/shape.h"

namespace veil::bench {
namespace {

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
  std::vector<uint8_t> records(rows * row_bytes);
  std::mt19937_64 gen(1);
  for (size_t i = 0; i + 8 <= records.size(); i += 8) {
    const uint64_t w = gen();
    std::memcpy(records.data() + i, &w, 8);
  }
  auto db = lattice::Database::FromRecords(*shape, records);
  if (!db.ok()) return db.status();
  records = {};
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

absl::Status PackingGpu(const Flags& flags) {
  const uint64_t rows = flags.Int("rows", 1 << 24);
  const int64_t row_bytes = flags.Int("row-bytes", 64);
  const int reps = static_cast<int>(flags.Int("reps", 10));
  if (row_bytes < 1 || reps < 1) return absl::InvalidArgumentError("bad --row-bytes or --reps");
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  lattice::ShapeOptions options;
  options.packed_ring_n = static_cast<uint32_t>(ctx.n());
  auto shape = lattice::ChooseShape(lattice::Protocol::kSimplePir, rows,
                                    static_cast<uint32_t>(row_bytes), options);
  if (!shape.ok()) return shape.status();
  // The hint's rows are the a-parts; their values do not change the kernel's cost.
  std::cerr << "packing-gpu: " << lattice::ShapeSummary(*shape) << ": transforming the matrix\n";
  std::mt19937_64 gen(4);
  std::vector<uint32_t> a(shape->d1 * lattice::kLweDimension);
  for (uint32_t& w : a) w = static_cast<uint32_t>(gen());
  auto matrix = lattice::PackingMatrix::Create(ctx, a, shape->d1, lattice::kLweDimension);
  if (!matrix.ok()) return matrix.status();
  a = {};
  auto gpu = gpu::GpuPackingSums::Create(ctx, *matrix);
  if (!gpu.ok()) return gpu.status();
  // Verified: 16 keys on the device and in the host run.
  const size_t slots = ctx.k() * ctx.n();
  std::vector<uint32_t> index(16);
  std::vector<uint64_t> beta(16 * slots), alpha(16 * slots);
  for (uint32_t j = 0; j < 16; ++j) index[j] = (j * 97) % lattice::kLweDimension;
  for (size_t r = 0; r < beta.size(); ++r) {
    const uint64_t q = ctx.base()[(r % slots) / ctx.n()].value();
    beta[r] = gen() % q;
    alpha[r] = gen() % q;
  }
  std::vector<uint64_t> expected(gpu::PackingSumWords(ctx, *matrix), 0), got = expected;
  if (absl::Status s =
          gpu::HostRunPackingSums(ctx, *matrix, index, beta, alpha, absl::MakeSpan(expected));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*gpu)->Accumulate(index, beta, alpha, absl::MakeSpan(got)); !s.ok()) {
    return s;
  }
  auto pass = (*gpu)->MeasurePass(reps);
  if (!pass.ok()) return pass.status();
  auto roof = gpu::MeasureDeviceRoofline(0, 0.1);
  if (!roof.ok()) return roof.status();
  const double bytes = static_cast<double>((*gpu)->matrix_bytes());
  JsonLine("packing-gpu")
      .Add("backend", "gpu")
      .Add("device", roof->device_name)
      .Add("rows", rows)
      .Add("row_bytes", row_bytes)
      .Add("d1", shape->d1)
      .Add("groups", matrix->groups())
      .Add("lwe_n", uint64_t{lattice::kLweDimension})
      .Add("matrix_bytes", bytes)
      .Add("pass_ms", *pass * 1e3)
      .Add("gbps", bytes / *pass / 1e9)
      .Add("mem_read_gbps", roof->mem_read_gbps)
      .Add("hbm_ratio", bytes / *pass / 1e9 / roof->mem_read_gbps)
      .Add("verified", got == expected)
      .Emit();
  return got == expected ? absl::OkStatus()
                         : absl::InternalError("the GPU packing sums differ from the host run's");
}

SuiteRegistration packing_gpu(
    "packing-gpu",
    "--rows --row-bytes [--reps]: ring packing's sums on the GPU for ExpPack(S)'s packing matrix "
    "of the table (groups x 1024 keys): pass_ms (one query's packing, keys on the device), gbps "
    "of matrix read, hbm_ratio; verified against the host run",
    PackingGpu);

}  // namespace
}  // namespace veil::bench
