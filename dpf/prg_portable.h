// The PRGs of the DPF tree as plain per-block functions, shared by the CPU reference path and the
// GPU kernels (__host__ __device__). The vectorised CPU paths (prg_aesni.cc, prg_avx512.cc) must
// produce exactly these bits; tests compare them.
//
// Node expansion G(s) -> (left, right), each 128 bits with the child's control bit in bit 0, and
// leaf conversion V(s) -> 16 words (additive leaves use the first W, XOR leaves the first 4):
//   aes128   left = H_kL(s), right = H_kR(s), V_i = H_kV(s ^ i) for 128-bit word i = 0..3, where
//            H_k(x) = AES_k(sigma(x)) ^ sigma(x) and sigma(xL || xR) = (xL ^ xR) || xL is the
//            orthomorphism of Guo-Katz-Wang-Yu (S&P 2020): fixed-key AES in this form is circular
//            correlation robust. kL, kR, kV are public: BLAKE2b-128 of "veil/dpf/aes128/left" etc.
//   chacha*  key = s || s, nonce 0: block 0 gives left (words 0..3) and right (words 4..7);
//            block 1 gives V. (The remaining half of block 0 is unused: one block per node.)
//   siphash  SipHash-2-4 keyed by s on the 8-byte counters 0..3 (children) and 4..11 (V).
// Seeds are always used with their control bit cleared.
//
// Timing: the portable AES below indexes an S-box with secret bytes, so it is not constant time
// against a co-located cache attacker. The CPU uses AES-NI/VAES whenever present (constant time);
// the portable path is the reference and the fallback for CPUs without AES instructions.
#ifndef VEIL_DPF_PRG_PORTABLE_H_
#define VEIL_DPF_PRG_PORTABLE_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/params.h"

