// The CPU ceilings the lattice benchmarks are judged against, measured in the same run
// (BENCHMARKS.md): read bandwidth for the memory-bound mat-vec, and the multiply-add rates of the
// two product kernels for the compute-bound batches. Micro-kernels, not the product kernels.
#ifndef VEIL_PIR_LATTICE_ROOFLINE_H_
#define VEIL_PIR_LATTICE_ROOFLINE_H_

#include <cstdint>
#include <vector>

#include "pir/he/huge_pages.h"

namespace veil::lattice {

struct CpuCeilings {
  int threads = 1;
  // Streaming 512-bit (portable: 64-bit) loads over a buffer far beyond the caches.
  double mem_read_bytes_per_s = 0;
  // vpmulld + vpaddd on register operands, 16 lanes (8 on AVX2 without AVX-512; 0 without AVX2).
  double int32_mac_per_s = 0;
  // vpdpbusd on register operands: byte multiply-adds (0 without AVX-512 VNNI).
  double vnni_byte_mac_per_s = 0;

  // The compute ceiling of the INT8 x INT32 product in 32-bit multiply-adds per second: the
  // faster of the int32 path and the byte planes (four byte products per word product).
  double word_mac_per_s() const {
    return int32_mac_per_s > vnni_byte_mac_per_s / 4 ? int32_mac_per_s : vnni_byte_mac_per_s / 4;
  }
};

// Each ceiling is the fastest of a few runs on `threads` threads at once (interference only
// slows a run down). Takes about a second; `read_bytes` sizes the bandwidth buffer.
CpuCeilings MeasureCpuCeilings(int threads, uint64_t read_bytes = uint64_t{512} << 20);

// A buffer of `bytes` (rounded down to whole 256-byte blocks per thread) read on `threads` >= 1
// threads at once, MeasureCpuCeilings' bandwidth read, timed on demand: for a ratio against work
// timed right after each read (a VM's bandwidth can drift by 2x within a minute, so a ceiling
// measured once need not be the one a later call met).
class ReadStream {
 public:
  ReadStream(int threads, uint64_t bytes);
  uint64_t bytes() const { return buffer_.size(); }
  // One read of the whole buffer, in seconds.
  double Seconds() const;

 private:
  int threads_;
  he::HugePageVector<uint8_t> buffer_;  // on huge pages where the kernel allows, as the database
};

namespace internal {
// The micro-kernels (kernels_avx512.cc, kernels_vnni.cc): `iters` iterations of 12 (int32) or
// 24 (VNNI) independent operations; the result only defeats dead-code elimination.
uint32_t Int32MacLoop(uint64_t iters);
// The AVX2 rows form's multiply-add (kernels_avx2.cc: vpmaddwd, 8 words' multiply-adds each): 6
// operations an iteration.
uint32_t Int32MacLoopAvx2(uint64_t iters);
uint32_t VnniLoop(uint64_t iters);
// XOR of all 64-bit words of [data, data + bytes), bytes a multiple of 256.
uint64_t ReadAvx512(const uint8_t* data, uint64_t bytes);
// The same on AVX2 (kernels_avx2.cc), four 64 KiB segments at a time with software prefetch.
uint64_t ReadAvx2(const uint8_t* data, uint64_t bytes);
}  // namespace internal

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_ROOFLINE_H_
