// The PRGs of the DPF tree as plain per-block functions, shared by the CPU reference path and the
// GPU kernels (__host__ __device__). The vectorised CPU paths (kernels_aesni.cc, kernels_avx512.cc)
// must produce exactly these bits; tests compare them.
//
// Node expansion G(s) -> (left, right), each 128 bits with the child's control bit in bit 0, and
// leaf conversion V(s) -> 16 words (additive leaves use the first W, XOR leaves the first 4):
//   aes128   left = H_kL(s), right = H_kR(s), V_i = H_kV(s ^ i) for 128-bit word i = 0..3, where
//            H_k(x) = AES_k(sigma(x)) ^ sigma(x) and sigma(xL || xR) = (xL ^ xR) || xL is the
//            orthomorphism of Guo-Katz-Wang-Yu (S&P 2020): fixed-key AES in this form is circular
//            correlation robust. kL, kR, kV are public: BLAKE2b-128 of "veil/dpf/aes128/left" etc.
//   chacha*  ChaCha with s as a 16-byte key (ChaChaSeedState): block 0 gives left (words 0..3)
//            and right (words 4..7); block 1 gives V. (The rest of block 0 is unused: one block
//            per node.)
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

// ChaCha block function (Bernstein, "ChaCha, a variant of Salsa20", 2008; RFC 8439 section 2.3):
// `rounds` rounds (8, 12 or 20) on the 16-word input state, then the input added back.
VEIL_HD void ChaChaBlock(int rounds, const uint32_t in[16], uint32_t out[16]) {
  uint32_t x[16];
  for (int i = 0; i < 16; ++i) x[i] = in[i];
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

// "expand 16-byte k" in little-endian words: the constants of ChaCha's 16-byte-key form.
inline constexpr uint32_t kChaChaTau0 = 0x61707865, kChaChaTau1 = 0x3120646e,
                          kChaChaTau2 = 0x79622d36, kChaChaTau3 = 0x6b206574;

// The ChaCha input state for block `counter` of a seed (control bit cleared by the caller): the
// 16-byte-key form Bernstein defines for ChaCha, as for Salsa20 - constants "expand 16-byte k",
// the key in words 4..7 and again in 8..11 - with the 64-bit block counter in words 12..13 and a
// zero nonce in 14..15 (the node's blocks 0 and 1 are the first 128 bytes of its keystream; the
// Strombergson test vectors for 128-bit keys check them). Why not a 256-bit key: a seed carries
// 127 bits (lambda = 128, control bit cleared), so a 256-bit key derived from it (a hash per node)
// would cost time and add no security, and the seed copied into both halves of a 256-bit key
// ("expand 32-byte k"), the former keying, is a structured key no analysis or test vector covers.
VEIL_HD void ChaChaSeedState(Block seed, uint32_t counter, uint32_t state[16]) {
  state[0] = kChaChaTau0;
  state[1] = kChaChaTau1;
  state[2] = kChaChaTau2;
  state[3] = kChaChaTau3;
  state[4] = state[8] = static_cast<uint32_t>(seed.lo);
  state[5] = state[9] = static_cast<uint32_t>(seed.lo >> 32);
  state[6] = state[10] = static_cast<uint32_t>(seed.hi);
  state[7] = state[11] = static_cast<uint32_t>(seed.hi >> 32);
  state[12] = counter;
  state[13] = state[14] = state[15] = 0;
}

VEIL_HD int ChaChaRounds(Prg prg) {
  return prg == Prg::kChaCha8 ? 8 : prg == Prg::kChaCha12 ? 12 : 20;
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
    uint32_t state[16], out[16];
    ChaChaSeedState(seed, 0, state);
    ChaChaBlock(ChaChaRounds(prg), state, out);
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
    uint32_t state[16], block[16];
    ChaChaSeedState(seed, 1, state);
    ChaChaBlock(ChaChaRounds(prg), state, block);
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
