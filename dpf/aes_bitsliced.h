// Constant-time AES-128 for two blocks at once, bitsliced in eight 32-bit words: the AES of the
// portable CPU path (dpf/prg_portable.h) and of the GPU kernels (gpu/), __host__ __device__.
// Computes FIPS-197 AES-128 (bytes in memory order) and the sigma-MMO hash; the tests compare it
// bit for bit with a byte-wise reference (tests/dpf/aes_reference.h) and OpenSSL.
//
// Layout. The two AES states (block 0 and block 1, 256 bits) live in eight uint32 planes q[0..7]:
// plane i holds bit i (0 = least significant) of every state byte, and bit position
//   p = 8 * r + 2 * c + b
// of a plane is the byte at row r, column c of block b. AES state byte j (memory order) is at row
// j % 4, column j / 4, so the little-endian 32-bit word c of a dpf::Block is column c with row r at
// bits 8r. Slice() puts word c of block b in w[2c + b] and transposes the 8x8 bit matrix of each
// byte position with three SWAPMOVE stages; the network is an involution, so Unslice() is the same
// network. In this layout:
//   ShiftRows    (row r rotated left by r columns) rotates each row's 8-bit field right by 2r bits;
//   MixColumns   is word rotations by 8 and 16 bits (row r+1, r+2 of the same column and block)
//                plus xtime as a rewiring of planes;
//   SubBytes     is the Boyar-Peralta depth-16 circuit ("A Small Depth-16 Circuit for the AES
//                S-Box", SEC 2012, eprint 2011/332), evaluated on all 32 bytes at once;
//   AddRoundKey  XORs round keys sliced the same way (SliceRoundKeys), so block 0 and block 1 may
//                use different keys: the node expansion encrypts sigma(seed) under the left key in
//                block 0 and the right key in block 1.
//
// Constant time. Every function is straight-line AND/XOR/OR/NOT, shifts and rotations on uint32
// by constant amounts: no memory access is indexed by state or key bits (the only memory read is
// round key r at public index r) and no branch depends on them. It replaced a byte S-box (CPU)
// and T-tables in shared memory (GPU), whose secret-indexed reads leak through the cache or
// through shared-memory bank conflicts.
//
// Cost per pair of blocks, counted as 32-bit two-operand operations:
//   SubBytes     128 gates (34 AND, 90 XOR, 4 XNOR = XOR + NOT):     132
//   ShiftRows    per plane 2 stages of (2 shifts, 3 AND, 2 OR):      112
//   MixColumns   16 rotations, 8 + 3 (xtime) + 16 XOR:                43
//   AddRoundKey  8 XOR (plus 8 loads of public round-key words):       8
// A full round is 295 operations, the last one (no MixColumns) 252: with the initial AddRoundKey,
// 2,915 for the cipher plus 144 for Slice and Unslice (24 SWAPMOVEs of 6), about 1,530 per block.
// On the GPU, LOP3 fuses XOR/AND/NOT chains (an XNOR is one instruction), so fewer instructions
// issue than this count. Registers: the S-box is the peak; its top linear layer consumes the
// planes, and 18 of its values stay live across the GF(2^4) inversion for the last AND layer,
// beside a handful of temporaries (ptxas, sm_90, nvcc 13.0: 32 registers for a kernel calling
// AesEncrypt2 with the keys in __constant__ memory, no stack frame, no spills).
#ifndef VEIL_DPF_AES_BITSLICED_H_
#define VEIL_DPF_AES_BITSLICED_H_

#include <cstdint>

#include "dpf/block.h"
#include "dpf/hd.h"

