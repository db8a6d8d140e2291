// AES-128 in counter mode, the expansion of the public LWE matrices: block i of the stream is
// AES_k(i as a 128-bit little-endian integer). Three bit-equal implementations: dpf's bitsliced
// AES (portable, two blocks per call, ~0.1 GB/s here), AES-NI (8 blocks in flight, ~5 GB/s) and
// VAES on 512-bit vectors (four blocks per instruction, 32 in flight, ~25 GB/s). The key is public,
// so constant time is not needed here, only speed.
#ifndef VEIL_PIR_LATTICE_AES_CTR_H_
#define VEIL_PIR_LATTICE_AES_CTR_H_

#include <cstdint>

#include "dpf/aes_bitsliced.h"

namespace veil::lattice::internal {

struct AesCtrKey {
  dpf::AesRoundKeys round_keys;
  dpf::AesSlicedKeys sliced;  // the same key in both blocks of the bitsliced cipher
};

AesCtrKey MakeAesCtrKey(const uint8_t key[16]);

// out[16 * i .. 16 * i + 16) = AES_k(first_block + i) for i < blocks, with the fastest
// implementation this CPU runs.
void AesCtr(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out);

// The implementations (tests compare them) and whether this CPU runs the fast ones.
void AesCtrPortable(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out);
void AesCtrAesNi(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out);
void AesCtrVaes(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out);
bool CpuHasAesNi();
bool CpuHasVaes();

}  // namespace veil::lattice::internal

#endif  // VEIL_PIR_LATTICE_AES_CTR_H_
