// BFV: decrypt(op(enc(x))) = op(x) slot by slot for every operation on every standard parameter
// set, measured noise budgets at or above the worst-case model (noise_model.h), the budget running
// out exactly as predicted, Galois known answers (SEAL util/galois.cpp), and clear errors for
// mismatched parameters, sizes and keys.
#include "pir/he/bfv.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/encoder.h"
#include "pir/he/noise_model.h"
#include "pir/he/poly.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::Rng;

std::shared_ptr<const BfvContext> Context(int log_n, int plain_bits) {
  return *BfvContext::Create(*BfvParams::Standard(log_n, plain_bits));
}

// What a test on one parameter set needs: context, keys, random slot vectors.
class BfvOps : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    // t: 20 bits at N = 4096 (72-bit Q), 40 at 8192, 50 at 16384.
    const int log_n = GetParam();
    ctx_ = Context(log_n, log_n == 12 ? 20 : log_n == 13 ? 40 : 50);
    sk_ = GenerateSecretKey(*ctx_);
    rng_ = Rng(100 + log_n);
  }
  const BfvContext& ctx() const { return *ctx_; }
  uint64_t t() const { return ctx_->params().t; }
  size_t row() const { return ctx_->n() / 2; }

  std::vector<uint64_t> RandomSlots() { return testing::RandomResidues(ctx_->n(), t(), rng_); }
  Ciphertext Encrypt(const std::vector<uint64_t>& slots) {
    return *EncryptSymmetric(ctx(), sk_, *EncodeSlots(ctx(), slots));
  }
  std::vector<uint64_t> DecryptSlots(const Ciphertext& ct) {
    return *DecodeSlots(ctx(), *he::Decrypt(ctx(), sk_, ct));
  }
  int Budget(const Ciphertext& ct) { return *NoiseBudget(ctx(), sk_, ct); }
  uint64_t MulT(uint64_t a, uint64_t b) const { return ctx_->plain_modulus().Mul(a, b); }
  // Slot i after rotating rows left by `step`.
  std::vector<uint64_t> Rotated(const std::vector<uint64_t>& v, int step) const {
    std::vector<uint64_t> out(v.size());
    const int64_t r = static_cast<int64_t>(row());
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t base = static_cast<int64_t>(i / row()) * r,
                    col = static_cast<int64_t>(i % row());
      out[i] = v[base + ((col + step) % r + r) % r];
    }
    return out;
  }

  std::shared_ptr<const BfvContext> ctx_;
  SecretKey sk_;
  std::mt19937_64 rng_;
};

TEST_P(BfvOps, EncryptDecryptPublicAndSymmetric) {
  const NoiseModel model(ctx());
  const std::vector<uint64_t> v = RandomSlots();
  const Plaintext m = *EncodeSlots(ctx(), v);
  const PublicKey pk = *GeneratePublicKey(ctx(), sk_);
  const Ciphertext pub = *he::Encrypt(ctx(), pk, m);
  const Ciphertext sym = *EncryptSymmetric(ctx(), sk_, m);
  EXPECT_EQ(DecryptSlots(pub), v);
  EXPECT_EQ(DecryptSlots(sym), v);
  EXPECT_TRUE(sym.seed.has_value());
  EXPECT_GE(Budget(pub), NoiseModel::Budget(model.FreshPublic()));
  EXPECT_GE(Budget(sym), NoiseModel::Budget(model.FreshSymmetric()));
  // The symmetric bound is nearly tight: the error is at most 21 and often close.
  EXPECT_LE(Budget(sym), NoiseModel::Budget(model.FreshSymmetric()) + 6);
}

TEST_P(BfvOps, AddAndSubtract) {
  const std::vector<uint64_t> a = RandomSlots(), b = RandomSlots();
  const Ciphertext ca = Encrypt(a), cb = Encrypt(b);
  const std::vector<uint64_t> sum = DecryptSlots(*Add(ctx(), ca, cb));
  const std::vector<uint64_t> diff = DecryptSlots(*Sub(ctx(), ca, cb));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(sum[i], ctx().plain_modulus().Add(a[i], b[i])) << i;
    ASSERT_EQ(diff[i], ctx().plain_modulus().Sub(a[i], b[i])) << i;
  }
  const NoiseModel model(ctx());
  EXPECT_GE(Budget(*Add(ctx(), ca, cb)),
            NoiseModel::Budget(model.Add(model.FreshSymmetric(), model.FreshSymmetric())));
}

