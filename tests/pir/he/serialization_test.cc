// Wire formats: round trips of every object (and that the parsed keys still work), the sizes the
// header promises (seeded halves travel as seeds), and clear errors for truncated, over-long,
// foreign or corrupted bytes.
#include "pir/he/serialization.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pir/he/encoder.h"

namespace veil::he {
namespace {

class Serialization : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = *BfvContext::Create(*BfvParams::Standard(12, 20));
    sk_ = GenerateSecretKey(*ctx_);
    m_ = *EncodeSlots(*ctx_, {1, 2, 3, 4, 5});
  }
  const BfvContext& ctx() { return *ctx_; }
  std::vector<uint64_t> Slots(const Ciphertext& ct, const SecretKey& sk) {
    return *DecodeSlots(ctx(), *Decrypt(ctx(), sk, ct));
  }
  std::shared_ptr<const BfvContext> ctx_;
  SecretKey sk_;
  Plaintext m_;
};

TEST_F(Serialization, CiphertextsRoundTripSeededAndFull) {
  const Ciphertext seeded = *EncryptSymmetric(ctx(), sk_, m_);
  const std::vector<uint8_t> small = *SerializeCiphertext(ctx(), seeded);
  EXPECT_EQ(small.size(), CiphertextBytes(ctx(), 2, true));
  const Ciphertext back = *ParseCiphertext(ctx(), small);
  EXPECT_EQ(back.data, seeded.data);
  EXPECT_EQ(back.seed, seeded.seed);
  // After an operation the seed is gone and both halves travel.
  const Ciphertext sum = *Add(ctx(), seeded, seeded);
  const std::vector<uint8_t> full = *SerializeCiphertext(ctx(), sum);
  EXPECT_EQ(full.size(), CiphertextBytes(ctx(), 2, false));
  EXPECT_LT(small.size() * 2, full.size() + 100);
  EXPECT_EQ(ParseCiphertext(ctx(), full)->data, sum.data);
  // 72 bits per coefficient at N = 4096: 36,864 bytes a polynomial.
  EXPECT_EQ(full.size(), kHeHeaderBytes + 2 + 2 * 36864);
  const Ciphertext three = *Multiply(ctx(), seeded, seeded);
  EXPECT_EQ(ParseCiphertext(ctx(), *SerializeCiphertext(ctx(), three))->data, three.data);
}

// The wire format itself, read here one bit at a time: after the header, the size and the flags,
// each polynomial's residues row by row, bits(q_j) bits each, least significant bit first, padded
// with zero bits to a whole byte; and a residue not below its prime is refused wherever it is.
TEST_F(Serialization, PolynomialsArePackedLeastSignificantBitFirst) {
  const Ciphertext seeded = *EncryptSymmetric(ctx(), sk_, m_);
  const Ciphertext three = *Multiply(ctx(), seeded, seeded);
  const std::vector<uint8_t> bytes = *SerializeCiphertext(ctx(), three);
  const size_t n = ctx().n(), k = ctx().q_size();
  size_t bit = 8 * (kHeHeaderBytes + 2);
  const auto read = [&](int bits) {
    uint64_t v = 0;
    for (int b = 0; b < bits; ++b, ++bit) v |= uint64_t{(bytes[bit / 8] >> (bit % 8)) & 1u} << b;
    return v;
  };
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < k; ++j) {
      for (size_t c = 0; c < n; ++c) {
        ASSERT_EQ(read(ctx().modulus(j).bits()), three.data[(i * k + j) * n + c])
            << "polynomial " << i << " row " << j << " slot " << c;
      }
    }
    ASSERT_EQ(read((8 - bit % 8) % 8), 0u) << "padding of polynomial " << i;
  }
  EXPECT_EQ(bit, 8 * bytes.size());
  // q_1 itself in the first, a middle and the last slot of the last polynomial's second row.
  ASSERT_EQ(k, 2u);
  const uint64_t q1 = ctx().modulus(1).value();
  const int bits0 = ctx().modulus(0).bits(), bits1 = ctx().modulus(1).bits();
  for (const size_t c : {size_t{0}, n / 2 + 1, n - 1}) {
    std::vector<uint8_t> bad = bytes;
    size_t at = 8 * (kHeHeaderBytes + 2) + 2 * (bits0 + bits1) * n + bits0 * n + bits1 * c;
    for (int b = 0; b < bits1; ++b, ++at) {
      bad[at / 8] =
          static_cast<uint8_t>((bad[at / 8] & ~(1u << (at % 8))) | (((q1 >> b) & 1u) << (at % 8)));
    }
    const absl::StatusOr<Ciphertext> parsed = ParseCiphertext(ctx(), bad);
    ASSERT_FALSE(parsed.ok()) << "slot " << c;
    EXPECT_NE(parsed.status().message().find(absl::StrCat("residue ", q1, " in row 1")),
              std::string::npos)
        << parsed.status();
  }
}

