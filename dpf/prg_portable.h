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
// Timing: every PRG here is constant time. AES is bitsliced (dpf/aes_bitsliced.h: no table
// lookups, no secret branches), so the portable path (CPUs without AES instructions, key
// generation on the client, the GPU kernels) does not leak seeds through caches or shared-memory
// banks; the CPU uses AES-NI/VAES whenever present.
#ifndef VEIL_DPF_PRG_PORTABLE_H_
#define VEIL_DPF_PRG_PORTABLE_H_

#include <cstdint>

#include "dpf/aes_bitsliced.h"
#include "dpf/block.h"
#include "dpf/hd.h"
#include "dpf/params.h"

namespace veil::dpf {

// The AES keys the PRG reads (bitsliced, dpf/aes_bitsliced.h): the host's constexpr copies, or
// the GPU's __constant__ copies (device code cannot read host constexpr aggregates).
struct AesKeys {
  const AesSlicedKeys* children;  // node expansion: the left key in block 0, the right in block 1
  const AesSlicedKeys* value;     // leaf conversion: kV in both blocks
};

inline AesKeys HostAesKeys() { return {&kAesSlicedLeftRight, &kAesSlicedValue}; }

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
VEIL_HD void ExpandNode(Prg prg, const AesKeys& aes, Block node, Block& left, Block& right) {
  Block seed = node.without_control_bit();
  if (prg == Prg::kAes128) {
    MmoHash2(*aes.children, seed, seed, left, right);
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
VEIL_HD void ConvertLeaf(Prg prg, const AesKeys& aes, Block node, int words, uint32_t* out) {
  Block seed = node.without_control_bit();
  if (prg == Prg::kAes128) {
    // H_kV(s ^ i) for 128-bit words i and i + 1 in one bitsliced pass.
    for (int i = 0; 4 * i < words; i += 2) {
      Block v[2];
      MmoHash2(*aes.value, {seed.lo ^ uint64_t(i), seed.hi}, {seed.lo ^ uint64_t(i + 1), seed.hi},
               v[0], v[1]);
      for (int j = 0; j < 8 && 4 * i + j < words; ++j) {
        const Block& b = v[j / 4];
        const uint64_t half = (j & 2) ? b.hi : b.lo;
        out[4 * i + j] = static_cast<uint32_t>(half >> (32 * (j & 1)));
      }
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