TEST_P(BfvOps, MultiplyPlain) {
  const std::vector<uint64_t> a = RandomSlots(), b = RandomSlots();
  const Ciphertext ca = Encrypt(a);
  const Ciphertext product =
      *MultiplyPlain(ctx(), ca, *PrepareForMultiply(ctx(), *EncodeSlots(ctx(), b)));
  const std::vector<uint64_t> got = DecryptSlots(product);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], MulT(a[i], b[i])) << i;
  const NoiseModel model(ctx());
  EXPECT_GE(Budget(product),
            NoiseModel::Budget(model.MultiplyPlain(model.FreshSymmetric(), double(t() / 2))));
}

TEST_P(BfvOps, MultiplyAndRelinearize) {
  const std::vector<uint64_t> a = RandomSlots(), b = RandomSlots();
  const Ciphertext product = *Multiply(ctx(), Encrypt(a), Encrypt(b));
  ASSERT_EQ(product.size, 3u);
  const RelinKey rk = *GenerateRelinKey(ctx(), sk_);
  const Ciphertext relin = *Relinearize(ctx(), product, rk);
  ASSERT_EQ(relin.size, 2u);
  const std::vector<uint64_t> three = DecryptSlots(product), two = DecryptSlots(relin);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(three[i], MulT(a[i], b[i])) << i;
    ASSERT_EQ(two[i], MulT(a[i], b[i])) << i;
  }
  const NoiseModel model(ctx());
  EXPECT_GE(Budget(relin), NoiseModel::Budget(model.MultiplyRelin(model.FreshSymmetric(),
                                                                  model.FreshSymmetric())));
}

TEST_P(BfvOps, RotationsSingleAndHoisted) {
  const int r = static_cast<int>(row());
  const std::vector<int> steps = {1, -1, 7, r - 1, -(r / 2) + 3};
  std::vector<uint32_t> elements = {*GaloisElementForStep(ctx().log_n(), 0)};
  for (int s : steps) elements.push_back(*GaloisElementForStep(ctx().log_n(), s));
  const GaloisKeys gk = *GenerateGaloisKeys(ctx(), sk_, elements);
  const std::vector<uint64_t> v = RandomSlots();
  const Ciphertext ct = Encrypt(v);
  const std::vector<Ciphertext> hoisted = *RotateRowsHoisted(ctx(), ct, steps, gk);
  const NoiseModel model(ctx());
  for (size_t i = 0; i < steps.size(); ++i) {
    const Ciphertext single = *RotateRows(ctx(), ct, steps[i], gk);
    EXPECT_EQ(DecryptSlots(single), Rotated(v, steps[i])) << "step " << steps[i];
    EXPECT_EQ(DecryptSlots(hoisted[i]), Rotated(v, steps[i])) << "hoisted step " << steps[i];
    // Hoisting changes the work, not the result.
    EXPECT_EQ(single.data, hoisted[i].data) << "step " << steps[i];
    EXPECT_GE(Budget(single), NoiseModel::Budget(model.Rotate(model.FreshSymmetric())));
  }
  std::vector<uint64_t> swapped(v.size());
  for (size_t i = 0; i < v.size(); ++i) swapped[i] = v[(i + row()) % v.size()];
  EXPECT_EQ(DecryptSlots(*RotateColumns(ctx(), ct, gk)), swapped);
  EXPECT_EQ(DecryptSlots(*RotateRows(ctx(), ct, 0, gk)), v);
}

INSTANTIATE_TEST_SUITE_P(StandardSets, BfvOps, ::testing::Values(12, 13, 14),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "N" + std::to_string(1 << info.param);
                         });