TEST_F(Serialization, KeysRoundTripAndStillWork) {
  const PublicKey pk =
      *ParsePublicKey(ctx(), *SerializePublicKey(ctx(), *GeneratePublicKey(ctx(), sk_)));
  const Ciphertext ct = *Encrypt(ctx(), pk, m_);
  EXPECT_EQ(Slots(ct, sk_), *DecodeSlots(ctx(), m_));

  std::vector<uint8_t> sk_bytes = *SerializeSecretKey(ctx(), sk_);
  EXPECT_EQ(sk_bytes.size(), kHeHeaderBytes + 4096 / 4);
  const SecretKey sk = *ParseSecretKey(ctx(), sk_bytes);
  EXPECT_EQ(sk.ntt, sk_.ntt);

  const RelinKey rk =
      *ParseRelinKey(ctx(), *SerializeRelinKey(ctx(), *GenerateRelinKey(ctx(), sk_)));
  const Ciphertext squared = *Relinearize(ctx(), *Multiply(ctx(), ct, ct), rk);
  EXPECT_EQ(Slots(squared, sk)[4], 25u);

  const std::vector<uint32_t> elements = {*GaloisElementForStep(12, 1),
                                          *GaloisElementForStep(12, 0)};
  const GaloisKeys original = *GenerateGaloisKeys(ctx(), sk_, elements);
  const std::vector<uint8_t> gk_bytes = *SerializeGaloisKeys(ctx(), original);
  EXPECT_EQ(gk_bytes.size(), kHeHeaderBytes + 4 + 2 * GaloisKeyBytes(ctx()));
  const GaloisKeys gk = *ParseGaloisKeys(ctx(), gk_bytes);
  for (const auto& [g, key] : original.keys) {
    EXPECT_EQ(gk.keys.at(g).b, key.b);
    EXPECT_EQ(gk.keys.at(g).a, key.a);  // re-expanded from the seed
  }
  EXPECT_EQ(Slots(*RotateRows(ctx(), ct, 1, gk), sk)[0], 2u);
}

