#include "pir/lattice/roofline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "pir/lattice/kernels.h"

namespace veil::lattice {
namespace {

// Fastest of `reps` runs of fn(thread) on `threads` threads at once, in seconds.
double FastestParallel(int threads, int reps, const std::function<void(int)>& fn) {
  double best = 1e300;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(fn, t);
    fn(0);
    for (std::thread& th : pool) th.join();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

bool Has(ProductKernel kernel) {
  const std::vector<ProductKernel> k = AvailableProductKernels();
  return std::find(k.begin(), k.end(), kernel) != k.end();
}

}  // namespace

ReadStream::ReadStream(int threads, uint64_t bytes)
    : threads_(threads),
      buffer_(bytes / (256 * static_cast<uint64_t>(threads)) * (256 * threads), 1) {}

double ReadStream::Seconds() const {
  std::atomic<uint64_t> sink{0};
  const bool avx512 = internal::CpuHasAvx512();
  const bool avx2 = Has(ProductKernel::kInt32Rows);  // AVX2 at least
  const uint64_t slice = buffer_.size() / threads_;
  return FastestParallel(threads_, 1, [&](int t) {
    const uint8_t* p = buffer_.data() + t * slice;
    if (avx512) {
      sink += internal::ReadAvx512(p, slice);
      return;
    }
    if (avx2) {
      sink += internal::ReadAvx2(p, slice);
      return;
    }
    uint64_t x[4] = {};
    const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
    for (uint64_t i = 0; i + 4 <= slice / 8; i += 4) {
      for (int u = 0; u < 4; ++u) x[u] ^= w[i + u];
    }
    sink += x[0] ^ x[1] ^ x[2] ^ x[3];
  });
}

CpuCeilings MeasureCpuCeilings(int threads, uint64_t read_bytes) {
  CpuCeilings c;
  c.threads = threads;
  std::atomic<uint64_t> sink{0};
  const ReadStream stream(threads, read_bytes);
  double fastest = stream.Seconds();
  for (int rep = 1; rep < 5; ++rep) fastest = std::min(fastest, stream.Seconds());
  c.mem_read_bytes_per_s = static_cast<double>(stream.bytes()) / fastest;
  constexpr uint64_t kIters = 1 << 22;  // 12, 6 (AVX2) or 24 operations each: ~0.05 s
  if (internal::CpuHasAvx512()) {
    c.int32_mac_per_s = 12.0 * 16 * kIters * threads / FastestParallel(threads, 3, [&](int) {
                          sink += internal::Int32MacLoop(kIters);
                        });
  } else if (Has(ProductKernel::kInt32Rows)) {
    c.int32_mac_per_s = 6.0 * 8 * kIters * threads / FastestParallel(threads, 3, [&](int) {
                          sink += internal::Int32MacLoopAvx2(kIters);
                        });
  }
  if (Has(ProductKernel::kPlanesRows)) {
    c.vnni_byte_mac_per_s = 24.0 * 64 * kIters * threads / FastestParallel(threads, 3, [&](int) {
                              sink += internal::VnniLoop(kIters);
                            });
  }
  return c;
}

}  // namespace veil::lattice
