// Known answers from the standards, differential tests against libsodium and OpenSSL, and every
// instruction-set kernel bit-equal to the portable one.
#include <sodium.h>

#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "dpf/kernels.h"
#include "dpf/prg_portable.h"
#include "gtest/gtest.h"
#include "tests/dpf/aes_reference.h"

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
  EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)),
            BlockFromBytes(cipher));
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
  EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)),
            BlockFromBytes(cipher));
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
    EXPECT_EQ(reference::AesEncrypt(kAesSbox, rk.bytes, BlockFromBytes(plain)),
              BlockFromBytes(expected));
  }
  EVP_CIPHER_CTX_free(ctx);
}
#endif

// The RFC 8439 state for a 256-bit key: "expand 32-byte k", key, counter, 96-bit nonce.
void Rfc8439State(const uint8_t key[32], uint32_t counter, const uint32_t nonce[3],
                  uint32_t state[16]) {
  const uint32_t sigma[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
  for (int i = 0; i < 4; ++i) state[i] = sigma[i];
  std::memcpy(state + 4, key, 32);
  state[12] = counter;
  for (int i = 0; i < 3; ++i) state[13 + i] = nonce[i];
}

TEST(ChaChaTest, Rfc8439Section232) {
  uint8_t key[32];
  for (int i = 0; i < 32; ++i) key[i] = static_cast<uint8_t>(i);
  const uint32_t nonce[3] = {0x09000000, 0x4a000000, 0x00000000};
  uint32_t state[16], out[16];
  Rfc8439State(key, 1, nonce, state);
  ChaChaBlock(20, state, out);
  const uint32_t expected[4] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], expected[i]) << i;
  EXPECT_EQ(out[15], 0x4e3c50a2u);
}

TEST(ChaChaTest, MatchesLibsodiumOnRandomKeys) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937_64 rng(777);
  for (int i = 0; i < 100; ++i) {
    uint8_t key[32];
    for (auto& b : key) b = static_cast<uint8_t>(rng());
    uint32_t counter = static_cast<uint32_t>(rng() % 1000);
    uint8_t expected[64];
    const uint8_t nonce_bytes[12] = {};
    crypto_stream_chacha20_ietf_xor_ic(expected, std::vector<uint8_t>(64, 0).data(), 64,
                                       nonce_bytes, counter, key);
    const uint32_t nonce[3] = {0, 0, 0};
    uint32_t state[16], out[16];
    Rfc8439State(key, counter, nonce, state);
    ChaChaBlock(20, state, out);
    EXPECT_EQ(0, std::memcmp(out, expected, 64));
  }
}

std::vector<uint8_t> FromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

Block BlockFromHex(std::string_view hex) { return BlockFromBytes(FromHex(hex).data()); }

