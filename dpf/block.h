// A 128-bit block: a DPF seed (its lowest bit is the control bit), a PRG output, or a leaf value.
#ifndef VEIL_DPF_BLOCK_H_
#define VEIL_DPF_BLOCK_H_

#include <cstdint>

#include "dpf/hd.h"

namespace veil::dpf {

struct alignas(16) Block {
  uint64_t lo = 0;  // bytes 0..7 in little-endian order; bit 0 is the control bit of a seed
  uint64_t hi = 0;  // bytes 8..15

  VEIL_HD friend Block operator^(Block a, Block b) { return {a.lo ^ b.lo, a.hi ^ b.hi}; }
  VEIL_HD friend Block operator&(Block a, Block b) { return {a.lo & b.lo, a.hi & b.hi}; }
  VEIL_HD friend bool operator==(Block a, Block b) { return a.lo == b.lo && a.hi == b.hi; }
  VEIL_HD Block& operator^=(Block b) {
    lo ^= b.lo;
    hi ^= b.hi;
    return *this;
  }
  VEIL_HD bool control_bit() const { return (lo & 1) != 0; }
  VEIL_HD Block without_control_bit() const { return {lo & ~uint64_t{1}, hi}; }
  // All ones if bit is set, else all zeros: selects without a branch on a secret bit.
  VEIL_HD static Block Mask(bool bit) {
    uint64_t m = uint64_t{0} - static_cast<uint64_t>(bit);
    return {m, m};
  }
};
static_assert(sizeof(Block) == 16);

}  // namespace veil::dpf

#endif  // VEIL_DPF_BLOCK_H_
