// Known answers from the standards, differential tests against libsodium and OpenSSL, and every
// instruction-set kernel bit-equal to the portable one.
#include <sodium.h>

#include <cstring>
#include <random>

#include "dpf/kernels.h"
#include "dpf/prg_portable.h"
#include "tests/dpf/aes_reference.h"
#include "gtest/gtest.h"

#ifdef VEIL_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace veil::dpf {
namespace {

Block BlockFromBytes(const uint8_t* b) {
  Block out;
  std::memcpy(&out, b, 16);
  return out;
}

TEST(AesTest, Fips197AppendixC1) {
  const uint8_t key[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const uint8_t plain[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                             0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  const uint8_t cipher[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                              0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
  AesRoundKeys rk = ExpandAesKey(key);
  EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)), BlockFromBytes(cipher));
}

TEST(AesTest, Fips197AppendixAKeyExpansion) {
  // FIPS-197 Appendix A.1: key 2b7e1516..., last round key d014f9a8c9ee2589e13f0cc8b6630ca6.
  const uint8_t key[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                           0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
  const uint8_t last[16] = {0xd0, 0x14, 0xf9, 0xa8, 0xc9, 0xee, 0x25, 0x89,
                            0xe1, 0x3f, 0x0c, 0xc8, 0xb6, 0x63, 0x0c, 0xa6};
  AesRoundKeys rk = ExpandAesKey(key);
  EXPECT_EQ(0, std::memcmp(rk.bytes + 160, last, 16));
}

TEST(AesTest, Fips197AppendixB) {
  const uint8_t key[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                           0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
  const uint8_t plain[16] = {0x32, 0x43, 0xf6, 0xa8, 0x88, 0x5a, 0x30, 0x8d,
                             0x31, 0x31, 0x98, 0xa2, 0xe0, 0x37, 0x07, 0x34};
  const uint8_t cipher[16] = {0x39, 0x25, 0x84, 0x1d, 0x02, 0xdc, 0x09, 0xfb,
                              0xdc, 0x11, 0x85, 0x97, 0x19, 0x6a, 0x0b, 0x32};
  AesRoundKeys rk = ExpandAesKey(key);
  EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)), BlockFromBytes(cipher));
}

TEST(AesTest, FixedKeysAreTheDocumentedHashes) {
  ASSERT_GE(sodium_init(), 0);
  const struct {
    const char* label;
    const uint8_t* key;
  } cases[] = {{"veil/dpf/aes128/left", kAesKeyLeft},
               {"veil/dpf/aes128/right", kAesKeyRight},
               {"veil/dpf/aes128/value", kAesKeyValue}};
  for (const auto& c : cases) {
    uint8_t hash[16];
    crypto_generichash(hash, 16, reinterpret_cast<const uint8_t*>(c.label), std::strlen(c.label),
                       nullptr, 0);
    EXPECT_EQ(0, std::memcmp(hash, c.key, 16)) << c.label;
  }
}

#ifdef VEIL_HAVE_OPENSSL
TEST(AesTest, MatchesOpenSslOnRandomInputs) {
  std::mt19937_64 rng(12345);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  for (int i = 0; i < 200; ++i) {
    uint8_t key[16], plain[16], expected[16];
    for (auto& b : key) b = static_cast<uint8_t>(rng());
    for (auto& b : plain) b = static_cast<uint8_t>(rng());
    int len = 0;
    ASSERT_EQ(1, EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key, nullptr));
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    ASSERT_EQ(1, EVP_EncryptUpdate(ctx, expected, &len, plain, 16));
    AesRoundKeys rk = ExpandAesKey(key);
    EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)), BlockFromBytes(expected));
  }
  EVP_CIPHER_CTX_free(ctx);
}
#endif

TEST(ChaChaTest, Rfc8439Section232) {
  uint32_t key[8];
  for (int i = 0; i < 8; ++i) {
    key[i] = uint32_t(4 * i) | uint32_t(4 * i + 1) << 8 | uint32_t(4 * i + 2) << 16 |
             uint32_t(4 * i + 3) << 24;
  }
  const uint32_t nonce[3] = {0x09000000, 0x4a000000, 0x00000000};
  uint32_t out[16];
  ChaChaBlock(20, key, 1, nonce, out);
  const uint32_t expected[4] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], expected[i]) << i;
  EXPECT_EQ(out[15], 0x4e3c50a2u);
}

TEST(ChaChaTest, MatchesLibsodiumOnRandomKeys) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937_64 rng(777);
  for (int i = 0; i < 100; ++i) {
    uint8_t key_bytes[32];
    for (auto& b : key_bytes) b = static_cast<uint8_t>(rng());
    uint32_t counter = static_cast<uint32_t>(rng() % 1000);
    uint8_t expected[64];
    const uint8_t nonce_bytes[12] = {};
    crypto_stream_chacha20_ietf_xor_ic(expected, std::vector<uint8_t>(64, 0).data(), 64,
                                       nonce_bytes, counter, key_bytes);
    uint32_t key[8], out[16];
    std::memcpy(key, key_bytes, 32);
    const uint32_t nonce[3] = {0, 0, 0};
    ChaChaBlock(20, key, counter, nonce, out);
    EXPECT_EQ(0, std::memcmp(out, expected, 64));
  }
}