// Strombergson, "Test Vectors for the Stream Cipher ChaCha" (draft-strombergson-chacha-test-
// vectors-01), 128-bit keys, first 64 keystream bytes (block 0) and, for TC1, the next 64.
struct StrombergsonVector {
  int rounds;
  const char* key;
  const char* iv;
  const char* block0;
  const char* block1;  // TC1 only
};
const StrombergsonVector kStrombergson128[] = {
    {8, "00000000000000000000000000000000", "0000000000000000",
     "e28a5fa4a67f8c5defed3e6fb7303486aa8427d31419a729572d777953491120"
     "b64ab8e72b8deb85cd6aea7cb6089a101824beeb08814a428aab1fa2c816081b",
     "8a26af448a1ba906368fd8c83831c18cec8ced811a028e675b8d2be8fce08116"
     "5ceae9f1d1b7a975497749480569ceb83de6a0a587d4984f19925f5d338e430d"},
    {12, "00000000000000000000000000000000", "0000000000000000",
     "e1047ba9476bf8ff312c01b4345a7d8ca5792b0ad467313f1dc412b5fdce3241"
     "0dea8b68bd774c36a920f092a04d3f95274fbeff97bc8491fcef37f85970b450",
     "1d43b61a8f7e19fceddef368ae6bfb11101bd9fd3e4d127de30db2db1b472e76"
     "426803a45e15b962751986ef1d9d50f598a5dcdc9fa529a28357991e784ea20f"},
    {20, "00000000000000000000000000000000", "0000000000000000",
     "89670952608364fd00b2f90936f031c8e756e15dba04b8493d00429259b20f46"
     "cc04f111246b6c2ce066be3bfb32d9aa0fddfbc12123d4b9e44f34dca05a103f",
     "6cd135c2878c832b5896b134f6142a9d4d8d0d8f1026d20a0a81512cbce6e975"
     "8a7143d021978022a384141a80cea3062f41f67a752e66ad3411984c787e30ad"},
    {8, "00112233445566778899aabbccddeeff", "0f1e2d3c4b5a6978",
     "29560d280b4528400a8f4b795369fb3a01105599e9f1ed58279cfc9ece2dc5f9"
     "9f1c2e52c98238f542a5c0a881d850b615d3acd9fbdb026e9368565da50e0d49",
     nullptr},
    {12, "00112233445566778899aabbccddeeff", "0f1e2d3c4b5a6978",
     "5eddc2d9428fceeec50a52a964eae0ffb04b2de006a9b04cff368ffa921116b2"
     "e8e264babd2efa0de43ef2e3b6d065e8f7c0a17837b0a40eb0e2c7a3742c8753",
     nullptr},
    {20, "00112233445566778899aabbccddeeff", "0f1e2d3c4b5a6978",
     "d1abf630467eb4f67f1cfb47cd626aae8afedbbe4ff8fc5fe9cfae307e74ed45"
     "1f1404425ad2b54569d5f18148939971abb8fafc88ce4ac7fe1c3d1f7a1eb7ca",
     nullptr},
    {8, "c46ec1b18ce8a878725a37e780dfb735", "1ada31d5cf688221",
     "6a870108859f679118f3e205e2a56a6826ef5a60a4102ac8d4770059fcb7c7ba"
     "e02f5ce004a6bfbbea53014dd82107c0aa1c7ce11b7d78f2d50bd3602bbd2594",
     nullptr},
    {12, "c46ec1b18ce8a878725a37e780dfb735", "1ada31d5cf688221",
     "b02bd81eb55c8f68b5e9ca4e307079bc225bd22007eddc6702801820709ce098"
     "07046a0d2aa552bfdbb49466176d56e32d519e10f5ad5f2746e241e09bdf9959",
     nullptr},
    {20, "c46ec1b18ce8a878725a37e780dfb735", "1ada31d5cf688221",
     "826abdd84460e2e9349f0ef4af5b179b426e4b2d109a9c5bb44000ae51bea90a"
     "496beeef62a76850ff3f0402c4ddc99f6db07f151c1c0dfac2e56565d6289625",
     nullptr},
};

TEST(ChaChaTest, SeedStateIsTheSixteenByteKeyForm) {
  for (const StrombergsonVector& v : kStrombergson128) {
    uint32_t state[16], out[16];
    ChaChaSeedState(BlockFromHex(v.key), 0, state);
    const std::vector<uint8_t> iv = FromHex(v.iv);  // the 64-bit nonce: words 14 and 15
    std::memcpy(state + 14, iv.data(), 8);
    ChaChaBlock(v.rounds, state, out);
    EXPECT_EQ(0, std::memcmp(out, FromHex(v.block0).data(), 64)) << v.rounds << " " << v.key;
  }
}

// A node's children and leaf words are blocks 0 and 1 of its seed's keystream (nonce zero), on
// every instruction set's kernels (16 nodes: the AVX-512 kernels' 16-lane path).
TEST(ChaChaTest, NodeExpansionIsTheSeedsKeystreamOnEveryIsa) {
  for (const StrombergsonVector& v : kStrombergson128) {
    if (v.block1 == nullptr) continue;
    const Prg prg = v.rounds == 8    ? Prg::kChaCha8
                    : v.rounds == 12 ? Prg::kChaCha12
                                     : Prg::kChaCha20;
    const std::vector<uint8_t> block0 = FromHex(v.block0), block1 = FromHex(v.block1);
    for (Isa isa : AvailableIsas()) {
      const Kernels& kernels = KernelsFor(isa);
      std::vector<Block> nodes(16, BlockFromHex(v.key)), children(32);
      kernels.expand_level(prg, nodes.data(), nodes.size(), Block{}, false, children.data());
      std::vector<uint32_t> words(16 * 16);
      const uint32_t final_cw[16] = {};
      kernels.convert_leaves(prg, nodes.data(), nodes.size(), 16, OutputType::kAdditive, false,
                             final_cw, words.data());
      for (int n = 0; n < 16; ++n) {
        EXPECT_EQ(children[2 * n], BlockFromBytes(block0.data())) << IsaName(isa) << v.rounds;
        EXPECT_EQ(children[2 * n + 1], BlockFromBytes(block0.data() + 16)) << IsaName(isa);
        EXPECT_EQ(0, std::memcmp(words.data() + 16 * n, block1.data(), 64)) << IsaName(isa);
      }
    }
  }
}