namespace veil::dpf {

// The AES S-box, for the key schedule only: it is computed at compile time from public keys. The
// cipher itself never indexes it.
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

// The three fixed public keys of the PRG (BLAKE2b with 16-byte output of the strings named above; a test
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

// sigma(xL || xR) = (xL ^ xR) || xL, with xL the high half.
VEIL_HD Block Sigma(Block x) { return {x.hi, x.hi ^ x.lo}; }

// The 11 round keys of AES-128 for block 0 and block 1 (possibly different keys), bitsliced.
struct AesSlicedKeys {
  uint32_t rk[11][8];
};

// The steps of the cipher, exposed for the tests.
namespace aes_bitsliced_internal {

// Exchanges the bits of a selected by (mask << n) with the bits of b selected by mask.
VEIL_HD constexpr void SwapMove(uint32_t& a, uint32_t& b, uint32_t mask, int n) {
  const uint32_t t = ((a >> n) ^ b) & mask;
  b ^= t;
  a ^= t << n;
}

// Transposes, for every byte position k, the 8x8 bit matrix (word y, bit x) <-> (plane x, bit y):
// afterwards bit 8k + y of q[x] is bit x of byte k of the former q[y]. An involution.
VEIL_HD constexpr void Transpose(uint32_t q[8]) {
  SwapMove(q[0], q[1], 0x55555555, 1);
  SwapMove(q[2], q[3], 0x55555555, 1);
  SwapMove(q[4], q[5], 0x55555555, 1);
  SwapMove(q[6], q[7], 0x55555555, 1);
  SwapMove(q[0], q[2], 0x33333333, 2);
  SwapMove(q[1], q[3], 0x33333333, 2);
  SwapMove(q[4], q[6], 0x33333333, 2);
  SwapMove(q[5], q[7], 0x33333333, 2);
  SwapMove(q[0], q[4], 0x0F0F0F0F, 4);
  SwapMove(q[1], q[5], 0x0F0F0F0F, 4);
  SwapMove(q[2], q[6], 0x0F0F0F0F, 4);
  SwapMove(q[3], q[7], 0x0F0F0F0F, 4);
}

// Blocks 0 and 1 into the planes of the layout above.
VEIL_HD constexpr void Slice(Block in0, Block in1, uint32_t q[8]) {
  q[0] = static_cast<uint32_t>(in0.lo);
  q[1] = static_cast<uint32_t>(in1.lo);
  q[2] = static_cast<uint32_t>(in0.lo >> 32);
  q[3] = static_cast<uint32_t>(in1.lo >> 32);
  q[4] = static_cast<uint32_t>(in0.hi);
  q[5] = static_cast<uint32_t>(in1.hi);
  q[6] = static_cast<uint32_t>(in0.hi >> 32);
  q[7] = static_cast<uint32_t>(in1.hi >> 32);
  Transpose(q);
}

// The inverse of Slice.
VEIL_HD constexpr void Unslice(const uint32_t q[8], Block& out0, Block& out1) {
  uint32_t w[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
  Transpose(w);
  out0 = {w[0] | uint64_t{w[2]} << 32, w[4] | uint64_t{w[6]} << 32};
  out1 = {w[1] | uint64_t{w[3]} << 32, w[5] | uint64_t{w[7]} << 32};
}

// The block whose bytes in memory order are bytes[0..15].
VEIL_HD constexpr Block LoadBlock(const uint8_t* bytes) {
  Block out;
  for (int i = 0; i < 8; ++i) {
    out.lo |= uint64_t{bytes[i]} << (8 * i);
    out.hi |= uint64_t{bytes[8 + i]} << (8 * i);
  }
  return out;
}

// The AES S-box on every byte. Boyar-Peralta's depth-16 circuit, with the paper's names: the
// input bits are U0 (most significant) .. U7, the outputs S0 (most significant) .. S7. The top
// linear layer maps the inputs to T1..T27, the middle layer inverts in GF(2^4)^2 (M1..M63, 34
// ANDs), and the bottom linear layer (L0..L29) yields S. The planes are overwritten only at the
// end, after every input bit has been consumed.
VEIL_HD void SubBytes(uint32_t q[8]) {
  const uint32_t U0 = q[7], U1 = q[6], U2 = q[5], U3 = q[4];
  const uint32_t U4 = q[3], U5 = q[2], U6 = q[1], U7 = q[0];

  const uint32_t T1 = U0 ^ U3;
  const uint32_t T2 = U0 ^ U5;
  const uint32_t T3 = U0 ^ U6;
  const uint32_t T4 = U3 ^ U5;
  const uint32_t T5 = U4 ^ U6;
  const uint32_t T6 = T1 ^ T5;
  const uint32_t T7 = U1 ^ U2;
  const uint32_t T8 = U7 ^ T6;
  const uint32_t T9 = U7 ^ T7;
  const uint32_t T10 = T6 ^ T7;
  const uint32_t T11 = U1 ^ U5;
  const uint32_t T12 = U2 ^ U5;
  const uint32_t T13 = T3 ^ T4;
  const uint32_t T14 = T6 ^ T11;
  const uint32_t T15 = T5 ^ T11;
  const uint32_t T16 = T5 ^ T12;
  const uint32_t T17 = T9 ^ T16;
  const uint32_t T18 = U3 ^ U7;
  const uint32_t T19 = T7 ^ T18;
  const uint32_t T20 = T1 ^ T19;
  const uint32_t T21 = U6 ^ U7;
  const uint32_t T22 = T7 ^ T21;
  const uint32_t T23 = T2 ^ T22;
  const uint32_t T24 = T2 ^ T10;
  const uint32_t T25 = T20 ^ T17;
  const uint32_t T26 = T3 ^ T16;
  const uint32_t T27 = T1 ^ T12;
  const uint32_t D = U7;

  const uint32_t M1 = T13 & T6;
  const uint32_t M2 = T23 & T8;
  const uint32_t M3 = T14 ^ M1;
  const uint32_t M4 = T19 & D;
  const uint32_t M5 = M4 ^ M1;
  const uint32_t M6 = T3 & T16;
  const uint32_t M7 = T22 & T9;
  const uint32_t M8 = T26 ^ M6;
  const uint32_t M9 = T20 & T17;
  const uint32_t M10 = M9 ^ M6;
  const uint32_t M11 = T1 & T15;
  const uint32_t M12 = T4 & T27;
  const uint32_t M13 = M12 ^ M11;
  const uint32_t M14 = T2 & T10;
  const uint32_t M15 = M14 ^ M11;
  const uint32_t M16 = M3 ^ M2;
  const uint32_t M17 = M5 ^ T24;
  const uint32_t M18 = M8 ^ M7;
  const uint32_t M19 = M10 ^ M15;
  const uint32_t M20 = M16 ^ M13;
  const uint32_t M21 = M17 ^ M15;
  const uint32_t M22 = M18 ^ M13;
  const uint32_t M23 = M19 ^ T25;
  const uint32_t M24 = M22 ^ M23;
  const uint32_t M25 = M22 & M20;
  const uint32_t M26 = M21 ^ M25;
  const uint32_t M27 = M20 ^ M21;
  const uint32_t M28 = M23 ^ M25;
  const uint32_t M29 = M28 & M27;
  const uint32_t M30 = M26 & M24;
  const uint32_t M31 = M20 & M23;
  const uint32_t M32 = M27 & M31;
  const uint32_t M33 = M27 ^ M25;
  const uint32_t M34 = M21 & M22;
  const uint32_t M35 = M24 & M34;
  const uint32_t M36 = M24 ^ M25;
  const uint32_t M37 = M21 ^ M29;
  const uint32_t M38 = M32 ^ M33;
  const uint32_t M39 = M23 ^ M30;
  const uint32_t M40 = M35 ^ M36;
  const uint32_t M41 = M38 ^ M40;
  const uint32_t M42 = M37 ^ M39;
  const uint32_t M43 = M37 ^ M38;
  const uint32_t M44 = M39 ^ M40;
  const uint32_t M45 = M42 ^ M41;
  const uint32_t M46 = M44 & T6;
  const uint32_t M47 = M40 & T8;
  const uint32_t M48 = M39 & D;
  const uint32_t M49 = M43 & T16;
  const uint32_t M50 = M38 & T9;
  const uint32_t M51 = M37 & T17;
  const uint32_t M52 = M42 & T15;
  const uint32_t M53 = M45 & T27;
  const uint32_t M54 = M41 & T10;
  const uint32_t M55 = M44 & T13;
  const uint32_t M56 = M40 & T23;
  const uint32_t M57 = M39 & T19;
  const uint32_t M58 = M43 & T3;
  const uint32_t M59 = M38 & T22;
  const uint32_t M60 = M37 & T20;
  const uint32_t M61 = M42 & T1;
  const uint32_t M62 = M45 & T4;
  const uint32_t M63 = M41 & T2;

  const uint32_t L0 = M61 ^ M62;
  const uint32_t L1 = M50 ^ M56;
  const uint32_t L2 = M46 ^ M48;
  const uint32_t L3 = M47 ^ M55;
  const uint32_t L4 = M54 ^ M58;
  const uint32_t L5 = M49 ^ M61;
  const uint32_t L6 = M62 ^ L5;
  const uint32_t L7 = M46 ^ L3;
  const uint32_t L8 = M51 ^ M59;
  const uint32_t L9 = M52 ^ M53;
  const uint32_t L10 = M53 ^ L4;
  const uint32_t L11 = M60 ^ L2;
  const uint32_t L12 = M48 ^ M51;
  const uint32_t L13 = M50 ^ L0;
  const uint32_t L14 = M52 ^ M61;
  const uint32_t L15 = M55 ^ L1;
  const uint32_t L16 = M56 ^ L0;
  const uint32_t L17 = M57 ^ L1;
  const uint32_t L18 = M58 ^ L8;
  const uint32_t L19 = M63 ^ L4;
  const uint32_t L20 = L0 ^ L1;
  const uint32_t L21 = L1 ^ L7;
  const uint32_t L22 = L3 ^ L12;
  const uint32_t L23 = L18 ^ L2;
  const uint32_t L24 = L15 ^ L9;
  const uint32_t L25 = L6 ^ L10;
  const uint32_t L26 = L7 ^ L9;
  const uint32_t L27 = L8 ^ L10;
  const uint32_t L28 = L11 ^ L14;
  const uint32_t L29 = L11 ^ L17;

  q[7] = L6 ^ L24;      // S0
  q[6] = ~(L16 ^ L26);  // S1
  q[5] = ~(L19 ^ L28);  // S2
  q[4] = L6 ^ L21;      // S3
  q[3] = L20 ^ L22;     // S4
  q[2] = L25 ^ L29;     // S5
  q[1] = ~(L13 ^ L27);  // S6
  q[0] = ~(L6 ^ L23);   // S7
}

// Rotates every row's 8-bit field right by 2r bits: rows 1 and 3 by 2, then rows 2 and 3 by 4.
VEIL_HD uint32_t ShiftRowsPlane(uint32_t x) {
  x = (x & 0x00FF00FF) | ((x >> 2) & 0x3F003F00) | ((x << 6) & 0xC000C000);
  return (x & 0x0000FFFF) | ((x >> 4) & 0x0F0F0000) | ((x << 4) & 0xF0F00000);
}

VEIL_HD void ShiftRows(uint32_t q[8]) {
  for (int i = 0; i < 8; ++i) q[i] = ShiftRowsPlane(q[i]);
}

// Row r + n (n in 1..3) of the same column and block at row r's place.
VEIL_HD uint32_t RotateRows(uint32_t x, int n) { return (x >> (8 * n)) | (x << (32 - 8 * n)); }

// out[r] = 2.a[r] ^ 3.a[r+1] ^ a[r+2] ^ a[r+3] = xtime(t[r]) ^ a[r+1] ^ t[r+2] with
// t[r] = a[r] ^ a[r+1]. xtime multiplies by x modulo x^8 + x^4 + x^3 + x + 1: a shift of the
// planes, with plane 7 folded into planes 0, 1, 3 and 4.
VEIL_HD void MixColumns(uint32_t q[8]) {
  uint32_t next[8], t[8];
  for (int i = 0; i < 8; ++i) {
    next[i] = RotateRows(q[i], 1);
    t[i] = q[i] ^ next[i];
  }
  q[0] = t[7] ^ next[0] ^ RotateRows(t[0], 2);
  q[1] = t[0] ^ t[7] ^ next[1] ^ RotateRows(t[1], 2);
  q[2] = t[1] ^ next[2] ^ RotateRows(t[2], 2);
  q[3] = t[2] ^ t[7] ^ next[3] ^ RotateRows(t[3], 2);
  q[4] = t[3] ^ t[7] ^ next[4] ^ RotateRows(t[4], 2);
  q[5] = t[4] ^ next[5] ^ RotateRows(t[5], 2);
  q[6] = t[5] ^ next[6] ^ RotateRows(t[6], 2);
  q[7] = t[6] ^ next[7] ^ RotateRows(t[7], 2);
}

VEIL_HD void AddRoundKey(uint32_t q[8], const uint32_t rk[8]) {
  for (int i = 0; i < 8; ++i) q[i] ^= rk[i];
}

}  // namespace aes_bitsliced_internal

// The round keys of key0 (for block 0) and key1 (for block 1) in the sliced layout.
VEIL_HD constexpr AesSlicedKeys SliceRoundKeys(const AesRoundKeys& key0, const AesRoundKeys& key1) {
  namespace sliced = aes_bitsliced_internal;
  AesSlicedKeys out{};
  for (int round = 0; round < 11; ++round) {
    sliced::Slice(sliced::LoadBlock(key0.bytes + 16 * round),
                  sliced::LoadBlock(key1.bytes + 16 * round), out.rk[round]);
  }
  return out;
}

// Node expansion: the left key in block 0, the right key in block 1. Leaf conversion: kV in both.
// Device code reads a copy (`__constant__ AesSlicedKeys d_keys = kAesSlicedLeftRight;`, or in
// shared memory): without --expt-relaxed-constexpr, nvcc rejects host constexpr aggregates there.
inline constexpr AesSlicedKeys kAesSlicedLeftRight =
    SliceRoundKeys(kAesRoundKeysLeft, kAesRoundKeysRight);
inline constexpr AesSlicedKeys kAesSlicedValue =
    SliceRoundKeys(kAesRoundKeysValue, kAesRoundKeysValue);

// FIPS-197 AES-128: out0 = AES_key0(in0), out1 = AES_key1(in1) for k = SliceRoundKeys(key0, key1).
VEIL_HD void AesEncrypt2(const AesSlicedKeys& k, Block in0, Block in1, Block& out0, Block& out1) {
  namespace sliced = aes_bitsliced_internal;
  uint32_t q[8];
  sliced::Slice(in0, in1, q);
  sliced::AddRoundKey(q, k.rk[0]);
  for (int round = 1; round < 10; ++round) {
    sliced::SubBytes(q);
    sliced::ShiftRows(q);
    sliced::MixColumns(q);
    sliced::AddRoundKey(q, k.rk[round]);
  }
  sliced::SubBytes(q);
  sliced::ShiftRows(q);
  sliced::AddRoundKey(q, k.rk[10]);
  sliced::Unslice(q, out0, out1);
}

// h_b = AES_key_b(sigma(x_b)) ^ sigma(x_b): dpf::MmoHash for two blocks.
VEIL_HD void MmoHash2(const AesSlicedKeys& k, Block x0, Block x1, Block& h0, Block& h1) {
  const Block s0 = Sigma(x0), s1 = Sigma(x1);
  AesEncrypt2(k, s0, s1, h0, h1);
  h0 ^= s0;
  h1 ^= s1;
}

}  // namespace veil::dpf

#endif  // VEIL_DPF_AES_BITSLICED_H_