// c_0 rounded by d bits: d bits per coefficient fewer, c_0 within 2^(d - 1) of the original (the
// same small integer in every prime), c_1 and the seed unchanged, one encoding (parse then
// serialize gives the bytes back, the clamped top of x_0's range included), still decrypting.
TEST_F(Serialization, CiphertextsWithARoundedC0) {
  const Ciphertext seeded = *EncryptSymmetric(ctx(), sk_, m_);
  const size_t n = ctx().n(), words = ctx().q_size() * n;
  ASSERT_EQ(ctx().modulus(0).bits(), 36);
  for (int d : {1, 8, 20, 35}) {
    SCOPED_TRACE(d);
    const std::vector<uint8_t> bytes = *SerializeCiphertext(ctx(), seeded, d);
    EXPECT_EQ(bytes.size(), CiphertextBytes(ctx(), 2, true, d));
    EXPECT_EQ(bytes.size(), CiphertextBytes(ctx(), 2, true) + 1 - n * d / 8);
    EXPECT_EQ(SerializedRoundBits(bytes), d);
    const Ciphertext back = *ParseCiphertext(ctx(), bytes);
    EXPECT_EQ(back.seed, seeded.seed);
    EXPECT_TRUE(
        std::equal(back.poly(1, words), back.poly(1, words) + words, seeded.poly(1, words)));
    int64_t largest = 0;
    for (size_t c = 0; c < n; ++c) {
      const Modulus& q0 = ctx().modulus(0);
      const int64_t eps = q0.Centered(q0.Sub(back.data[c], seeded.data[c]));
      for (size_t j = 1; j < ctx().q_size(); ++j) {
        const Modulus& q = ctx().modulus(j);
        ASSERT_EQ(q.Centered(q.Sub(back.data[j * n + c], seeded.data[j * n + c])), eps) << c;
      }
      largest = std::max(largest, std::abs(eps));
    }
    EXPECT_LE(largest, int64_t{1} << (d - 1));
    EXPECT_GE(2 * largest, int64_t{1} << (d - 1));  // it did round
    EXPECT_EQ(*SerializeCiphertext(ctx(), back, d), bytes);
    EXPECT_EQ(Slots(back, sk_), Slots(seeded, sk_));
  }
  // A full ciphertext rounds too; exact bytes state 0.
  const Ciphertext sum = *Add(ctx(), seeded, seeded);
  EXPECT_EQ(Slots(*ParseCiphertext(ctx(), *SerializeCiphertext(ctx(), sum, 12)), sk_),
            Slots(sum, sk_));
  EXPECT_EQ(SerializedRoundBits(*SerializeCiphertext(ctx(), sum)), 0);

  EXPECT_EQ(SerializeCiphertext(ctx(), seeded, 36).status().message(),
            "c_0 rounded by 36 bits (1 to 35)");
  std::vector<uint8_t> bytes = *SerializeCiphertext(ctx(), seeded, 12);
  for (uint8_t d : {0, 36, 200}) {
    std::vector<uint8_t> b = bytes;
    b[14] = d;
    EXPECT_EQ(ParseCiphertext(ctx(), b).status().message(),
              absl::StrCat("c_0 rounded by ", d, " bits (1 to 35)"));
  }
  // x_0's 24 kept bits all ones: beyond (q_0 - 1) >> 12 = 0xffffee.
  std::vector<uint8_t> high = bytes;
  high[15] = high[16] = high[17] = 0xff;
  EXPECT_EQ(ParseCiphertext(ctx(), high).status().message(),
            "ciphertext c_0: residue 16777215 in row 0 is not below 16777199");
  EXPECT_NE(ParseCiphertext(ctx(), absl::MakeConstSpan(bytes).first(15))
                .status()
                .message()
                .find("truncated"),
            std::string::npos);
}