TEST(SipHashTest, ReferenceVectors) {
  // Key 00..0f: the empty message and 00..0e are from the reference's vectors.h; for 8-byte
  // messages we compare with libsodium below.
  ASSERT_GE(sodium_init(), 0);
  uint8_t key[16];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  uint8_t msg[15];
  for (int i = 0; i < 15; ++i) msg[i] = static_cast<uint8_t>(i);
  uint64_t h = 0;
  crypto_shorthash_siphash24(reinterpret_cast<uint8_t*>(&h), msg, 0, key);
  EXPECT_EQ(h, 0x726fdb47dd0e0e31ULL);
  crypto_shorthash_siphash24(reinterpret_cast<uint8_t*>(&h), msg, 15, key);
  EXPECT_EQ(h, 0xa129ca6149be45e5ULL);
  uint64_t k0, k1, m;
  std::memcpy(&k0, key, 8);
  std::memcpy(&k1, key + 8, 8);
  std::memcpy(&m, msg, 8);
  crypto_shorthash_siphash24(reinterpret_cast<uint8_t*>(&h), msg, 8, key);
  EXPECT_EQ(SipHash24(k0, k1, m), h);
  EXPECT_EQ(h, 0x93f5f5799a932462ULL);  // reference vectors.h, 8-byte message
}

TEST(SipHashTest, MatchesLibsodiumOnRandomInputs) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000; ++i) {
    uint64_t k[2] = {rng(), rng()}, m = rng(), h = 0;
    crypto_shorthash_siphash24(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&m), 8,
                               reinterpret_cast<uint8_t*>(k));
    EXPECT_EQ(SipHash24(k[0], k[1], m), h);
  }
}

// Every ISA's kernels produce exactly the portable bits, for every PRG, output and odd count.
class KernelEquivalenceTest : public ::testing::TestWithParam<Isa> {};

TEST_P(KernelEquivalenceTest, ExpandConvertAndMacMatchPortable) {
  const Kernels& fast = KernelsFor(GetParam());
  const Kernels& ref = PortableKernels();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (Prg prg : {Prg::kAes128, Prg::kChaCha8, Prg::kChaCha12, Prg::kChaCha20, Prg::kSipHash}) {
    for (size_t n : {1, 2, 3, 15, 16, 17, 33, 64, 100}) {
      std::vector<Block> parents(n), a(2 * n), b(2 * n);
      for (Block& p : parents) p = {rng(), rng()};
      Block cw = {rng(), rng()};
      bool cwr = rng() & 1;
      fast.expand_level(prg, parents.data(), n, cw, cwr, a.data());
      ref.expand_level(prg, parents.data(), n, cw, cwr, b.data());
      ASSERT_EQ(a, b) << "expand prg " << int(prg) << " n " << n;
      for (OutputType output : {OutputType::kAdditive, OutputType::kXor}) {
        for (int words : {1, 2, 4, 8, 16}) {
          if (output == OutputType::kXor && words != 4) continue;
          uint32_t final_cw[16];
          for (auto& w : final_cw) w = static_cast<uint32_t>(rng());
          for (bool party1 : {false, true}) {
            std::vector<uint32_t> va(n * words), vb(n * words);
            fast.convert_leaves(prg, parents.data(), n, words, output, party1, final_cw,
                                va.data());
            ref.convert_leaves(prg, parents.data(), n, words, output, party1, final_cw,
                               vb.data());
            ASSERT_EQ(va, vb) << "convert prg " << int(prg) << " n " << n << " words " << words;
          }
        }
      }
    }
  }
  for (uint32_t row_words : {1u, 3u, 16u, 17u, 40u}) {
    for (int keys : {1, 3, 8, 9, 20}) {
      const size_t nrows = 100;
      const uint64_t stride = row_words + (rng() % 3);
      std::vector<uint32_t> table(nrows * stride);
      for (auto& w : table) w = static_cast<uint32_t>(rng());
      std::vector<std::vector<uint32_t>> y(keys, std::vector<uint32_t>(nrows));
      std::vector<const uint32_t*> yp;
      for (auto& v : y) {
        for (auto& w : v) w = static_cast<uint32_t>(rng());
        yp.push_back(v.data());
      }
      std::vector<uint32_t> acc_a(keys * row_words, 7), acc_b(keys * row_words, 7);
      fast.mac_add(yp.data(), keys, table.data(), stride, nrows, row_words, acc_a.data());
      ref.mac_add(yp.data(), keys, table.data(), stride, nrows, row_words, acc_b.data());
      ASSERT_EQ(acc_a, acc_b) << "mac_add words " << row_words << " keys " << keys;
      fast.mac_xor(yp.data(), keys, table.data(), stride, nrows, row_words, acc_a.data());
      ref.mac_xor(yp.data(), keys, table.data(), stride, nrows, row_words, acc_b.data());
      ASSERT_EQ(acc_a, acc_b) << "mac_xor words " << row_words << " keys " << keys;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelEquivalenceTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const auto& info) {
                           std::string name(IsaName(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace veil::dpf
