// The GPU packing sums: a __global__ wrapper over the phase body of
// gpu/internal/packing_phases.h (the code CI runs on the host), its launch and its measurement.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/cuda_check.h"
#include "gpu/internal/cuda_timing.h"
#include "gpu/internal/packing_phases.h"
#include "gpu/internal/qp_device.h"
#include "gpu/internal/runners.h"
#include "gpu/internal/switch_phases.h"
#include "gpu/packing.h"

namespace veil::gpu {
namespace {

template <uint32_t Q>
__global__ void __launch_bounds__(internal::kPackThreads)
    PackingKernel(const internal::PackingArgs a) {
  internal::BlockRunner run;
  internal::PackingBlock<Q>(run, a, blockIdx.y, blockIdx.x);
}

__global__ void __launch_bounds__(internal::kPackThreads)
    NarrowKernel(const internal::NarrowArgs a) {
  internal::BlockRunner run;
  internal::NarrowLeavesBlock(run, a, blockIdx.x);
}

__global__ void __launch_bounds__(internal::kNttBlockThreads)
    SwitchKernel(const internal::SwitchArgs a) {
  extern __shared__ uint64_t shared[];
  internal::BlockRunner run;
  internal::SwitchBlock(run, a, blockIdx.x, shared);
}

}  // namespace

struct GpuPackingSums::Impl {
  int device = 0;
  internal::PackingShape shape;
  uint64_t matrix_words = 0;
  uint32_t* d_matrix = nullptr;
  uint64_t* d_moduli = nullptr;
  uint64_t* d_two64 = nullptr;
  uint32_t* d_leaf_index = nullptr;  // 0, 1, ..., n - 1: every leaf's key, in order
  // Per call: Accumulate's indices, keys and sums, grown as needed.
  uint32_t* d_index = nullptr;
  uint32_t* d_keys = nullptr;                                     // per query: beta, then alpha
  uint64_t* d_sums = nullptr;                                     // per query
  size_t index_capacity = 0, key_capacity = 0, sum_capacity = 0;  // indices; words; words
  cudaStream_t stream = nullptr;
  std::mutex mu;

  ~Impl() {
    cudaSetDevice(device);
    cudaFree(d_matrix);
    cudaFree(d_moduli);
    cudaFree(d_two64);
    cudaFree(d_leaf_index);
    cudaFree(d_index);
    cudaFree(d_keys);
    cudaFree(d_sums);
    if (stream) cudaStreamDestroy(stream);
  }

  size_t sum_words() const { return shape.groups * 2 * shape.slots; }
  uint64_t key_words(size_t keys) const { return 2 * keys * shape.slots; }

  // A buffer of at least `count` elements at *p (its old contents dropped).
  template <class T>
  static absl::Status Grow(T** p, size_t& capacity, size_t count) {
    if (count <= capacity) return absl::OkStatus();
    VEIL_CUDA_RETURN_IF_ERROR(cudaFree(*p));
    *p = nullptr;
    capacity = 0;
    VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(p, count * sizeof(T)));
    capacity = count;
    return absl::OkStatus();
  }

  // Room for the keys of `queries` queries of `keys` keys each, and their sums.
  absl::Status Reserve(size_t keys, uint32_t queries = 1) {
    VEIL_RETURN_IF_ERROR(Grow(&d_keys, key_capacity, queries * key_words(keys)));
    return Grow(&d_sums, sum_capacity, queries * sum_words());
  }