TEST_F(Serialization, RejectsMalformedBytes) {
  const std::vector<uint8_t> good = *SerializeCiphertext(ctx(), *EncryptSymmetric(ctx(), sk_, m_));
  for (size_t len : {size_t{0}, size_t{1}, size_t{11}, size_t{12}, size_t{13}, size_t{14},
                     good.size() / 2, good.size() - 1}) {
    absl::StatusOr<Ciphertext> r = ParseCiphertext(ctx(), absl::MakeConstSpan(good).first(len));
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << len;
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status();
  }
  auto corrupt = [&](size_t at, uint8_t value) {
    std::vector<uint8_t> b = good;
    b[at] = value;
    return ParseCiphertext(ctx(), b).status();
  };
  EXPECT_EQ(corrupt(0, 'X').message(), "not a veil HE object (bad magic)");
  EXPECT_EQ(corrupt(2, 9).message(), "unsupported HE object version 9");
  EXPECT_EQ(corrupt(3, 4).message(), "object kind 4 where kind 1 was expected");
  EXPECT_NE(corrupt(4, good[4] ^ 1).message().find("serialized object belongs to parameters"),
            std::string::npos);
  EXPECT_EQ(corrupt(12, 4).message(), "ciphertext size 4 (2 or 3)");
  EXPECT_EQ(corrupt(13, 4).message(), "unknown ciphertext flags 4");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(ParseCiphertext(ctx(), longer).status().message(),
            "1 bytes after the end of the ciphertext");
  // The first residue all ones: 36 bits of 1 exceed q_0 = 0xffffee001.
  std::vector<uint8_t> high = good;
  for (size_t i = 14; i < 14 + 5; ++i) high[i] = 0xff;
  EXPECT_NE(ParseCiphertext(ctx(), high).status().message().find("ciphertext: residue"),
            std::string::npos);

  // Another parameter set's context refuses the bytes.
  const auto other = *BfvContext::Create(*BfvParams::Standard(12, 21));
  EXPECT_EQ(ParseCiphertext(*other, good).status().code(), absl::StatusCode::kInvalidArgument);

  std::vector<uint8_t> sk = *SerializeSecretKey(ctx(), sk_);
  sk[kHeHeaderBytes] = 0x02;
  EXPECT_EQ(ParseSecretKey(ctx(), sk).status().message(), "secret key: invalid ternary code 2");

  const GaloisKeys two =
      *GenerateGaloisKeys(ctx(), sk_, {*GaloisElementForStep(12, 1), *GaloisElementForStep(12, 2)});
  std::vector<uint8_t> gk = *SerializeGaloisKeys(ctx(), two);
  std::vector<uint8_t> many = gk;
  many[kHeHeaderBytes + 1] = 0xff;  // count 65282 > N
  EXPECT_EQ(ParseGaloisKeys(ctx(), many).status().message(), "65282 Galois keys: at most N = 4096");
  std::vector<uint8_t> even = gk;
  even[kHeHeaderBytes + 4] = 2;  // first element 2
  EXPECT_NE(ParseGaloisKeys(ctx(), even).status().message().find("Galois element 2 must be odd"),
            std::string::npos);
  std::vector<uint8_t> missing = gk;
  missing.resize(gk.size() - 1);
  EXPECT_NE(ParseGaloisKeys(ctx(), missing).status().message().find("truncated Galois keys"),
            std::string::npos);
}

// The bits past a polynomial's last residue must be zero (one encoding per ciphertext). Rings of
// N >= 8 fill whole bytes; at N = 4 with c_0 rounded by one bit its rows take 4 x (29 + 30 + 30)
// = 356 bits, 4 of them padding.
TEST(SerializationPadding, NonzeroPaddingBitsAreRefused) {
  constexpr int kLogN = 2;
  const std::vector<uint64_t> primes = *GenerateNttPrimes(30, uint64_t{2} << kLogN, 4);
  const std::vector<uint64_t> t = *GenerateNttPrimes(17, uint64_t{2} << kLogN, 1);
  const std::shared_ptr<const BfvContext> ctx = *BfvContext::Create(
      *BfvParams::Create(kLogN, {primes[0], primes[1], primes[2]}, primes[3], t[0]));
  const SecretKey sk = GenerateSecretKey(*ctx);
  const Ciphertext ct = *EncryptSymmetric(*ctx, sk, Plaintext{ctx->id(), {1, 2, 3, 4}});
  const std::vector<uint8_t> bytes = *SerializeCiphertext(*ctx, ct, 1);
  ASSERT_TRUE(ParseCiphertext(*ctx, bytes).ok());
  const size_t last = bytes.size() - sizeof(Seed) - 1;  // c_0's last byte, then c_1's seed
  ASSERT_EQ(bytes[last] >> 4, 0);
  for (int b = 4; b < 8; ++b) {
    std::vector<uint8_t> bad = bytes;
    bad[last] ^= static_cast<uint8_t>(1u << b);
    EXPECT_EQ(ParseCiphertext(*ctx, bad).status().message(),
              "ciphertext c_0: nonzero padding bits");
  }
}

}  // namespace
}  // namespace veil::he