TEST(BfvParams, StandardSetsAndValidation) {
  for (int log_n : {12, 13, 14}) {
    const BfvParams p = *BfvParams::Standard(log_n, 30);
    EXPECT_EQ(p.t % (uint64_t{2} << log_n), 1u);
    EXPECT_NE(p.SecuritySource().find("HomomorphicEncryption.org standard (2018), Table 1"),
              std::string::npos);
  }
  EXPECT_NE(BfvParams::Standard(13, 30)->Id(), BfvParams::Standard(13, 31)->Id());
  EXPECT_EQ(BfvParams::Standard(13, 30)->Id(), BfvParams::Standard(13, 30)->Id());
  EXPECT_EQ(BfvParams::Standard(11, 20).status().message(),
            "standard BFV sets exist for N = 4096, 8192, 16384, not 2^11");
  EXPECT_EQ(
      BfvParams::Create(12, {0xffffee001, 0xffffee001}, 0x1ffffe0001, 1032193).status().message(),
      "prime 68719403009 appears twice");
  EXPECT_EQ(BfvParams::Create(12, {0xffffee001}, 0x1ffffe0001, 12289).status().message(),
            "plaintext modulus 12289 is not a prime = 1 mod 8192 below 2^62");
  EXPECT_EQ(BfvParams::Create(12, {0xffffee003}, 0x1ffffe0001, 1032193).status().code(),
            absl::StatusCode::kInvalidArgument);
  const BfvParams custom = *BfvParams::Create(12, {0xffffee001}, 0x1ffffe0001, 1032193);
  EXPECT_EQ(custom.SecuritySource(), "custom parameters: no security claim");
}

// SEAL's util/galois.cpp vectors (NOTES.md).
TEST(Galois, KnownAnswers) {
  const Modulus q = *Modulus::Create(17);
  const std::vector<uint64_t> in = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<uint64_t> out(8);
  internal::ApplyGaloisCoefficients(q, 3, 3, in.data(), out.data());
  EXPECT_EQ(out, (std::vector<uint64_t>{0, 14, 6, 1, 13, 7, 2, 12}));
  EXPECT_EQ(*GaloisElementForStep(3, 0), 15u);
  EXPECT_EQ(*GaloisElementForStep(3, 1), 3u);
  EXPECT_EQ(*GaloisElementForStep(3, 2), 9u);
  EXPECT_EQ(*GaloisElementForStep(3, -1), 11u);
  EXPECT_EQ(GaloisElementForStep(3, 4).status().message(),
            "rotation step 4 is outside (-N/2, N/2) = (-4, 4)");
}

TEST(Galois, NttPermutationMatchesCoefficientAutomorphism) {
  std::mt19937_64 rng = Rng(20);
  for (int log_n : {3, 10, 13}) {
    const size_t n = size_t{1} << log_n;
    const NttTables t =
        *NttTables::Create(log_n, *Modulus::Create((*GenerateNttPrimes(50, 2 * n, 1))[0]));
    for (uint32_t g : {3u, 5u, static_cast<uint32_t>(2 * n - 1), static_cast<uint32_t>(n + 1)}) {
      const std::vector<uint64_t> a = testing::RandomResidues(n, t.modulus().value(), rng);
      std::vector<uint64_t> sigma(n), a_ntt = a;
      internal::ApplyGaloisCoefficients(t.modulus(), log_n, g, a.data(), sigma.data());
      t.Forward(sigma.data());
      t.Forward(a_ntt.data());
      const std::vector<uint32_t> perm = internal::GaloisNttPermutation(log_n, g);
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(sigma[k], a_ntt[perm[k]]) << "g " << g;
    }
  }
}

// Multiplying by the constant plaintext c scales the noise by exactly |c| (and the message by
// c): the budget falls by log2 |c| per step and decryption fails once it reaches zero.
TEST(BfvNoise, BudgetRunsOutAsPredicted) {
  const auto ctx = Context(12, 20);
  const SecretKey sk = GenerateSecretKey(*ctx);
  const uint64_t t = ctx->params().t, c = t / 3;  // |c| ~ 2^18.3 centered
  Plaintext scalar{ctx->id(), std::vector<uint64_t>(ctx->n(), 0)};
  scalar.coeffs[0] = c;
  const PlaintextNtt prepared = *PrepareForMultiply(*ctx, scalar);
  std::vector<uint64_t> expect(ctx->n());
  std::mt19937_64 rng = Rng(21);
  for (uint64_t& x : expect) x = rng() % t;
  Ciphertext ct = *EncryptSymmetric(*ctx, sk, *EncodeSlots(*ctx, expect));
  // Predicted: after j steps the budget is b0 - j log2 c (never below zero), so the ciphertext
  // decrypts for the first floor(b0 / log2 c) steps and no longer after ceil(b0 / log2 c).
  const double per_step = std::log2(double(c));
  const int fresh = *NoiseBudget(*ctx, sk, ct);
  const int predicted_steps = static_cast<int>(std::ceil(fresh / per_step));
  int steps = 0;
  for (int budget = fresh; budget > 0;) {
    ct = *MultiplyPlain(*ctx, ct, prepared);
    for (uint64_t& x : expect) x = ctx->plain_modulus().Mul(x, c);
    budget = *NoiseBudget(*ctx, sk, ct);
    ++steps;
    const double predicted = std::max(0.0, fresh - steps * per_step);
    EXPECT_NEAR(budget, predicted, 1.5) << "step " << steps;
    const bool correct = *DecodeSlots(*ctx, *Decrypt(*ctx, sk, ct)) == expect;
    EXPECT_EQ(correct, budget > 0) << "step " << steps << ", budget " << budget;
    ASSERT_LE(steps, predicted_steps) << "the budget lasted longer than predicted";
  }
  EXPECT_EQ(steps, predicted_steps);
}