// An independent ChaCha20: libsodium's HChaCha20 with the 16-byte-key constants gives state words
// 0..3 and 12..15 after the 20 rounds, before the input is added back.
TEST(ChaChaTest, SeedStateMatchesLibsodiumHChaCha20) {
  ASSERT_GE(sodium_init(), 0);
  const uint8_t tau[17] = "expand 16-byte k";
  std::mt19937_64 rng(4242);
  for (int i = 0; i < 100; ++i) {
    uint32_t state[16], out[16];
    ChaChaSeedState({rng() & ~uint64_t{1}, rng()}, static_cast<uint32_t>(rng() % 2), state);
    uint8_t hchacha[32];
    crypto_core_hchacha20(hchacha, reinterpret_cast<const uint8_t*>(state + 12),
                          reinterpret_cast<const uint8_t*>(state + 4), tau);
    ChaChaBlock(20, state, out);
    uint32_t rounds_only[8];
    for (int w = 0; w < 4; ++w) rounds_only[w] = out[w] - state[w];
    for (int w = 0; w < 4; ++w) rounds_only[4 + w] = out[12 + w] - state[12 + w];
    EXPECT_EQ(0, std::memcmp(rounds_only, hchacha, 32)) << i;
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
            fast.convert_leaves(prg, parents.data(), n, words, output, party1, final_cw, va.data());
            ref.convert_leaves(prg, parents.data(), n, words, output, party1, final_cw, vb.data());
            ASSERT_EQ(va, vb) << "convert prg " << int(prg) << " n " << n << " words " << words;
          }
        }
      }
    }
  }
  for (uint32_t row_words : {1u, 3u, 8u, 16u, 17u, 25u, 40u}) {
    for (int keys : {1, 2, 3, 4, 7, 8, 9, 20}) {
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
      // Every set's kernels (they share their blocking) against the definition, written out.
      std::vector<uint32_t> acc_a(keys * row_words, 7), acc_b(keys * row_words, 7);
      std::vector<uint32_t> want_add(keys * row_words, 7);
      for (int k = 0; k < keys; ++k) {
        for (size_t r = 0; r < nrows; ++r) {
          for (uint32_t j = 0; j < row_words; ++j) {
            want_add[k * row_words + j] += y[k][r] * table[r * stride + j];
          }
        }
      }
      std::vector<uint32_t> want_xor = want_add;
      for (int k = 0; k < keys; ++k) {
        for (size_t r = 0; r < nrows; ++r) {
          if (((y[k][r / 32] >> (r % 32)) & 1) == 0) continue;
          for (uint32_t j = 0; j < row_words; ++j) {
            want_xor[k * row_words + j] ^= table[r * stride + j];
          }
        }
      }
      fast.mac_add(yp.data(), keys, table.data(), stride, nrows, row_words, acc_a.data());
      ref.mac_add(yp.data(), keys, table.data(), stride, nrows, row_words, acc_b.data());
      ASSERT_EQ(acc_a, want_add) << "mac_add words " << row_words << " keys " << keys;
      ASSERT_EQ(acc_b, want_add) << "mac_add words " << row_words << " keys " << keys;
      fast.mac_xor(yp.data(), keys, table.data(), stride, nrows, row_words, acc_a.data());
      ref.mac_xor(yp.data(), keys, table.data(), stride, nrows, row_words, acc_b.data());
      ASSERT_EQ(acc_a, want_xor) << "mac_xor words " << row_words << " keys " << keys;
      ASSERT_EQ(acc_b, want_xor) << "mac_xor words " << row_words << " keys " << keys;
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
