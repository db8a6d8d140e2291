#include "pir/lattice/packing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/lwe.h"
#include "tests/pir/lattice/lwe_batch.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;

using testing::LweBatch;

uint64_t Seed(int salt) { return testing::TestSeed("pir_lattice_test") + 100 + salt; }

RingContext DefaultContext() { return *RingContext::Create(RingParams::Default()); }

// Packs `lwe` with fresh keys and returns the client's phases.
std::vector<uint32_t> PackAndUnpack(const RingContext& ctx, const LweBatch& lwe, uint64_t rows,
                                    uint32_t lwe_n) {
  const RlweSecret z = RlweSecret::Generate(ctx);
  const std::vector<uint8_t> wire = *MakePackingKeys(ctx, z, lwe.secret);
  const PackingKeysView keys = *ParsePackingKeys(ctx, lwe_n, wire);
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, rows, lwe_n);
  const std::vector<SwitchedCiphertext> response =
      SwitchResponse(ctx, *Pack(ctx, matrix, keys, lwe.b));
  EXPECT_EQ(response.size(), (rows + ctx.n() - 1) / ctx.n());
  return *UnpackPhases(ctx, z, response, rows);
}

TEST(PackingTest, ClientDecryptsEveryRowWithoutTheHint) {
  // Two groups, the second partial; a small n keeps the test fast (the noise test uses 1024).
  const RingContext ctx = DefaultContext();
  const uint64_t rows = ctx.n() + 301;
  const uint32_t lwe_n = 64;
  const LweBatch lwe(rows, lwe_n, Seed(0));
  const std::vector<uint32_t> phases = PackAndUnpack(ctx, lwe, rows, lwe_n);
  ASSERT_EQ(phases.size(), rows);
  uint64_t wrong = 0;
  for (uint64_t r = 0; r < rows; ++r) wrong += RoundToByte(phases[r]) != lwe.bytes[r];
  EXPECT_EQ(wrong, 0u);
}

TEST(PackingTest, MeasuredNoiseMatchesTheModelAndStaysBelowTheBound) {
  const RingContext ctx = DefaultContext();
  const uint64_t rows = ctx.n();
  const LweBatch lwe(rows, kLweDimension, Seed(1));
  const std::vector<uint32_t> phases = PackAndUnpack(ctx, lwe, rows, kLweDimension);
  const PackingNoise model = PackingNoiseBound(ctx, kLweDimension);
  const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
  EXPECT_EQ(noise.wrong_share, 0);
  const double measured = noise.sigma, largest = noise.largest;
  std::printf(
      "packing noise at n = %u: sigma %.1f (model %.1f), largest %.0f, worst case %.0f, "
      "margin Delta/2 = %u\n",
      kLweDimension, measured, model.sigma, largest, model.worst_case, kDelta / 2);
  EXPECT_GT(measured, 0.9 * model.sigma);
  EXPECT_LT(measured, 1.1 * model.sigma);
  EXPECT_LE(largest, model.worst_case);
  // The default parameters leave LWE more than 255/256 of its rounding margin.
  EXPECT_TRUE(PackingNoiseWithinRule(ctx, kLweDimension));
  EXPECT_LT(model.worst_case / (kDelta / 2), 1.001 / 512);  // 2^-9 of the margin
}

TEST(PackingTest, TooLittleModulusFailsAsPredicted) {
  // Q = two 26-bit primes (2^52): the keys' error sum_j A_j e_j, ~2^42.9 at Q, becomes ~2^22.9
  // words, close to Delta / 2 = 2^23, so a predictable share of the bytes decrypts wrongly.
  const RingContext ctx = *RingContext::Create(*RingParams::Create(12, {67084289, 67043329}));
  const PackingNoise model = PackingNoiseBound(ctx, kLweDimension);
  EXPECT_FALSE(PackingNoiseWithinRule(ctx, kLweDimension));
  const uint64_t rows = ctx.n();
  const LweBatch lwe(rows, kLweDimension, Seed(2));
  const std::vector<uint32_t> phases = PackAndUnpack(ctx, lwe, rows, kLweDimension);
  const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
  // A byte fails when the Gaussian noise passes Delta / 2 (the LWE error, |e| <= 58, is noise
  // too small to matter): P = erfc(Delta / 2 / (sigma sqrt 2)).
  const double predicted = std::erfc((kDelta / 2) / (model.sigma * std::sqrt(2.0)));
  const double measured = noise.wrong_share;
  std::printf("Q = 2^52: sigma %.3g (model %.3g), failures %.3f (predicted %.3f)\n", noise.sigma,
              model.sigma, measured, predicted);
  EXPECT_GT(predicted, 0.2);
  EXPECT_NEAR(measured, predicted, 0.04);  // 4096 rows: the binomial's sd is 0.007
}