TEST(BfvErrors, MismatchedParametersAndSizes) {
  const auto a = Context(12, 20), b = Context(12, 21);
  const SecretKey sk_a = GenerateSecretKey(*a);
  const Ciphertext ct = *EncryptSymmetric(*a, sk_a, *EncodeSlots(*a, {1, 2, 3}));
  absl::StatusOr<Ciphertext> wrong = Add(*b, ct, ct);
  ASSERT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("first operand belongs to parameters"),
            std::string::npos);
  EXPECT_EQ(Decrypt(*b, sk_a, ct).status().code(), absl::StatusCode::kInvalidArgument);
  Ciphertext truncated = ct;
  truncated.data.pop_back();
  EXPECT_NE(Add(*a, truncated, ct).status().message().find("first operand has size 2 and"),
            std::string::npos);
  const GaloisKeys none = *GenerateGaloisKeys(*a, sk_a, {});
  EXPECT_EQ(RotateRows(*a, ct, 1, none).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(RotateRows(*a, ct, 1, none).status().message(), "no Galois key for element 3");
  EXPECT_EQ(GenerateGaloisKeys(*a, sk_a, {4}).status().message(),
            "Galois element 4 must be odd and below 2N = 8192");
  const Ciphertext three = *Multiply(*a, ct, ct);
  EXPECT_EQ(Multiply(*a, three, ct).status().message(),
            "multiplication takes ciphertexts of size 2, got 3 and 2");
  EXPECT_EQ(RotateRows(*a, three, 1, none).status().message(),
            "rotations take ciphertexts of size 2 (relinearise first), got 3");
  const RelinKey rk = *GenerateRelinKey(*a, sk_a);
  EXPECT_EQ(Relinearize(*a, ct, rk).status().message(),
            "relinearisation takes a ciphertext of size 3, got 2");
  EXPECT_EQ(EncodeSlots(*a, {a->params().t}).status().code(), absl::StatusCode::kInvalidArgument);
  Plaintext bad{a->id(), std::vector<uint64_t>(a->n(), a->params().t)};
  EXPECT_EQ(EncryptSymmetric(*a, sk_a, bad).status().message(),
            "plaintext coefficient 1032193 is not below t = 1032193");
  // Keys of the wrong shape or parameters.
  GaloisKeys short_key = *GenerateGaloisKeys(*a, sk_a, {3});
  short_key.keys.at(3).b.resize(10);
  EXPECT_NE(RotateRows(*a, ct, 1, short_key).status().message().find("Galois key has 10 + "),
            std::string::npos);
  const SecretKey sk_b = GenerateSecretKey(*b);
  EXPECT_NE(GenerateRelinKey(*a, sk_b).status().message().find("secret key belongs to"),
            std::string::npos);
  RelinKey foreign_rk = rk;
  foreign_rk.params_id = b->id();
  EXPECT_EQ(Relinearize(*a, three, foreign_rk).status().code(), absl::StatusCode::kInvalidArgument);
  SecretKey forged = sk_a;
  forged.ntt[5] = a->modulus(0).value();
  EXPECT_NE(Decrypt(*a, forged, ct).status().message().find("secret key: residue"),
            std::string::npos);
}

}  // namespace
}  // namespace veil::he
