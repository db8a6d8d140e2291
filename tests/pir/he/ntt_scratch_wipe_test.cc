// The NTT kernels that narrow their input (ntt_avx2_f64.cc, ntt_avx2.cc, ntt_avx512.cc) keep it in
// this thread's Scratch::kNarrowNtt buffer, an inverse transform's output times n. After an
// encryption that is a s for the public a, so s would follow from it: every function that
// transforms secret data wipes the buffer before it returns (internal::SecretNttScope). Each
// case fills the buffer with a pattern, runs a function and expects the buffer all zero; the
// control shows that a transform of the same size does leave its data there (on CPUs whose
// kernel narrows).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/bfv.h"
#include "pir/he/bfv_params.h"
#include "pir/he/compressed.h"
#include "pir/he/encoder.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"
#include "pir/he/serialization.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using internal::GetScratch;
using internal::Scratch;

// The buffer's first n words (what a transform of N = n uses) all zero after fn.
template <class F>
bool LeavesTheScratchZero(size_t n, const F& fn) {
  std::fill_n(GetScratch(Scratch::kNarrowNtt, n), n, 0xa5a5a5a5a5a5a5a5);
  fn();
  const uint64_t* s = GetScratch(Scratch::kNarrowNtt, n);
  return std::all_of(s, s + n, [](uint64_t w) { return w == 0; });
}

TEST(NttScratch, ATransformLeavesItsDataThere) {
  const auto ctx = testing::BagContext();
  const size_t n = ctx->n();
  std::mt19937_64 rng = testing::Rng(70);
  std::vector<uint64_t> x;
  for (size_t j = 0; j < ctx->q_size(); ++j) {
    const std::vector<uint64_t> row = testing::RandomResidues(n, ctx->modulus(j).value(), rng);
    x.insert(x.end(), row.begin(), row.end());
  }
  std::fill_n(GetScratch(Scratch::kNarrowNtt, n), n, 0);
  internal::InverseNtt(ctx->q_ntt(), x.data());
  const uint64_t* s = GetScratch(Scratch::kNarrowNtt, n);
  if (std::all_of(s, s + n, [](uint64_t w) { return w == 0; })) {
    GTEST_SKIP() << "this CPU's NTT kernel for these primes keeps nothing in the scratch";
  }
}

TEST(NttScratch, SecretTransformsWipeIt) {
  const auto ctx = testing::BagContext();
  const size_t n = ctx->n();
  SecretKey sk;
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { sk = GenerateSecretKey(*ctx); }));
  const Plaintext m = *EncodeSlots(*ctx, {1, 2, 3});
  Ciphertext ct;
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { ct = *EncryptSymmetric(*ctx, sk, m); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { EXPECT_EQ(Decrypt(*ctx, sk, ct)->coeffs, m.coeffs); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { EXPECT_GT(*NoiseBudget(*ctx, sk, ct), 0); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] {
    EXPECT_EQ(DecryptCompressed(*ctx, sk, *Compress(*ctx, ct))->m.coeffs, m.coeffs);
  }));
  PublicKey pk;
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { pk = *GeneratePublicKey(*ctx, sk); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { ct = *Encrypt(*ctx, pk, m); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { (void)*GenerateRelinKey(*ctx, sk); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] {
    (void)*GenerateGaloisKeys(*ctx, sk, {*GaloisElementForStep(ctx->params().log_n, 1)});
  }));
  std::vector<uint8_t> sk_bytes;
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { sk_bytes = *SerializeSecretKey(*ctx, sk); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { EXPECT_EQ(ParseSecretKey(*ctx, sk_bytes)->ntt, sk.ntt); }));
}

// The slots' transforms modulo t: on a set whose t is narrow enough for the narrowing kernels (a
// 20-bit t; the bag's 58-bit t runs the scalar kernel), encoding a bag's weights and decoding a
// decrypted message leave nothing either.
TEST(NttScratch, SlotTransformsWipeIt) {
  const std::shared_ptr<const BfvContext> ctx = *BfvContext::Create(*BfvParams::Standard(12, 20));
  const size_t n = ctx->n();
  Plaintext m;
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { m = *EncodeSlots(*ctx, {5, 6, 7}); }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] {
    EXPECT_EQ((*DecodeSlots(*ctx, m))[1], 6u);
  }));
  EXPECT_TRUE(LeavesTheScratchZero(n, [&] { (void)*EncodeSignedSlots(*ctx, {-5, 6}); }));
}

}  // namespace
}  // namespace veil::he
