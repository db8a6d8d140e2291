// Chooses the pir::Backend a server runs: the one place that knows which backends this build has.
#ifndef VEIL_SERVER_BACKEND_SELECT_H_
#define VEIL_SERVER_BACKEND_SELECT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dpf/eval.h"
#include "pir/two_server/backend.h"

namespace veil::server {

// True when this build contains the GPU backend (gpu/ built with CUDA).
bool GpuBackendBuilt();

// `name` is "cpu", "gpu" or "auto" (the GPU backend where it is built and a device answers, else
// the CPU one). The table must outlive the backend; `threads` is the CPU backend's thread count.
// Returns INVALID_ARGUMENT for another name, UNAVAILABLE for "gpu" in a build without the GPU
// backend (or when it cannot start), and the backend factory's error otherwise.
absl::StatusOr<std::unique_ptr<pir::Backend>> CreateBackend(absl::string_view name,
                                                            const dpf::TableView& table,
                                                            int threads);

}  // namespace veil::server

#endif  // VEIL_SERVER_BACKEND_SELECT_H_
