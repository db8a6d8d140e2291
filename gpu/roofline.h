// The device's ceilings measured in the same run as the benchmarks (BENCHMARKS.md: figures are
// judged against the roofline of their own run). No CUDA types.
#ifndef VEIL_GPU_ROOFLINE_H_
#define VEIL_GPU_ROOFLINE_H_

#include <string>

#include "absl/status/statusor.h"

namespace veil::gpu {

struct DeviceRoofline {
  std::string device_name;
  int sms = 0;
  double chacha12_blocks_per_s = 0;  // 64-byte ChaCha12 blocks, dpf's ChaChaBlock, all SMs
  double chacha8_blocks_per_s = 0;
  double aes_blocks_per_s = 0;       // sigma-MMO AES-128 blocks (the kernels' bitsliced AES)
  double siphash_per_s = 0;     // SipHash-2-4 of one 8-byte word
  double mem_read_gbps = 0;     // streaming 16-byte loads over a buffer far larger than L2
  double int32_mac_per_s = 0;   // IMAD (mod 2^32 multiply-add) on the CUDA cores
  double int8_mac_per_s = 0;    // wmma s8 m16n16k16 on the tensor cores, INT32 accumulation
};

// Runs each micro-kernel for about `seconds_each` on `device`. Returns UNAVAILABLE without a
// device, INTERNAL for CUDA failures.
absl::StatusOr<DeviceRoofline> MeasureDeviceRoofline(int device, double seconds_each = 0.2);

}  // namespace veil::gpu

#endif  // VEIL_GPU_ROOFLINE_H_
