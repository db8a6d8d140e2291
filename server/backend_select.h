// Chooses the pir::Backend a server runs: the one place that knows which backends this build has.
#ifndef VEIL_SERVER_BACKEND_SELECT_H_
#define VEIL_SERVER_BACKEND_SELECT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dpf/eval.h"
#include "pir/lattice/packed.h"
#include "pir/lattice/server.h"
#include "pir/two_server/backend.h"

namespace veil::server {

// True when this build contains the GPU backend (gpu/ built with CUDA).
bool GpuBackendBuilt();

// The devices named by a --gpus value among `present` devices: "all" (0 .. present - 1) or a
// comma-separated list of distinct device numbers ("0,1"). Returns INVALID_ARGUMENT for anything
// else (naming the bad entry) and UNAVAILABLE for a device that is not present.
absl::StatusOr<std::vector<int>> ParseGpuList(absl::string_view gpus, int present);

// `name` is "cpu", "gpu" or "auto" (the GPU backend where it is built and a device answers, else
// the CPU one). The table must outlive the backend; `threads` is the CPU backend's thread count;
// `gpus` (ParseGpuList) the devices the GPU backend splits the table across.
// Returns INVALID_ARGUMENT for another name or a bad `gpus`, UNAVAILABLE for "gpu" in a build
// without the GPU backend (or when it cannot start), and the backend factory's error otherwise.
absl::StatusOr<std::unique_ptr<pir::Backend>> CreateBackend(absl::string_view name,
                                                            const dpf::TableView& table,
                                                            int threads,
                                                            absl::string_view gpus = "all");

// The database product of an LWE server (protocols lwe-simple, lwe-double) for --backend `name`:
// null for "cpu" (the CPU product built into lattice::LweServer), the GPU one (gpu/lwe.h) for
// "gpu" (the devices of `gpus` splitting the matrix's rows, lattice::RowShardedProduct), and for
// "auto" the GPU one where it is built and starts, else null. `max_batch` is the most queries one
// product call may hold. Returns CreateBackend's errors and LweGpuProduct::Create's.
absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>> CreateLweProduct(
    absl::string_view name, const lattice::ByteMatrixView& db, int max_batch,
    absl::string_view gpus = "all");

// Where a packed server (lwe-exppack-s, -d, lwe-hybrid, lwe-double-pack) expands queries and
// sums them against its matrix, for --backend `name`: null for "cpu" (keep the server's
// CpuPackingEngine), the GPU engine (gpu/exppack.h) for "gpu" (the devices of `gpus` splitting the
// packed groups, lattice::GroupShardedPackingEngine), and for
// "auto" the GPU one where it is built and starts, else null. Returns CreateBackend's errors and
// GpuPackingEngine::Create's.
// `max_sessions`: the sessions whose keys a device keeps (GpuPackingEngineOptions).
absl::StatusOr<std::unique_ptr<lattice::PackingEngine>> CreatePackingEngine(
    absl::string_view name, const lattice::RingContext& ring, const lattice::PackingMatrix& matrix,
    size_t max_sessions, absl::string_view gpus = "all");

}  // namespace veil::server

#endif  // VEIL_SERVER_BACKEND_SELECT_H_