  // The kernel over `queries` queries' keys and sums already at d_keys and d_sums, the keys'
  // indices (`count` of them) at `index`.
  absl::Status Launch(const uint32_t* index, uint32_t count, uint32_t queries = 1) {
    internal::PackingArgs args;
    args.matrix = d_matrix;
    args.lwe_n = shape.lwe_n;
    args.slots = shape.slots;
    args.log_n = shape.log_n;
    args.count = count;
    args.index = index;
    args.beta = d_keys;
    args.alpha = d_keys + uint64_t{count} * shape.slots;
    args.key_stride = key_words(count);
    args.moduli = d_moduli;
    args.two64 = d_two64;
    args.sums = d_sums;
    args.sum_stride = sum_words();
    // Groups vary fastest: the blocks of one slot range run side by side and read its keys from
    // L2 (all of one query's keys, 96 MiB at n = 1,024, do not fit there).
    const dim3 grid(static_cast<uint32_t>(shape.groups),
                    (shape.slots + internal::kPackThreads - 1) / internal::kPackThreads);
    internal::WithPackQueries(queries, [&]<uint32_t Q>() {
      PackingKernel<Q><<<grid, internal::kPackThreads, 0, stream>>>(args);
    });
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }

  // The leaves at `leaves` narrowed into query slot `q`'s keys.
  absl::Status Narrow(const uint64_t* leaves, uint32_t q) {
    const internal::NarrowArgs narrow{leaves, d_keys + q * key_words(shape.lwe_n), shape.lwe_n,
                                      shape.slots};
    NarrowKernel<<<internal::NarrowBlocks(shape.lwe_n, shape.slots), internal::kPackThreads, 0,
                   stream>>>(narrow);
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
};

GpuPackingSums::GpuPackingSums(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuPackingSums::~GpuPackingSums() = default;

uint64_t GpuPackingSums::matrix_bytes() const { return impl_->matrix_words * sizeof(uint32_t); }

absl::StatusOr<std::unique_ptr<GpuPackingSums>> GpuPackingSums::Create(
    const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix, int device) {
  absl::StatusOr<internal::PackingShape> shape = internal::MakePackingShape(ctx, matrix);
  if (!shape.ok()) return shape.status();
  if (shape->groups > 0x7fffffff) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU packing takes up to 2^31 - 1 groups, not ", shape->groups));
  }
  VEIL_RETURN_IF_ERROR(internal::CheckDevice(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->shape = *std::move(shape);
  impl->matrix_words = matrix.bytes() / sizeof(uint32_t);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  const internal::PackingShape& sh = impl->shape;
  VEIL_RETURN_IF_ERROR(
      internal::UploadNew(&impl->d_matrix, matrix.Polynomial(0, 0), impl->matrix_words));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_moduli, sh.moduli.data(), sh.moduli.size()));
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_two64, sh.two64.data(), sh.two64.size()));
  std::vector<uint32_t> leaf_index(sh.lwe_n);
  for (uint32_t j = 0; j < sh.lwe_n; ++j) leaf_index[j] = j;
  VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_leaf_index, leaf_index.data(), sh.lwe_n));
  return std::unique_ptr<GpuPackingSums>(new GpuPackingSums(std::move(impl)));
}

