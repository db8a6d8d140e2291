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
#include "gpu/roofline.h"
#include "pir/lattice/kernels.h"
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

}  // namespace
}  // namespace veil::bench
