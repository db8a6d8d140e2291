// The LWE server's database product on a GPU (pir/lattice's DatabaseProduct): the matrix of
// signed bytes lives on the device, batches of query words go in, answers mod 2^32 come out, bit
// for bit equal to lattice::MultiplyBytes. Two methods (gpu/internal/lwe_phases.h): the CUDA
// cores (the mat-vec of batch 1, streaming the matrix once) and the tensor cores (VIPIR's INT8
// byte planes, for batches). This header includes no CUDA headers.
#ifndef VEIL_GPU_LWE_H_
#define VEIL_GPU_LWE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/server.h"

namespace veil::gpu {

enum class LweGpuMethod : uint8_t {
  kAuto = 0,         // CUDA cores below LweGpuOptions::tensor_min_batch, tensor cores from it
  kCudaCores = 1,    // 32-bit multiply-adds, each query word serving several rows
  kTensorCores = 2,  // s8 x s8 wmma over four digit planes
};

std::string_view LweGpuMethodName(LweGpuMethod method);  // "auto", "cuda-cores", "tensor-cores"
// Returns INVALID_ARGUMENT naming the accepted names otherwise.
absl::StatusOr<LweGpuMethod> ParseLweGpuMethod(std::string_view name);

struct LweGpuOptions {
  int device = 0;
  // Queries answered per call at most; sizes the device buffers allocated at creation (nothing
  // is allocated while answering).
  int max_batch = 256;
  int tensor_min_batch = 2;
};

class LweGpuResources;  // device, stream and buffers (gpu/lwe_product.cu)

class LweGpuProduct : public lattice::DatabaseProduct {
 public:
  // Copies the matrix to the device. The matrix need not outlive the product. Returns
  // UNAVAILABLE without a device, INVALID_ARGUMENT for an empty matrix or bad options,
  // RESOURCE_EXHAUSTED if device memory is short, INTERNAL for other CUDA failures.
  static absl::StatusOr<std::unique_ptr<LweGpuProduct>> Create(const lattice::ByteMatrixView& db,
                                                               const LweGpuOptions& options);
  ~LweGpuProduct() override;

  std::string name() const override { return "gpu"; }
  bool on_host() const override { return false; }
  // out[b * rows + r] = sum_c db[r][c] * queries[b * cols + c] (mod 2^32), with kAuto.
  absl::Status Multiply(absl::Span<const uint32_t> queries, int batch,
                        absl::Span<uint32_t> out) const override;
  // The same with a given method. Returns INVALID_ARGUMENT for spans of the wrong size or a batch
  // outside [1, max_batch], INTERNAL for CUDA failures. Calls from several threads are answered
  // one after the other.
  absl::Status MultiplyWith(LweGpuMethod method, absl::Span<const uint32_t> queries, int batch,
                            absl::Span<uint32_t> out) const;

  // Median seconds of the kernel launches alone for a batch of `batch` queries already on the
  // device, over `reps` runs timed with events: the device's time per batch without the PCIe
  // transfers (for the benchmarks' bandwidth figures). Errors as MultiplyWith.
  absl::StatusOr<double> TimeKernels(LweGpuMethod method, int batch, int reps) const;

  uint64_t device_bytes() const;
  std::string device_name() const;

 private:
  explicit LweGpuProduct(std::unique_ptr<LweGpuResources> resources);
  std::unique_ptr<LweGpuResources> resources_;
};

// The kernels' phases run on the host (gpu/lwe_host_run.cc): what the device computes, pass by
// pass and block by block, for CI without a GPU. Far too slow to serve. Returns INVALID_ARGUMENT
// as MultiplyWith (method kAuto picks as with the default options).
absl::Status LweHostRunMultiply(const lattice::ByteMatrixView& db,
                                absl::Span<const uint32_t> queries, int batch, LweGpuMethod method,
                                absl::Span<uint32_t> out);

}  // namespace veil::gpu

#endif  // VEIL_GPU_LWE_H_