namespace veil::dpf {

inline constexpr uint8_t kAesSbox[256] = {
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
    0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
    0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
    0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
    0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
    0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
    0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
    0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
    0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
    0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
    0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
    0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
    0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
    0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
    0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16};

// The three fixed public keys (BLAKE2b with 16-byte output of the strings named above; a test
// recomputes them with libsodium).
inline constexpr uint8_t kAesKeyLeft[16] = {0x10, 0xee, 0x2d, 0xec, 0x05, 0xab, 0xb0, 0x64,
                                            0xc3, 0x6f, 0xaa, 0xdb, 0x86, 0x3e, 0x51, 0xcf};
inline constexpr uint8_t kAesKeyRight[16] = {0xf4, 0x40, 0xa3, 0xee, 0x77, 0x61, 0xc9, 0x87,
                                             0xfd, 0x7a, 0xd3, 0x3c, 0x0b, 0x4f, 0xe3, 0x67};
inline constexpr uint8_t kAesKeyValue[16] = {0x6a, 0x17, 0x25, 0x4b, 0x7c, 0x54, 0xb1, 0x20,
                                             0xc3, 0x46, 0xba, 0x52, 0xa5, 0x4a, 0xba, 0x28};

// AES-128 key schedule: 11 round keys of 16 bytes.
struct AesRoundKeys {
  uint8_t bytes[176];
};

constexpr AesRoundKeys ExpandAesKey(const uint8_t key[16]) {
  AesRoundKeys rk{};
  for (int i = 0; i < 16; ++i) rk.bytes[i] = key[i];
  uint8_t rcon = 1;
  for (int i = 16; i < 176; i += 4) {
    uint8_t t[4] = {rk.bytes[i - 4], rk.bytes[i - 3], rk.bytes[i - 2], rk.bytes[i - 1]};
    if (i % 16 == 0) {
      uint8_t first = t[0];
      t[0] = static_cast<uint8_t>(kAesSbox[t[1]] ^ rcon);
      t[1] = kAesSbox[t[2]];
      t[2] = kAesSbox[t[3]];
      t[3] = kAesSbox[first];
      rcon = static_cast<uint8_t>((rcon << 1) ^ ((rcon & 0x80) ? 0x1b : 0));
    }
    for (int j = 0; j < 4; ++j) rk.bytes[i + j] = static_cast<uint8_t>(rk.bytes[i - 16 + j] ^ t[j]);
  }
  return rk;
}

inline constexpr AesRoundKeys kAesRoundKeysLeft = ExpandAesKey(kAesKeyLeft);
inline constexpr AesRoundKeys kAesRoundKeysRight = ExpandAesKey(kAesKeyRight);
inline constexpr AesRoundKeys kAesRoundKeysValue = ExpandAesKey(kAesKeyValue);

// Where the PRG's tables live: the host's constexpr copies, or the GPU's constant-memory copies.
struct PrgTables {
  const uint8_t* sbox;
  const uint8_t* round_keys_left;
  const uint8_t* round_keys_right;
  const uint8_t* round_keys_value;
};

inline PrgTables HostPrgTables() {
  return {kAesSbox, kAesRoundKeysLeft.bytes, kAesRoundKeysRight.bytes, kAesRoundKeysValue.bytes};
}

VEIL_HD uint8_t AesXtime(uint8_t x) {
  return static_cast<uint8_t>((x << 1) ^ ((x >> 7) * 0x1b));
}

// FIPS-197 AES-128 encryption of one block (bytes in memory order: lo first, little-endian).
VEIL_HD Block AesEncrypt(const uint8_t* sbox, const uint8_t* round_keys, Block in) {
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

// sigma(xL || xR) = (xL ^ xR) || xL, with xL the high half.
VEIL_HD Block Sigma(Block x) { return {x.hi, x.hi ^ x.lo}; }

// H_k(x) = AES_k(sigma(x)) ^ sigma(x).
VEIL_HD Block MmoHash(const uint8_t* sbox, const uint8_t* round_keys, Block x) {
  Block s = Sigma(x);
  return AesEncrypt(sbox, round_keys, s) ^ s;
}

VEIL_HD uint32_t Rotl32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
VEIL_HD uint64_t Rotl64(uint64_t x, int n) { return (x << n) | (x >> (64 - n)); }

// ChaCha block function (RFC 8439 layout) with a 256-bit key, 32-bit counter and 96-bit nonce.
VEIL_HD void ChaChaBlock(int rounds, const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
                         uint32_t out[16]) {
  uint32_t x[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574, key[0],  key[1],
                    key[2],     key[3],     key[4],     key[5],     key[6],  key[7],
                    counter,    nonce[0],   nonce[1],   nonce[2]};
  uint32_t in[16];
  for (int i = 0; i < 16; ++i) in[i] = x[i];
#define VEIL_QR(a, b, c, d)         \
  x[a] += x[b];                     \
  x[d] = Rotl32(x[d] ^ x[a], 16);   \
  x[c] += x[d];                     \
  x[b] = Rotl32(x[b] ^ x[c], 12);   \
  x[a] += x[b];                     \
  x[d] = Rotl32(x[d] ^ x[a], 8);    \
  x[c] += x[d];                     \
  x[b] = Rotl32(x[b] ^ x[c], 7);
  for (int r = 0; r < rounds; r += 2) {
    VEIL_QR(0, 4, 8, 12) VEIL_QR(1, 5, 9, 13) VEIL_QR(2, 6, 10, 14) VEIL_QR(3, 7, 11, 15)
    VEIL_QR(0, 5, 10, 15) VEIL_QR(1, 6, 11, 12) VEIL_QR(2, 7, 8, 13) VEIL_QR(3, 4, 9, 14)
  }
#undef VEIL_QR
  for (int i = 0; i < 16; ++i) out[i] = x[i] + in[i];
}

VEIL_HD int ChaChaRounds(Prg prg) {
  return prg == Prg::kChaCha8 ? 8 : prg == Prg::kChaCha12 ? 12 : 20;
}

// The ChaCha key of a seed: s || s (control bit cleared by the caller).
VEIL_HD void ChaChaSeedKey(Block seed, uint32_t key[8]) {
  key[0] = static_cast<uint32_t>(seed.lo);
  key[1] = static_cast<uint32_t>(seed.lo >> 32);
  key[2] = static_cast<uint32_t>(seed.hi);
  key[3] = static_cast<uint32_t>(seed.hi >> 32);
  for (int i = 0; i < 4; ++i) key[4 + i] = key[i];
}

// SipHash-2-4 of one 8-byte message m under key (k0, k1).
VEIL_HD uint64_t SipHash24(uint64_t k0, uint64_t k1, uint64_t m) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
#define VEIL_SIPROUND                                               \
  v0 += v1; v1 = Rotl64(v1, 13); v1 ^= v0; v0 = Rotl64(v0, 32);     \
  v2 += v3; v3 = Rotl64(v3, 16); v3 ^= v2;                          \
  v0 += v3; v3 = Rotl64(v3, 21); v3 ^= v0;                          \
  v2 += v1; v1 = Rotl64(v1, 17); v1 ^= v2; v2 = Rotl64(v2, 32);
  v3 ^= m;
  VEIL_SIPROUND VEIL_SIPROUND
  v0 ^= m;
  uint64_t b = uint64_t{8} << 56;  // message length 8 in the top byte, no tail bytes
  v3 ^= b;
  VEIL_SIPROUND VEIL_SIPROUND
  v0 ^= b;
  v2 ^= 0xff;
  VEIL_SIPROUND VEIL_SIPROUND VEIL_SIPROUND VEIL_SIPROUND
#undef VEIL_SIPROUND
  return v0 ^ v1 ^ v2 ^ v3;
}

// G(s): the two raw children of a node (control bits in bit 0, not yet corrected).
VEIL_HD void ExpandNode(Prg prg, const PrgTables& tables, Block node, Block& left, Block& right) {
  Block seed = node.without_control_bit();
  if (prg == Prg::kAes128) {
    left = MmoHash(tables.sbox, tables.round_keys_left, seed);
    right = MmoHash(tables.sbox, tables.round_keys_right, seed);
  } else if (prg == Prg::kSipHash) {
    left = {SipHash24(seed.lo, seed.hi, 0), SipHash24(seed.lo, seed.hi, 1)};
    right = {SipHash24(seed.lo, seed.hi, 2), SipHash24(seed.lo, seed.hi, 3)};
  } else {
    uint32_t key[8], out[16];
    const uint32_t nonce[3] = {0, 0, 0};
    ChaChaSeedKey(seed, key);
    ChaChaBlock(ChaChaRounds(prg), key, 0, nonce, out);
    left = {out[0] | uint64_t{out[1]} << 32, out[2] | uint64_t{out[3]} << 32};
    right = {out[4] | uint64_t{out[5]} << 32, out[6] | uint64_t{out[7]} << 32};
  }
}

// V(s): `words` (<= 16) pseudorandom words of a leaf.
VEIL_HD void ConvertLeaf(Prg prg, const PrgTables& tables, Block node, int words, uint32_t* out) {
  Block seed = node.without_control_bit();
  if (prg == Prg::kAes128) {
    for (int i = 0; 4 * i < words; ++i) {
      Block v = MmoHash(tables.sbox, tables.round_keys_value, {seed.lo ^ uint64_t(i), seed.hi});
      uint32_t w[4] = {uint32_t(v.lo), uint32_t(v.lo >> 32), uint32_t(v.hi), uint32_t(v.hi >> 32)};
      for (int j = 0; j < 4 && 4 * i + j < words; ++j) out[4 * i + j] = w[j];
    }
  } else if (prg == Prg::kSipHash) {
    for (int i = 0; 2 * i < words; ++i) {
      uint64_t v = SipHash24(seed.lo, seed.hi, 4 + uint64_t(i));
      out[2 * i] = uint32_t(v);
      if (2 * i + 1 < words) out[2 * i + 1] = uint32_t(v >> 32);
    }
  } else {
    uint32_t key[8], block[16];
    const uint32_t nonce[3] = {0, 0, 0};
    ChaChaSeedKey(seed, key);
    ChaChaBlock(ChaChaRounds(prg), key, 1, nonce, block);
    for (int i = 0; i < words; ++i) out[i] = block[i];
  }
}

// Applies a level's correction word to the raw children of `parent`: where the parent's control
// bit is set, left ^= cw_left (seed correction with the left control-bit correction in bit 0) and
// right ^= cw_left with bit 0 replaced by the right control-bit correction. Branch-free.
VEIL_HD void CorrectChildren(Block parent, Block cw_left, bool cw_right_bit, Block& left,
                             Block& right) {
  Block mask = Block::Mask(parent.control_bit());
  Block cw_right = {(cw_left.lo & ~uint64_t{1}) | uint64_t(cw_right_bit), cw_left.hi};
  left ^= mask & cw_left;
  right ^= mask & cw_right;
}

// A leaf's output words: additive y = (-1)^party (V(s) + t * CW) mod 2^32, XOR y = V(s) ^ t * CW.
VEIL_HD void FinishLeaf(OutputType output, bool party1, bool control_bit, const uint32_t* final_cw,
                        int words, uint32_t* values) {
  uint32_t t = 0u - uint32_t(control_bit);
  uint32_t neg = 0u - uint32_t(party1);
  for (int i = 0; i < words; ++i) {
    if (output == OutputType::kXor) {
      values[i] ^= t & final_cw[i];
    } else {
      values[i] = ((values[i] + (t & final_cw[i])) ^ neg) - neg;
    }
  }
}

}  // namespace veil::dpf

#endif  // VEIL_DPF_PRG_PORTABLE_H_
