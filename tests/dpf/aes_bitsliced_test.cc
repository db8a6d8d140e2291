// The bitsliced two-block AES (dpf/aes_bitsliced.h): each step against a byte-wise version on
// random states, the S-box exhaustively, known answers from FIPS-197, and the whole cipher bit for
// bit against the byte-wise reference (tests/dpf/aes_reference.h) and OpenSSL.
//
// There is no constant-time test: timing independence is a property of the code's shape (no
// secret-indexed memory, no secret branches), which a unit test cannot observe; measuring it would
// need a statistical timing harness (dudect-style) on quiet hardware, not a CI pass/fail check.
#include "dpf/aes_bitsliced.h"

#include <cstring>
#include <random>

#include "dpf/prg_portable.h"
#include "tests/dpf/aes_reference.h"
#include "gtest/gtest.h"

#ifdef VEIL_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace veil::dpf {
namespace {

namespace sliced = aes_bitsliced_internal;

// Two AES states, bytes in memory order: state[b][j] is row j % 4, column j / 4 of block b.
using States = uint8_t[2][16];

Block BlockFromBytes(const uint8_t* bytes) {
  Block out;
  std::memcpy(&out, bytes, 16);
  return out;
}

void BytesFromBlock(Block block, uint8_t* bytes) { std::memcpy(bytes, &block, 16); }

void RandomBytes(std::mt19937_64& rng, uint8_t* bytes, int n) {
  for (int i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(rng());
}

Block RandomBlock(std::mt19937_64& rng) { return {rng(), rng()}; }

void SliceStates(const States& states, uint32_t q[8]) {
  sliced::Slice(BlockFromBytes(states[0]), BlockFromBytes(states[1]), q);
}

void UnsliceStates(const uint32_t q[8], States& states) {
  Block out0, out1;
  sliced::Unslice(q, out0, out1);
  BytesFromBlock(out0, states[0]);
  BytesFromBlock(out1, states[1]);
}

void ExpectStatesEqual(const States& actual, const States& expected) {
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(actual[b][j], expected[b][j]) << "block " << b << " byte " << j;
    }
  }
}

// Applies a sliced step to random states and compares with `reference` applied byte-wise.
template <typename SlicedStep, typename ByteStep>
void ExpectStepMatches(SlicedStep sliced_step, ByteStep reference) {
  std::mt19937_64 rng(20240611);
  for (int iteration = 0; iteration < 1000; ++iteration) {
    States in, expected, actual;
    RandomBytes(rng, &in[0][0], 32);
    std::memcpy(expected, in, sizeof(in));
    for (auto& state : expected) reference(state);
    uint32_t q[8];
    SliceStates(in, q);
    sliced_step(q);
    UnsliceStates(q, actual);
    ExpectStatesEqual(actual, expected);
  }
}

TEST(AesBitslicedTest, SliceMatchesTheDocumentedLayout) {
  // Plane i, bit 8r + 2c + b is bit i of the byte at row r, column c of block b, i.e. of byte
  // 4c + r in memory order: checked bit by bit against a straightforward transposition.
  std::mt19937_64 rng(1);
  for (int iteration = 0; iteration < 1000; ++iteration) {
    States states;
    RandomBytes(rng, &states[0][0], 32);
    uint32_t q[8];
    SliceStates(states, q);
    for (int i = 0; i < 8; ++i) {
      uint32_t expected = 0;
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) {
          for (int b = 0; b < 2; ++b) {
            expected |= uint32_t((states[b][4 * c + r] >> i) & 1) << (8 * r + 2 * c + b);
          }
        }
      }
      ASSERT_EQ(q[i], expected) << "plane " << i;
    }
  }
}

TEST(AesBitslicedTest, UnsliceInvertsSlice) {
  std::mt19937_64 rng(2);
  for (int iteration = 0; iteration < 1000; ++iteration) {
    const Block in0 = RandomBlock(rng), in1 = RandomBlock(rng);
    uint32_t q[8];
    sliced::Slice(in0, in1, q);
    Block out0, out1;
    sliced::Unslice(q, out0, out1);
    EXPECT_EQ(out0, in0);
    EXPECT_EQ(out1, in1);
    // And the other way round: every plane value is reached.
    uint32_t planes[8], back[8];
    for (auto& p : planes) p = static_cast<uint32_t>(rng());
    sliced::Unslice(planes, out0, out1);
    sliced::Slice(out0, out1, back);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], planes[i]) << i;
  }
}

TEST(AesBitslicedTest, LoadBlockReadsMemoryOrder) {
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<uint8_t>(0x10 * i + 3);
  EXPECT_EQ(sliced::LoadBlock(bytes), BlockFromBytes(bytes));
}

