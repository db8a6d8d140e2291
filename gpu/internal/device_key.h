// A DPF key flattened into one fixed-size, trivially copyable record, so that a batch of keys is
// one contiguous array that a kernel (or the host-run simulation of one) indexes directly.
// dpf::DpfKey keeps its correction words in std::vector; this is the same data without pointers.
#ifndef VEIL_GPU_INTERNAL_DEVICE_KEY_H_
#define VEIL_GPU_INTERNAL_DEVICE_KEY_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/params.h"

namespace veil::gpu::internal {

struct alignas(16) PackedKey {
  dpf::Block root;
  dpf::Block cw_seed[dpf::kMaxLogDomain];  // level i: seed correction, left control bit in bit 0
  uint32_t final_cw[16];                   // leaf_words of them are used
  uint64_t cw_right_bits;                  // bit i: level i's right control-bit correction
  uint8_t prg;                             // dpf::Prg
  uint8_t output;                          // dpf::OutputType
  uint8_t party;                           // 0 or 1
  uint8_t levels;                          // tree levels below the root
  uint8_t leaf_words;                      // 32-bit words per leaf block (W, or 4 for XOR)
  uint8_t leaf_points_log2;                // points per leaf block: W (additive) or 128 (XOR)
  uint8_t log_domain;
  uint8_t reserved = 0;

  VEIL_HD dpf::Prg prg_id() const { return static_cast<dpf::Prg>(prg); }
  VEIL_HD dpf::OutputType output_type() const { return static_cast<dpf::OutputType>(output); }
  VEIL_HD bool is_xor() const { return output_type() == dpf::OutputType::kXor; }
  VEIL_HD bool cw_right(int level) const { return ((cw_right_bits >> level) & 1) != 0; }
};
static_assert(sizeof(PackedKey) % 16 == 0);
static_assert(dpf::kMaxLogDomain <= 64, "cw_right_bits holds one bit per level");

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_DEVICE_KEY_H_
