#include "pir/lattice/aes_ctr.h"

#include <cstring>

#include "dpf/kernels.h"

namespace veil::lattice::internal {

AesCtrKey MakeAesCtrKey(const uint8_t key[16]) {
  AesCtrKey k;
  k.round_keys = dpf::ExpandAesKey(key);
  k.sliced = dpf::SliceRoundKeys(k.round_keys, k.round_keys);
  return k;
}

// dpf/kernels.cc's CPU check: kAesNiAvx2 needs AES-NI, kVaesAvx512 VAES and AVX-512 as well.
bool CpuHasAesNi() {
  static const bool aesni = dpf::AvailableIsas().back() != dpf::Isa::kPortable;
  return aesni;
}

bool CpuHasVaes() {
  static const bool vaes = dpf::AvailableIsas().back() == dpf::Isa::kVaesAvx512;
  return vaes;
}

void AesCtrPortable(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out) {
  for (uint64_t i = 0; i < blocks; i += 2) {
    dpf::Block c0{first_block + i, 0}, c1{first_block + i + 1, 0}, e0, e1;
    dpf::AesEncrypt2(key.sliced, c0, c1, e0, e1);
    std::memcpy(out + 16 * i, &e0, 16);
    if (i + 1 < blocks) std::memcpy(out + 16 * (i + 1), &e1, 16);
  }
}

void AesCtr(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out) {
  if (CpuHasVaes()) {
    AesCtrVaes(key, first_block, blocks, out);
  } else if (CpuHasAesNi()) {
    AesCtrAesNi(key, first_block, blocks, out);
  } else {
    AesCtrPortable(key, first_block, blocks, out);
  }
}

}  // namespace veil::lattice::internal
