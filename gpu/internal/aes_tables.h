// Fixed-key AES for the GPU kernels with one 32-bit T-table: the same function as
// dpf::AesEncrypt (FIPS-197, bytes in memory order), computed a column at a time. A round is 16
// table reads and 16 XORs instead of dpf's 16 S-box reads plus the byte-wise MixColumns, which
// matters on a GPU where the byte arithmetic dominates. Tested bit for bit against dpf::AesEncrypt.
//
// Layout of the table words (copied as one block into shared memory):
//   [0, 256)     te0[x] = (2.S[x], S[x], S[x], 3.S[x]) as a little-endian word: the MixColumns
//                contribution of a row-0 byte x; rows 1..3 are its rotations by 8, 16, 24 bits
//   [256, 388)   round keys of kL, kR, kV: 44 little-endian words each (the dpf schedules)
//   [388, 452)   the S-box, 4 bytes per word (last round)
#ifndef VEIL_GPU_INTERNAL_AES_TABLES_H_
#define VEIL_GPU_INTERNAL_AES_TABLES_H_

#include <array>
#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/prg_portable.h"

namespace veil::gpu::internal {

using dpf::Block;

inline constexpr uint32_t kAesTableWords = 256 + 3 * 44 + 64;

struct AesTables {
  const uint32_t* te0;
  const uint32_t* rk_left;
  const uint32_t* rk_right;
  const uint32_t* rk_value;
  const uint8_t* sbox;
};

VEIL_HD AesTables AesTablesAt(const uint32_t* words) {
  return {words, words + 256, words + 256 + 44, words + 256 + 88,
          reinterpret_cast<const uint8_t*>(words + 256 + 132)};
}

constexpr std::array<uint32_t, kAesTableWords> HostAesTableWords() {
  std::array<uint32_t, kAesTableWords> w{};
  for (uint32_t x = 0; x < 256; ++x) {
    const uint32_t s = dpf::kAesSbox[x];
    const uint32_t s2 = ((s << 1) ^ ((s >> 7) * 0x1b)) & 0xff;  // 2.S[x] in GF(2^8)
    w[x] = s2 | s << 8 | s << 16 | (s2 ^ s) << 24;
  }
  const dpf::AesRoundKeys* keys[3] = {&dpf::kAesRoundKeysLeft, &dpf::kAesRoundKeysRight,
                                      &dpf::kAesRoundKeysValue};
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 44; ++j) {
      const uint8_t* b = keys[k]->bytes + 4 * j;
      w[256 + 44 * k + j] =
          b[0] | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
    }
  }
  for (int j = 0; j < 64; ++j) {
    const uint8_t* b = dpf::kAesSbox + 4 * j;
    w[388 + j] = b[0] | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
  }
  return w;
}

VEIL_HD uint32_t RotlWord(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

// One column of SubBytes + ShiftRows + MixColumns: row r comes from column (c + r) mod 4.
VEIL_HD uint32_t AesColumn(const uint32_t* te0, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return te0[a & 0xff] ^ RotlWord(te0[(b >> 8) & 0xff], 8) ^ RotlWord(te0[(c >> 16) & 0xff], 16) ^
         RotlWord(te0[d >> 24], 24);
}

// The last round's column: SubBytes + ShiftRows only.
VEIL_HD uint32_t AesLastColumn(const uint8_t* sbox, uint32_t a, uint32_t b, uint32_t c,
                               uint32_t d) {
  return uint32_t{sbox[a & 0xff]} | uint32_t{sbox[(b >> 8) & 0xff]} << 8 |
         uint32_t{sbox[(c >> 16) & 0xff]} << 16 | uint32_t{sbox[d >> 24]} << 24;
}

// AES-128 encryption with the 44-word schedule `rk`; equals dpf::AesEncrypt.
VEIL_HD Block AesEncryptT(const AesTables& t, const uint32_t* rk, Block in) {
  uint32_t c0 = static_cast<uint32_t>(in.lo) ^ rk[0];
  uint32_t c1 = static_cast<uint32_t>(in.lo >> 32) ^ rk[1];
  uint32_t c2 = static_cast<uint32_t>(in.hi) ^ rk[2];
  uint32_t c3 = static_cast<uint32_t>(in.hi >> 32) ^ rk[3];
  for (int round = 1; round < 10; ++round) {
    const uint32_t n0 = AesColumn(t.te0, c0, c1, c2, c3) ^ rk[4 * round];
    const uint32_t n1 = AesColumn(t.te0, c1, c2, c3, c0) ^ rk[4 * round + 1];
    const uint32_t n2 = AesColumn(t.te0, c2, c3, c0, c1) ^ rk[4 * round + 2];
    const uint32_t n3 = AesColumn(t.te0, c3, c0, c1, c2) ^ rk[4 * round + 3];
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  const uint32_t n0 = AesLastColumn(t.sbox, c0, c1, c2, c3) ^ rk[40];
  const uint32_t n1 = AesLastColumn(t.sbox, c1, c2, c3, c0) ^ rk[41];
  const uint32_t n2 = AesLastColumn(t.sbox, c2, c3, c0, c1) ^ rk[42];
  const uint32_t n3 = AesLastColumn(t.sbox, c3, c0, c1, c2) ^ rk[43];
  return {n0 | uint64_t{n1} << 32, n2 | uint64_t{n3} << 32};
}

// H_k(x) = AES_k(sigma(x)) ^ sigma(x), as dpf::MmoHash.
VEIL_HD Block MmoHashT(const AesTables& t, const uint32_t* rk, Block x) {
  const Block s = dpf::Sigma(x);
  return AesEncryptT(t, rk, s) ^ s;
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_AES_TABLES_H_