TEST(PackingTest, ByteSizesEqualTheFormulasAndKeysRoundTrip) {
  const RingContext ctx = DefaultContext();
  // 36 + 4 n k N: 50,331,684 bytes at n = 1024 (the per-query keys until ExpPack).
  EXPECT_EQ(PackingKeyBytes(ctx, kLweDimension), 36 + 4ull * 1024 * 3 * 4096);
  EXPECT_EQ(PackingKeyBytes(ctx, kLweDimension), 50331684u);

  const uint64_t rows = 700;
  const uint32_t lwe_n = 16;
  const LweBatch lwe(rows, lwe_n, Seed(3));
  const RlweSecret z = RlweSecret::Generate(ctx);
  const std::vector<uint8_t> wire = *MakePackingKeys(ctx, z, lwe.secret);
  EXPECT_EQ(wire.size(), PackingKeyBytes(ctx, lwe_n));
  EXPECT_EQ(wire.size(), 36u + 4 * 16 * 3 * 4096);
  const PackingKeysView parsed = *ParsePackingKeys(ctx, lwe_n, wire);
  EXPECT_EQ(parsed.lwe_n, lwe_n);
  EXPECT_TRUE(std::equal(parsed.seed.begin(), parsed.seed.end(), wire.begin()));
  EXPECT_EQ(parsed.beta.data(), wire.data() + 36);  // a view: nothing copied
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, rows, lwe_n);
  EXPECT_EQ(matrix.groups(), 1u);
  EXPECT_EQ(matrix.bytes(), 4ull * lwe_n * 3 * 4096);
  const std::vector<SwitchedCiphertext> response =
      SwitchResponse(ctx, *Pack(ctx, matrix, parsed, lwe.b));
  ASSERT_EQ(response.size(), 1u);
  const std::vector<uint8_t> response_bytes = SerializeResponse(response);
  EXPECT_EQ(response_bytes, SerializeSwitched(response[0]));
  EXPECT_EQ(response_bytes.size(), 32768u);  // 8 N
  const std::vector<SwitchedCiphertext> received = *ParseResponse(ctx, response_bytes);
  ASSERT_EQ(received.size(), 1u);
  const std::vector<uint32_t> phases = *UnpackPhases(ctx, z, received, rows);
  for (uint64_t r = 0; r < rows; ++r) ASSERT_EQ(RoundToByte(phases[r]), lwe.bytes[r]);
  // A response of part of a ciphertext, or with a residue not below q', is refused.
  EXPECT_THAT(
      ParseResponse(ctx, absl::MakeConstSpan(response_bytes).first(32767)).status().message(),
      HasSubstr("not a whole number of 32768-byte ciphertexts"));
  std::vector<uint8_t> high = response_bytes;
  high[0] = high[1] = high[2] = high[3] = 0xff;
  EXPECT_EQ(ParseResponse(ctx, high).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PackingTest, RefusesMismatchedInputs) {
  const RingContext ctx = DefaultContext();
  const uint32_t lwe_n = 8;
  const LweBatch lwe(10, lwe_n, Seed(4));
  const RlweSecret z = RlweSecret::Generate(ctx);
  const std::vector<uint8_t> wire = *MakePackingKeys(ctx, z, lwe.secret);
  const PackingKeysView keys = *ParsePackingKeys(ctx, lwe_n, wire);
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, 10, lwe_n);
  const auto expect_invalid = [](const absl::Status& s, const char* message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
  };
  expect_invalid(MakePackingKeys(ctx, z, {}).status(), "the LWE secret is empty");
  expect_invalid(PackingMatrix::Create(ctx, lwe.a, 0, lwe_n).status(), "got 80 words for 0 x 8");
  expect_invalid(PackingMatrix::Create(ctx, lwe.a, 9, lwe_n).status(), "got 80 words for 9 x 8");
  expect_invalid(Pack(ctx, matrix, keys, absl::MakeConstSpan(lwe.b).first(9)).status(),
                 "one b word per matrix row (10), got 9");
  const PackingMatrix wider =
      *PackingMatrix::Create(ctx, std::vector<uint32_t>(10 * 9), 10, lwe_n + 1);
  expect_invalid(Pack(ctx, wider, keys, lwe.b).status(),
                 "keys for n = 8 (98304 residues) do not fit a matrix of n = 9");

  // A matrix given by its transforms: A_{g,j} where the layout says, the sizes and residues
  // checked.
  const size_t words = ctx.k() * ctx.n();
  std::vector<uint32_t> transforms(2 * 3 * words);
  for (size_t w = 0; w < transforms.size(); ++w) transforms[w] = static_cast<uint32_t>(w % 1000);
  const absl::StatusOr<PackingMatrix> given = PackingMatrix::FromTransforms(ctx, 2, 3, transforms);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->groups(), 2u);
  EXPECT_EQ(given->lwe_n(), 3u);
  EXPECT_EQ(given->rows(), 2 * ctx.n());
  EXPECT_EQ(given->Polynomial(1, 2)[5], (5 * words + 5) % 1000);
  expect_invalid(PackingMatrix::FromTransforms(ctx, 3, 3, transforms).status(),
                 "3 x 3 polynomials of 12288 residues: got 73728 words");
  expect_invalid(PackingMatrix::FromTransforms(ctx, 0, 3, {}).status(), "got 0 words");
  transforms[words + 4096] = static_cast<uint32_t>(ctx.base()[1].value());
  expect_invalid(PackingMatrix::FromTransforms(ctx, 2, 3, transforms).status(),
                 "residue 16384 is not below its prime 536690689");

  const std::vector<SwitchedCiphertext> response =
      SwitchResponse(ctx, *Pack(ctx, matrix, keys, lwe.b));
  expect_invalid(UnpackPhases(ctx, z, response, ctx.n() + 1).status(),
                 "4097 rows need 2 packed ciphertexts, got 1");

  expect_invalid(ParsePackingKeys(ctx, lwe_n + 1, wire).status(),
                 "packing keys for n = 9 are 442404 bytes, got 393252");
  std::vector<uint8_t> other_n = wire;
  other_n[32] = 7;
  expect_invalid(ParsePackingKeys(ctx, lwe_n, other_n).status(),
                 "packing keys are for n = 7, expected 8");
  std::vector<uint8_t> too_big = wire;
  const uint32_t prime = 536690689;  // the second prime, in a residue of that prime's row
  std::memcpy(too_big.data() + 36 + 4 * (4096 + 5), &prime, 4);
  expect_invalid(ParsePackingKeys(ctx, lwe_n, too_big).status(),
                 "residue 4101 is not below its prime 536690689");
}

}  // namespace
}  // namespace veil::lattice
