#include "server/backend_select.h"

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#ifdef VEIL_HAVE_GPU_BACKEND
#include "gpu/backend.h"
#endif

namespace veil::server {
namespace {

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateGpu(const dpf::TableView& table) {
#ifdef VEIL_HAVE_GPU_BACKEND
  if (gpu::GpuDeviceCount() == 0) {
    return absl::UnavailableError("no CUDA device is present (or no driver)");
  }
  return gpu::CreateGpuBackend(table, gpu::GpuBackendOptions{});
#else
  (void)table;
  return absl::UnavailableError(
      "this build has no GPU backend (configure with CUDA: -DVEIL_ENABLE_CUDA=ON on a machine "
      "with nvcc); use --backend=cpu or --backend=auto");
#endif
}

}  // namespace

bool GpuBackendBuilt() {
#ifdef VEIL_HAVE_GPU_BACKEND
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateBackend(absl::string_view name,
                                                            const dpf::TableView& table,
                                                            int threads) {
  if (name == "cpu") return pir::CreateCpuBackend(table, threads);
  if (name == "gpu") return CreateGpu(table);
  if (name == "auto") {
    if (GpuBackendBuilt()) {
      auto gpu = CreateGpu(table);
      if (gpu.ok()) return gpu;
      std::fprintf(stderr, "veil-server: GPU backend unavailable (%s); using the CPU backend\n",
                   std::string(gpu.status().message()).c_str());
    }
    return pir::CreateCpuBackend(table, threads);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend \"", name, "\": expected cpu, gpu or auto"));
}

}  // namespace veil::server