absl::Status GpuPackingSums::Accumulate(absl::Span<const uint32_t> index,
                                        absl::Span<const uint64_t> beta,
                                        absl::Span<const uint64_t> alpha,
                                        absl::Span<uint64_t> sums) const {
  Impl& m = *impl_;
  absl::StatusOr<std::vector<uint32_t>> keys =
      internal::CheckPackingInputs(m.shape, index, beta, alpha, sums);
  if (!keys.ok()) return keys.status();
  if (index.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  VEIL_RETURN_IF_ERROR(Impl::Grow(&m.d_index, m.index_capacity, index.size()));
  VEIL_RETURN_IF_ERROR(m.Reserve(index.size()));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(m.d_index, index.data(), index.size() * 4, cudaMemcpyHostToDevice, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(m.d_keys, keys->data(), keys->size() * 4, cudaMemcpyHostToDevice, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(m.d_sums, sums.data(), sums.size() * 8, cudaMemcpyHostToDevice, m.stream));
  VEIL_RETURN_IF_ERROR(m.Launch(m.d_index, static_cast<uint32_t>(index.size())));
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(sums.data(), m.d_sums, sums.size() * 8, cudaMemcpyDeviceToHost, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
  return absl::OkStatus();
}

int GpuPackingSums::device() const { return impl_->device; }

absl::Status GpuPackingSums::CopySums(const uint64_t* device_sums,
                                      absl::Span<uint64_t> sums) const {
  if (sums.size() != impl_->sum_words()) {
    return absl::InvalidArgumentError(absl::StrCat("packing sums of leaves: ", sums.size(),
                                                   " sums (expected ", impl_->sum_words(), ")"));
  }
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(sums.data(), device_sums, sums.size() * 8, cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

std::vector<absl::Status> GpuPackingSums::SumLeavesBatchThen(
    absl::Span<const uint64_t* const> leaves, UseSums use) const {
  static_assert(kMaxBatch == internal::kPackMaxQueries);
  Impl& m = *impl_;
  const uint32_t count = static_cast<uint32_t>(leaves.size());
  if (leaves.empty() || leaves.size() > kMaxBatch) {
    return std::vector<absl::Status>(
        leaves.size(),
        absl::InvalidArgumentError(absl::StrCat("a batch of packing sums takes 1 to ", kMaxBatch,
                                                " queries, not ", leaves.size())));
  }
  const uint32_t n = m.shape.lwe_n;
  std::lock_guard<std::mutex> lock(m.mu);
  const absl::Status pass = [&]() -> absl::Status {
    VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
    VEIL_RETURN_IF_ERROR(m.Reserve(n, count));
    for (uint32_t i = 0; i < count; ++i) VEIL_RETURN_IF_ERROR(m.Narrow(leaves[i], i));
    VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.d_sums, 0, count * m.sum_words() * 8, m.stream));
    VEIL_RETURN_IF_ERROR(m.Launch(m.d_leaf_index, n, count));
    VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
    return absl::OkStatus();
  }();
  if (!pass.ok()) return std::vector<absl::Status>(count, pass);
  std::vector<const uint64_t*> sums;
  for (uint32_t i = 0; i < count; ++i) sums.push_back(m.d_sums + i * m.sum_words());
  return use(sums);
}

absl::StatusOr<double> GpuPackingSums::MeasurePass(int reps, uint32_t queries) const {
  if (queries == 0 || queries > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pass takes 1 to ", kMaxBatch, " queries, not ", queries));
  }
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  const uint32_t n = m.shape.lwe_n;
  VEIL_RETURN_IF_ERROR(m.Reserve(n, queries));
  // Zero keys and sums are valid residues; the kernel's cost does not depend on the values.
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.d_keys, 0, queries * m.key_words(n) * 4, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.d_sums, 0, queries * m.sum_words() * 8, m.stream));
  return internal::MedianLaunchSeconds(
      m.stream, reps, [] { return absl::OkStatus(); },
      [&] { return m.Launch(m.d_leaf_index, n, queries); });
}

struct GpuResponseSwitch::Impl {
  int device = 0;
  lattice::RingContext ring;
  internal::SwitchPlan plan;
  std::vector<uint64_t*> d_iroots;
  uint64_t* d_halves = nullptr;
  uint32_t* d_out = nullptr;
  size_t capacity = 0;  // ciphertexts
  cudaStream_t stream = nullptr;
  std::mutex mu;

  explicit Impl(lattice::RingContext r) : ring(std::move(r)) {}
  ~Impl() {
    cudaSetDevice(device);
    for (uint64_t* p : d_iroots) cudaFree(p);
    cudaFree(d_halves);
    cudaFree(d_out);
    if (stream) cudaStreamDestroy(stream);
  }
  uint64_t n() const { return uint64_t{1} << plan.log_n; }
  absl::Status Reserve(size_t count) {
    if (count <= capacity) return absl::OkStatus();
    VEIL_CUDA_RETURN_IF_ERROR(cudaFree(d_halves));
    VEIL_CUDA_RETURN_IF_ERROR(cudaFree(d_out));
    d_halves = nullptr;
    d_out = nullptr;
    capacity = 0;
    VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_halves, count * 2 * plan.k * n() * sizeof(uint64_t)));
    VEIL_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_out, count * 2 * n() * sizeof(uint32_t)));
    capacity = count;
    return absl::OkStatus();
  }
  absl::Status Launch(uint32_t count) {
    internal::SwitchArgs args = internal::MakeSwitchArgs(plan, d_iroots);
    args.halves = d_halves;
    args.out = d_out;
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>(internal::kNttBlockThreads, n() / 2));
    SwitchKernel<<<2 * count, threads, n() * sizeof(uint64_t), stream>>>(args);
    VEIL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
};

