// The byte-wise AES-128 of FIPS-197 and the sigma-MMO hash over it: the plain reference the
// bitsliced AES (dpf/aes_bitsliced.h) is tested against. Tests only: its S-box lookups are
// indexed by secret bytes (not constant time).
#ifndef VEIL_TESTS_DPF_AES_REFERENCE_H_
#define VEIL_TESTS_DPF_AES_REFERENCE_H_

#include <cstdint>

#include "dpf/aes_bitsliced.h"
#include "dpf/block.h"

namespace veil::dpf::reference {

inline uint8_t AesXtime(uint8_t x) {
  return static_cast<uint8_t>((x << 1) ^ ((x >> 7) * 0x1b));
}

// FIPS-197 AES-128 encryption of one block (bytes in memory order: lo first, little-endian).
inline Block AesEncrypt(const uint8_t* sbox, const uint8_t* round_keys, Block in) {
  uint8_t s[16];
  for (int i = 0; i < 8; ++i) {
    s[i] = static_cast<uint8_t>(in.lo >> (8 * i)) ^ round_keys[i];
    s[i + 8] = static_cast<uint8_t>(in.hi >> (8 * i)) ^ round_keys[i + 8];
  }
  for (int round = 1; round <= 10; ++round) {
    uint8_t t[16];
    // SubBytes and ShiftRows: column-major state, row r shifted left by r.
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < 4; ++r) t[4 * c + r] = sbox[s[4 * ((c + r) & 3) + r]];
    }
    if (round != 10) {
      for (int c = 0; c < 4; ++c) {
        uint8_t a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
        uint8_t all = a0 ^ a1 ^ a2 ^ a3;
        t[4 * c] = a0 ^ all ^ AesXtime(a0 ^ a1);
        t[4 * c + 1] = a1 ^ all ^ AesXtime(a1 ^ a2);
        t[4 * c + 2] = a2 ^ all ^ AesXtime(a2 ^ a3);
        t[4 * c + 3] = a3 ^ all ^ AesXtime(a3 ^ a0);
      }
    }
    for (int i = 0; i < 16; ++i) s[i] = t[i] ^ round_keys[16 * round + i];
  }
  Block out;
  for (int i = 0; i < 8; ++i) {
    out.lo |= uint64_t{s[i]} << (8 * i);
    out.hi |= uint64_t{s[i + 8]} << (8 * i);
  }
  return out;
}

// H_k(x) = AES_k(sigma(x)) ^ sigma(x).
inline Block MmoHash(const uint8_t* sbox, const uint8_t* round_keys, Block x) {
  Block s = Sigma(x);
  return AesEncrypt(sbox, round_keys, s) ^ s;
}

}  // namespace veil::dpf::reference

#endif  // VEIL_TESTS_DPF_AES_REFERENCE_H_
