#include "server/backend_select.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#ifdef VEIL_HAVE_GPU_BACKEND
#include "gpu/backend.h"
#include "gpu/exppack.h"
#include "gpu/lwe.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/sharding.h"
#endif

namespace veil::server {
namespace {

#ifndef VEIL_HAVE_GPU_BACKEND
absl::Status NoGpuBuilt() {
  return absl::UnavailableError(
      "this build has no GPU backend (configure with CUDA: -DVEIL_ENABLE_CUDA=ON on a machine "
      "with nvcc); use --backend=cpu or --backend=auto");
}
#endif

#ifdef VEIL_HAVE_GPU_BACKEND
// The devices of --gpus, or UNAVAILABLE when none is present.
absl::StatusOr<std::vector<int>> PresentDevices(absl::string_view gpus) {
  const int present = gpu::GpuDeviceCount();
  if (present == 0) {
    return absl::UnavailableError("no CUDA device is present (or no driver)");
  }
  return ParseGpuList(gpus, present);
}
#endif

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateGpu(const dpf::TableView& table,
                                                        absl::string_view gpus) {
#ifdef VEIL_HAVE_GPU_BACKEND
  absl::StatusOr<std::vector<int>> devices = PresentDevices(gpus);
  if (!devices.ok()) return devices.status();
  gpu::GpuBackendOptions options;
  options.devices = *std::move(devices);
  return gpu::CreateGpuBackend(table, options);
#else
  (void)table;
  (void)gpus;
  return NoGpuBuilt();
#endif
}

absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>> CreateLweGpu(
    const lattice::ByteMatrixView& db, int max_batch, absl::string_view gpus) {
#ifdef VEIL_HAVE_GPU_BACKEND
  absl::StatusOr<std::vector<int>> devices = PresentDevices(gpus);
  if (!devices.ok()) return devices.status();
  gpu::LweGpuOptions options;
  options.max_batch = max_batch;
  // One device holds the matrix; several split its rows (lattice::RowShardedProduct).
  std::vector<lattice::RowShardedProduct::Shard> shards;
  for (const lattice::RowRange& range : lattice::SplitRows(db.rows, devices->size(), 1)) {
    options.device = (*devices)[shards.size()];
    auto product = gpu::LweGpuProduct::Create(lattice::RowsOf(db, range), options);
    if (!product.ok()) return product.status();
    shards.push_back({range, *std::move(product)});
  }
  if (shards.size() == 1) return std::move(shards[0].product);
  auto sharded = lattice::RowShardedProduct::Create(db.rows, std::move(shards));
  if (!sharded.ok()) return sharded.status();
  return std::unique_ptr<lattice::DatabaseProduct>(*std::move(sharded));
#else
  (void)db;
  (void)max_batch;
  (void)gpus;
  return NoGpuBuilt();
#endif
}

absl::StatusOr<std::unique_ptr<lattice::PackingEngine>> CreatePackingEngineGpu(
    const lattice::RingContext& ring, const lattice::PackingMatrix& matrix, size_t max_sessions,
    absl::string_view gpus) {
#ifdef VEIL_HAVE_GPU_BACKEND
  absl::StatusOr<std::vector<int>> devices = PresentDevices(gpus);
  if (!devices.ok()) return devices.status();
  gpu::GpuPackingEngineOptions options;
  options.max_sessions = max_sessions;
  // As many levels deferred as the packed servers' CPU engine (pack_simple.cc): the same bytes.
  options.deferred_levels = lattice::BestDeferredLevels(matrix.lwe_n(), matrix.groups());
  options.fold_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // One device packs every group; several split the groups (lattice::GroupShardedPackingEngine),
  // each expanding the query itself.
  const std::vector<lattice::RowRange> ranges =
      lattice::SplitRows(matrix.groups(), devices->size(), 1);
  if (ranges.size() == 1) {
    options.device = devices->front();
    auto engine = gpu::GpuPackingEngine::Create(ring, matrix, options);
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<lattice::PackingEngine>(*std::move(engine));
  }
  std::vector<lattice::GroupShardedPackingEngine::Shard> shards;
  for (const lattice::RowRange& range : ranges) {
    options.device = (*devices)[shards.size()];
    auto part = matrix.Groups(ring, range.first, range.count);
    if (!part.ok()) return part.status();
    auto engine = gpu::GpuPackingEngine::Create(ring, *part, options);
    if (!engine.ok()) return engine.status();
    shards.push_back({range, *std::move(engine)});
  }
  auto sharded =
      lattice::GroupShardedPackingEngine::Create(ring, matrix.groups(), std::move(shards));
  if (!sharded.ok()) return sharded.status();
  return std::unique_ptr<lattice::PackingEngine>(*std::move(sharded));
#else
  (void)ring;
  (void)matrix;
  (void)max_sessions;
  (void)gpus;
  return NoGpuBuilt();
#endif
}

// --backend: "cpu" makes the CPU one, "gpu" the GPU one, "auto" the GPU one where it is built
// and starts, else (saying why on stderr) the CPU one.
template <typename T, typename MakeGpu, typename MakeCpu>
absl::StatusOr<T> Choose(absl::string_view name, MakeGpu make_gpu, MakeCpu make_cpu) {
  if (name == "cpu") return make_cpu();
  if (name == "gpu") return make_gpu();
  if (name == "auto") {
    if (GpuBackendBuilt()) {
      absl::StatusOr<T> gpu = make_gpu();
      if (gpu.ok()) return gpu;
      std::fprintf(stderr, "veil-server: GPU backend unavailable (%s); using the CPU backend\n",
                   std::string(gpu.status().message()).c_str());
    }
    return make_cpu();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend \"", name, "\": expected cpu, gpu or auto"));
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseGpuList(absl::string_view gpus, int present) {
  std::vector<int> devices;
  if (gpus == "all") {
    for (int d = 0; d < present; ++d) devices.push_back(d);
    return devices;
  }
  for (absl::string_view part : absl::StrSplit(gpus, ',')) {
    int d = -1;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: \"", std::string(part),
                       "\" is not a device number (expected all or a list such as 0,1)"));
    }
    if (std::find(devices.begin(), devices.end(), d) != devices.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus: device ", d, " is named twice"));
    }
    if (d >= present) {
      return absl::UnavailableError(
          absl::StrCat("--gpus: no CUDA device ", d, " (", present, " present)"));
    }
    devices.push_back(d);
  }
  return devices;
}

