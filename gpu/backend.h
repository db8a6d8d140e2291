// The GPU implementation of pir::Backend (faiss's GpuIndex pattern): the same interface and the
// same answers as the CPU backend, computed by the CUDA kernels of gpu/ on one or more devices.
// This header includes no CUDA headers; the device state lives in gpu/internal (CUDA only).
#ifndef VEIL_GPU_BACKEND_H_
#define VEIL_GPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/eval.h"
#include "dpf/key.h"
#include "gpu/strategy.h"
#include "pir/two_server/backend.h"

namespace veil::gpu {

struct GpuBackendOptions {
  Strategy strategy = Strategy::kBoundedWindow;
  TableDtype dtype = TableDtype::kUint32;
  // Devices holding a row slice each; partial answers are combined with NCCL (gpu/README.md).
  // One device with NCCL available still runs the NCCL path as a one-rank communicator.
  std::vector<int> devices = {0};
  // With one device, still combine through a one-rank NCCL communicator (exercises the multi-GPU
  // path). Several devices always use NCCL.
  bool use_nccl = true;
  // Several processes, one device each (on one host or several): this process is rank `rank` of
  // `ranks`, holds the rank-th row slice of the table and joins the NCCL communicator named by
  // `nccl_id` (NewNcclId() on one process, handed to the others out of band). Create blocks until
  // every rank has joined. Answer and AnswerRange are then collective calls: every rank must make
  // the same calls with the same keys in the same order, and each gets the whole answer. Empty:
  // one process driving `devices`.
  std::string nccl_id;
  int rank = 0;
  int ranks = 1;
  // Keys answered per pass; larger requests are split. Sizes the scratch memory allocated at
  // creation (nothing is allocated while answering).
  int max_batch = 1024;
  int keys_per_block =
      8;  // keys sharing each table tile (at most 8; fewer if shared memory is short)
  // From this many rows one query fills the device: keys run one at a time (lowest latency)
  // instead of being batched.
  uint64_t single_query_rows = uint64_t{4} << 20;
  // Level-by-level only: bound on the node buffer; keys are expanded in groups that fit. One key's
  // leaves (16 B a row) are held whatever the bound: 16 GiB at 2^30 rows.
  uint64_t level_buffer_bytes = uint64_t{1} << 30;
};

// Device memory held by a backend, per strategy (for the benchmarks' memory comparison).
struct GpuMemoryReport {
  uint64_t table_bytes = 0;             // the table copy on all devices
  uint64_t node_buffer_bytes = 0;       // level-by-level node buffer (0 for the other strategies)
  uint64_t staging_bytes = 0;           // keys, answers and NCCL buffers
  uint32_t shared_bytes_per_block = 0;  // for 16-word additive keys, K keys per block
  int keys_per_block = 0;
};

class GpuResources;  // streams, device buffers, NCCL communicators (defined in backend.cu)

class GpuBackend : public pir::Backend {
 public:
  // Copies the table to the devices and allocates all scratch memory. The table must outlive
  // the backend. Returns UNAVAILABLE if a device is missing, INVALID_ARGUMENT for bad options or
  // (INT8) a table word outside -128..127, RESOURCE_EXHAUSTED if device memory is short or a row
  // does not fit the shared memory, INTERNAL (with the CUDA or NCCL error) for other failures.
  static absl::StatusOr<std::unique_ptr<GpuBackend>> Create(const dpf::TableView& table,
                                                            const GpuBackendOptions& options);
  ~GpuBackend() override;

  std::string name() const override { return "gpu"; }
  const dpf::TableView& table() const override;
  // Returns INVALID_ARGUMENT as pir::Backend says; INTERNAL for a CUDA or NCCL failure. Calls
  // from several threads are answered one after the other (they share the device buffers).
  absl::Status Answer(absl::Span<const dpf::DpfKey* const> keys, absl::Span<uint32_t> out) override;
  // On the devices too: each device multiplies the rows of the range it holds.
  absl::Status AnswerRange(absl::Span<const dpf::DpfKey* const> keys, const pir::RowRange& range,
                           absl::Span<uint32_t> out) override;

  const GpuBackendOptions& options() const;
  GpuMemoryReport memory() const;
  // How partial answers are combined: "nccl, N ranks", or "none: <why>" (built without NCCL, or
  // its initialisation failed on a single device, which then answers alone).
  std::string collective() const;

 private:
  explicit GpuBackend(std::unique_ptr<GpuResources> resources);
  absl::Status AnswerRows(absl::Span<const dpf::DpfKey* const> keys, const pir::RowRange& range,
                          absl::Span<uint32_t> out);
  std::unique_ptr<GpuResources> resources_;
};

// As GpuBackend::Create, typed as the interface.
absl::StatusOr<std::unique_ptr<pir::Backend>> CreateGpuBackend(const dpf::TableView& table,
                                                               const GpuBackendOptions& options);

// A new NCCL communicator id for GpuBackendOptions::nccl_id (ncclGetUniqueId: it also names the
// creating host's bootstrap address). UNIMPLEMENTED when built without NCCL.
absl::StatusOr<std::string> NewNcclId();

// Number of usable CUDA devices; 0 where there is no driver or no device.
int GpuDeviceCount();

}  // namespace veil::gpu

#endif  // VEIL_GPU_BACKEND_H_