TEST(AesBitslicedTest, SubBytesMatchesTheSboxExhaustively) {
  // Every byte value in every one of the 32 positions; the other 31 bytes are random.
  std::mt19937_64 rng(3);
  for (int position = 0; position < 32; ++position) {
    for (int value = 0; value < 256; ++value) {
      States in, expected, actual;
      RandomBytes(rng, &in[0][0], 32);
      in[position / 16][position % 16] = static_cast<uint8_t>(value);
      for (int b = 0; b < 2; ++b) {
        for (int j = 0; j < 16; ++j) expected[b][j] = kAesSbox[in[b][j]];
      }
      uint32_t q[8];
      SliceStates(in, q);
      sliced::SubBytes(q);
      UnsliceStates(q, actual);
      ASSERT_EQ(0, std::memcmp(actual, expected, sizeof(actual)))
          << "position " << position << " value " << value;
    }
  }
}

TEST(AesBitslicedTest, ShiftRowsMatchesByteWise) {
  ExpectStepMatches(sliced::ShiftRows, [](uint8_t* s) {
    uint8_t old[16];
    std::memcpy(old, s, 16);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) s[4 * c + r] = old[4 * ((c + r) % 4) + r];
    }
  });
}

TEST(AesBitslicedTest, MixColumnsMatchesByteWise) {
  ExpectStepMatches(sliced::MixColumns, [](uint8_t* s) {
    for (int c = 0; c < 4; ++c) {
      uint8_t a[4];
      std::memcpy(a, s + 4 * c, 4);
      for (int r = 0; r < 4; ++r) {
        // 2.a[r] ^ 3.a[r+1] ^ a[r+2] ^ a[r+3]
        const uint8_t next = a[(r + 1) % 4];
        s[4 * c + r] = reference::AesXtime(a[r]) ^ reference::AesXtime(next) ^ next ^ a[(r + 2) % 4] ^ a[(r + 3) % 4];
      }
    }
  });
}

TEST(AesBitslicedTest, AddRoundKeyXorsTheSlicedKey) {
  std::mt19937_64 rng(4);
  uint8_t key0[16], key1[16];
  RandomBytes(rng, key0, 16);
  RandomBytes(rng, key1, 16);
  const AesSlicedKeys keys = SliceRoundKeys(ExpandAesKey(key0), ExpandAesKey(key1));
  States in, expected, actual;
  RandomBytes(rng, &in[0][0], 32);
  const AesRoundKeys expanded[2] = {ExpandAesKey(key0), ExpandAesKey(key1)};
  for (int round = 0; round < 11; ++round) {
    for (int b = 0; b < 2; ++b) {
      for (int j = 0; j < 16; ++j) expected[b][j] = in[b][j] ^ expanded[b].bytes[16 * round + j];
    }
    uint32_t q[8];
    SliceStates(in, q);
    sliced::AddRoundKey(q, keys.rk[round]);
    UnsliceStates(q, actual);
    ExpectStatesEqual(actual, expected);
  }
}

// The sliced fixed keys are compile-time constants and unslice to the dpf schedules.
constexpr bool SlicedKeysAre(const AesSlicedKeys& sliced_keys, const AesRoundKeys& key0,
                             const AesRoundKeys& key1) {
  for (int round = 0; round < 11; ++round) {
    Block out0, out1;
    sliced::Unslice(sliced_keys.rk[round], out0, out1);
    const Block expected0 = sliced::LoadBlock(key0.bytes + 16 * round);
    const Block expected1 = sliced::LoadBlock(key1.bytes + 16 * round);
    if (out0.lo != expected0.lo || out0.hi != expected0.hi || out1.lo != expected1.lo ||
        out1.hi != expected1.hi) {
      return false;
    }
  }
  return true;
}
static_assert(SlicedKeysAre(kAesSlicedLeftRight, kAesRoundKeysLeft, kAesRoundKeysRight));
static_assert(SlicedKeysAre(kAesSlicedValue, kAesRoundKeysValue, kAesRoundKeysValue));
// Planes 0 and 7 of round key 0, computed by hand from kAesKeyLeft (block 0) and kAesKeyRight.
static_assert(kAesSlicedLeftRight.rk[0][0] == 0xd8eb9cbc);
static_assert(kAesSlicedLeftRight.rk[0][7] == 0x5bbe0572);

struct KnownAnswer {
  uint8_t key[16], plain[16], cipher[16];
};