bool GpuBackendBuilt() {
#ifdef VEIL_HAVE_GPU_BACKEND
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateBackend(absl::string_view name,
                                                            const dpf::TableView& table,
                                                            int threads, absl::string_view gpus) {
  return Choose<std::unique_ptr<pir::Backend>>(
      name, [&] { return CreateGpu(table, gpus); },
      [&] { return pir::CreateCpuBackend(table, threads); });
}

absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>> CreateLweProduct(
    absl::string_view name, const lattice::ByteMatrixView& db, int max_batch,
    absl::string_view gpus) {
  return Choose<std::unique_ptr<lattice::DatabaseProduct>>(
      name, [&] { return CreateLweGpu(db, max_batch, gpus); },
      [] { return absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>>(nullptr); });
}

absl::StatusOr<std::unique_ptr<lattice::PackingEngine>> CreatePackingEngine(
    absl::string_view name, const lattice::RingContext& ring, const lattice::PackingMatrix& matrix,
    size_t max_sessions, absl::string_view gpus) {
  return Choose<std::unique_ptr<lattice::PackingEngine>>(
      name, [&] { return CreatePackingEngineGpu(ring, matrix, max_sessions, gpus); },
      [] { return absl::StatusOr<std::unique_ptr<lattice::PackingEngine>>(nullptr); });
}

}  // namespace veil::server
