#include "server/backend_select.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#ifdef VEIL_HAVE_GPU_BACKEND
#include "gpu/backend.h"
#endif

namespace veil::server {
namespace {

absl::StatusOr<std::unique_ptr<pir::Backend>> CreateGpu(const dpf::TableView& table,
                                                        absl::string_view gpus) {
#ifdef VEIL_HAVE_GPU_BACKEND
  const int present = gpu::GpuDeviceCount();
  if (present == 0) {
    return absl::UnavailableError("no CUDA device is present (or no driver)");
  }
  absl::StatusOr<std::vector<int>> devices = ParseGpuList(gpus, present);
  if (!devices.ok()) return devices.status();
  gpu::GpuBackendOptions options;
  options.devices = *std::move(devices);
  return gpu::CreateGpuBackend(table, options);
#else
  (void)table;
  (void)gpus;
  return absl::UnavailableError(
      "this build has no GPU backend (configure with CUDA: -DVEIL_ENABLE_CUDA=ON on a machine "
      "with nvcc); use --backend=cpu or --backend=auto");
#endif
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
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus: \"", std::string(part), "\" is not a device number (expected all or a list such as 0,1)"));
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
  if (name == "cpu") return pir::CreateCpuBackend(table, threads);
  if (name == "gpu") return CreateGpu(table, gpus);
  if (name == "auto") {
    if (GpuBackendBuilt()) {
      auto gpu = CreateGpu(table, gpus);
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