// FIPS-197 appendix C.1 and appendix B.
constexpr KnownAnswer kFips197C1 = {{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                                     0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f},
                                    {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
                                     0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
                                    {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd,
                                     0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a}};
constexpr KnownAnswer kFips197B = {{0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7,
                                    0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c},
                                   {0x32, 0x43, 0xf6, 0xa8, 0x88, 0x5a, 0x30, 0x8d, 0x31, 0x31,
                                    0x98, 0xa2, 0xe0, 0x37, 0x07, 0x34},
                                   {0x39, 0x25, 0x84, 0x1d, 0x02, 0xdc, 0x09, 0xfb, 0xdc, 0x11,
                                    0x85, 0x97, 0x19, 0x6a, 0x0b, 0x32}};

void ExpectKnownAnswers(const KnownAnswer& block0, const KnownAnswer& block1) {
  const AesSlicedKeys keys = SliceRoundKeys(ExpandAesKey(block0.key), ExpandAesKey(block1.key));
  Block out0, out1;
  AesEncrypt2(keys, BlockFromBytes(block0.plain), BlockFromBytes(block1.plain), out0, out1);
  EXPECT_EQ(out0, BlockFromBytes(block0.cipher));
  EXPECT_EQ(out1, BlockFromBytes(block1.cipher));
}

TEST(AesBitslicedTest, Fips197KnownAnswersInEitherBlock) {
  ExpectKnownAnswers(kFips197C1, kFips197B);
  ExpectKnownAnswers(kFips197B, kFips197C1);
  ExpectKnownAnswers(kFips197C1, kFips197C1);
}

TEST(AesBitslicedTest, MatchesByteWiseAesOnRandomInputs) {
  std::mt19937_64 rng(5);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    uint8_t key0[16], key1[16];
    RandomBytes(rng, key0, 16);
    RandomBytes(rng, key1, 16);
    const Block in0 = RandomBlock(rng), in1 = RandomBlock(rng);
    const AesRoundKeys expanded0 = ExpandAesKey(key0), expanded1 = ExpandAesKey(key1);
    Block out0, out1;
    AesEncrypt2(SliceRoundKeys(expanded0, expanded1), in0, in1, out0, out1);
    ASSERT_EQ(out0, reference::AesEncrypt(kAesSbox, expanded0.bytes, in0)) << "iteration " << iteration;
    ASSERT_EQ(out1, reference::AesEncrypt(kAesSbox, expanded1.bytes, in1)) << "iteration " << iteration;
  }
}

#ifdef VEIL_HAVE_OPENSSL
TEST(AesBitslicedTest, MatchesOpenSslOnRandomInputs) {
  std::mt19937_64 rng(6);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ASSERT_NE(ctx, nullptr);
  // OpenSSL's AES-128-ECB of one block.
  auto openssl_aes = [ctx](const uint8_t* key, Block in) {
    uint8_t plain[16], cipher[16];
    BytesFromBlock(in, plain);
    int len = 0;
    EXPECT_EQ(1, EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key, nullptr));
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    EXPECT_EQ(1, EVP_EncryptUpdate(ctx, cipher, &len, plain, 16));
    EXPECT_EQ(len, 16);
    return BlockFromBytes(cipher);
  };
  for (int iteration = 0; iteration < 2000; ++iteration) {
    uint8_t key0[16], key1[16];
    RandomBytes(rng, key0, 16);
    RandomBytes(rng, key1, 16);
    const Block in0 = RandomBlock(rng), in1 = RandomBlock(rng);
    Block out0, out1;
    AesEncrypt2(SliceRoundKeys(ExpandAesKey(key0), ExpandAesKey(key1)), in0, in1, out0, out1);
    ASSERT_EQ(out0, openssl_aes(key0, in0)) << "iteration " << iteration;
    ASSERT_EQ(out1, openssl_aes(key1, in1)) << "iteration " << iteration;
  }
  EVP_CIPHER_CTX_free(ctx);
}
#endif

TEST(AesBitslicedTest, MmoHash2MatchesMmoHashWithTheFixedKeys) {
  std::mt19937_64 rng(7);
  for (int iteration = 0; iteration < 500; ++iteration) {
    // Node expansion hashes one seed under kL and kR; also check distinct inputs per block.
    const Block seed = RandomBlock(rng), other = RandomBlock(rng);
    Block left, right;
    MmoHash2(kAesSlicedLeftRight, seed, seed, left, right);
    EXPECT_EQ(left, reference::MmoHash(kAesSbox, kAesRoundKeysLeft.bytes, seed));
    EXPECT_EQ(right, reference::MmoHash(kAesSbox, kAesRoundKeysRight.bytes, seed));
    MmoHash2(kAesSlicedLeftRight, seed, other, left, right);
    EXPECT_EQ(left, reference::MmoHash(kAesSbox, kAesRoundKeysLeft.bytes, seed));
    EXPECT_EQ(right, reference::MmoHash(kAesSbox, kAesRoundKeysRight.bytes, other));

    Block value0, value1;
    MmoHash2(kAesSlicedValue, seed, other, value0, value1);
    EXPECT_EQ(value0, reference::MmoHash(kAesSbox, kAesRoundKeysValue.bytes, seed));
    EXPECT_EQ(value1, reference::MmoHash(kAesSbox, kAesRoundKeysValue.bytes, other));
  }
}

}  // namespace
}  // namespace veil::dpf