GpuResponseSwitch::GpuResponseSwitch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuResponseSwitch::~GpuResponseSwitch() = default;

absl::StatusOr<std::unique_ptr<GpuResponseSwitch>> GpuResponseSwitch::Create(
    const lattice::RingContext& ctx, int device) {
  absl::StatusOr<internal::SwitchPlan> plan = internal::MakeSwitchPlan(ctx);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<Impl>> started =
      internal::StartOnDevice<Impl>(ctx, *std::move(plan), device);
  if (!started.ok()) return started.status();
  std::unique_ptr<Impl> impl = *std::move(started);
  for (const internal::MontgomeryNttTables& t : impl->plan.tables) {
    impl->d_iroots.push_back(nullptr);
    VEIL_RETURN_IF_ERROR(internal::UploadNew(&impl->d_iroots.back(), t.inverse_roots.data(),
                                             t.inverse_roots.size()));
  }
  return std::unique_ptr<GpuResponseSwitch>(new GpuResponseSwitch(std::move(impl)));
}

absl::StatusOr<std::vector<lattice::SwitchedCiphertext>> GpuResponseSwitch::Switch(
    absl::Span<const lattice::RlweCiphertext> packed) const {
  Impl& m = *impl_;
  absl::StatusOr<std::vector<uint64_t>> halves = internal::SwitchHalves(m.ring, packed);
  if (!halves.ok()) return halves.status();
  std::vector<lattice::SwitchedCiphertext> out(packed.size());
  if (packed.empty()) return out;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  VEIL_RETURN_IF_ERROR(m.Reserve(packed.size()));
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.d_halves, halves->data(),
                                            halves->size() * sizeof(uint64_t),
                                            cudaMemcpyHostToDevice, m.stream));
  VEIL_RETURN_IF_ERROR(m.Launch(static_cast<uint32_t>(packed.size())));
  std::vector<uint32_t> words(packed.size() * 2 * m.n());
  VEIL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(words.data(), m.d_out, words.size() * 4, cudaMemcpyDeviceToHost, m.stream));
  VEIL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
  const uint64_t n = m.n();
  for (size_t t = 0; t < packed.size(); ++t) {
    out[t].c0.assign(words.begin() + 2 * t * n, words.begin() + (2 * t + 1) * n);
    out[t].c1.assign(words.begin() + (2 * t + 1) * n, words.begin() + (2 * t + 2) * n);
  }
  return out;
}

absl::StatusOr<double> GpuResponseSwitch::MeasureSwitch(uint32_t count, int reps) const {
  if (count == 0) return absl::InvalidArgumentError("count must be positive");
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  VEIL_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  VEIL_RETURN_IF_ERROR(m.Reserve(count));
  // Zero residues are valid; the cost does not depend on the values.
  VEIL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      m.d_halves, 0, size_t{count} * 2 * m.plan.k * m.n() * sizeof(uint64_t), m.stream));
  return internal::MedianLaunchSeconds(
      m.stream, reps, [] { return absl::OkStatus(); }, [&] { return m.Launch(count); });
}

}  // namespace veil::gpu
