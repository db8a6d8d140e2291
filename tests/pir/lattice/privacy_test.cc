// Query privacy: the queries a client sends for two different columns are indistinguishable to a
// statistical test, which does catch leaky variants (a zero secret; one secret reused across
// queries); so are the hybrid's selections of two windows (one RLWE ciphertext of the bits,
// hybrid.h). Like tests/dpf's key privacy test: per position of the query, a chi-square homogeneity
// test on the top four bits of the words (and of differences of queries), against a
// Bonferroni-corrected critical value.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "pir/lattice/hybrid.h"
#include "tests/pir/lattice/seeded_source.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using Queries = std::vector<std::vector<uint32_t>>;

// Chi-square (2 x 16 table, 15 degrees of freedom) of the top nibbles of word `pos` in a and b.
double NibbleChiSquare(const Queries& a, const Queries& b, size_t pos) {
  double ca[16] = {}, cb[16] = {};
  for (const auto& q : a) ++ca[q[pos] >> 28];
  for (const auto& q : b) ++cb[q[pos] >> 28];
  const double na = a.size(), nb = b.size();
  double chi = 0;
  for (int v = 0; v < 16; ++v) {
    const double total = ca[v] + cb[v];
    if (total == 0) continue;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    chi += (ca[v] - ea) * (ca[v] - ea) / ea + (cb[v] - eb) * (cb[v] - eb) / eb;
  }
  return chi;
}

// Differences of consecutive queries within a set, and across two sets.
Queries Differences(const Queries& a, const Queries& b) {
  Queries d;
  for (size_t i = 0; i + 1 < a.size(); i += 2) {
    std::vector<uint32_t> x(a[i].size());
    for (size_t c = 0; c < x.size(); ++c) x[c] = a[i][c] - b[i + 1][c];
    d.push_back(std::move(x));
  }
  return d;
}

// The largest statistic over every position: the words themselves (set a against set b) and
// differences (within a against across a and b). Secret reuse shows only in the latter.
double MaxStatistic(const Queries& a, const Queries& b) {
  const Queries within = Differences(a, a), across = Differences(a, b);
  double worst = 0;
  for (size_t pos = 0; pos < a[0].size(); ++pos) {
    worst = std::max({worst, NibbleChiSquare(a, b, pos), NibbleChiSquare(within, across, pos)});
  }
  return worst;
}

// 15 degrees of freedom, 1e-7 over up to 1,000 positions x 2 statistics: 1 - F(80) = 1e-10.
constexpr double kCritical = 80.0;

using MakeQueryFn = std::function<std::vector<uint32_t>(uint64_t row)>;

Queries Collect(int count, uint64_t row, const MakeQueryFn& make) {
  Queries out;
  for (int i = 0; i < count; ++i) out.push_back(make(row));
  return out;
}

TEST(QueryPrivacyTest, ColumnsAreIndistinguishableAndLeaksAreCaught) {
  std::mt19937_64 gen(testing::TestSeed("pir_lattice_test"));
  for (Protocol protocol : {Protocol::kSimplePir, Protocol::kDoublePir}) {
    // SimplePIR: 60 columns; DoublePIR: 30 columns and 4 x 24 second-level words.
    const uint64_t rows = protocol == Protocol::kSimplePir ? 60 : 180;
    LweServerOptions options;
    options.protocol = protocol;
    options.shape.records_per_column = protocol == Protocol::kSimplePir ? 1 : 6;
    const uint32_t record_bytes = 4;
    auto server = LweServer::FromRecords(testing::RandomRecords(rows, record_bytes, gen), rows,
                                         record_bytes, testing::DigestOf(rows), options);
    ASSERT_TRUE(server.ok()) << server.status();
    const Shape& shape = (*server)->shape();
    ASSERT_LE(shape.query_words(), 1000u);
    auto client = testing::ClientFor(**server);
    ASSERT_NE(client, nullptr);
    // The first and the last row: different columns (and, for DoublePIR, different slots).
    const uint64_t first = 0, last = rows - 1;
    ASSERT_NE(shape.column_of(first), shape.column_of(last));
    constexpr int kQueries = 1200;  // 75 per nibble value and position
    const MakeQueryFn honest = [&](uint64_t row) {
      std::vector<uint32_t> q(shape.query_words());
      EXPECT_TRUE(client->MakeQuery(row, absl::MakeSpan(q)).ok());
      return q;
    };
    const double statistic =
        MaxStatistic(Collect(kQueries, first, honest), Collect(kQueries, last, honest));
    EXPECT_LT(statistic, kCritical) << ProtocolName(protocol);

    // Leaky variants of the first-level query (the same public matrix, unit vector and errors).
    const PublicMatrix a1(DeriveSeed(shape, testing::DigestOf(rows)), MatrixDomain::kA1, shape.d0);
    SeededSource rng(gen());
    std::vector<uint32_t> reused(kLweDimension);
    SampleSecret(rng, absl::MakeSpan(reused));
    auto leaky = [&](bool zero_secret) -> MakeQueryFn {
      return [&, zero_secret](uint64_t row) {
        std::vector<uint32_t> secret =
            zero_secret ? std::vector<uint32_t>(kLweDimension, 0) : reused;
        std::vector<int32_t> errors(shape.d0);
        SampleErrors(rng, absl::MakeSpan(errors));
        std::vector<uint32_t> q(shape.d0);
        EncryptUnitVectors(a1, secret, errors, {shape.column_of(row)}, absl::MakeSpan(q));
        return q;
      };
    };
    for (bool zero_secret : {true, false}) {
      const double caught = MaxStatistic(Collect(kQueries, first, leaky(zero_secret)),
                                         Collect(kQueries, last, leaky(zero_secret)));
      EXPECT_GT(caught, kCritical) << "the test failed to see a leak ("
                                   << (zero_secret ? "zero secret" : "reused secret") << ")";
    }
  }
}

TEST(QueryPrivacyTest, HybridSelectionsAreIndistinguishableAndLeaksAreCaught) {
  // A ring of N = 1,024 (the statistics look at coefficients, not at the ring's size) and a
  // window of 2 starts: start 0 sends the bit 0, start 1 the bit 1.
  const RingContext ring = *RingContext::Create(testing::SmallRing());
  const he::BfvContext& ctx = *ring.expansion();
  const HybridWindow window{.groups = 2, .window = 1, .starts = 2, .bits = 1};
  const uint64_t q0 = ctx.modulus(0).value();
  // Per selection, the first 300 coefficients (coefficient form) of row 0 of the ciphertext's
  // c0, scaled to words: c0 = -a z + e + m, m the bit in coefficients 0 .. k - 1 (times 2^-L').
  auto sample = [&](const he::SecretKey& key) -> MakeQueryFn {
    return [&](uint64_t start) {
      const RlweSecret z = RlweSecret::FromKey(ring, key);
      const std::vector<uint8_t> selection = *MakeHybridSelection(ring, z, window, start);
      std::vector<uint64_t> row(ctx.n());
      for (size_t c = 0; c < ctx.n(); ++c) {
        uint32_t residue;
        std::memcpy(&residue, selection.data() + 32 + 4 * c, 4);
        row[c] = residue;
      }
      ring.ntt()[0].Inverse(row.data());
      std::vector<uint32_t> words;
      for (size_t c = 0; c < 300; ++c) {
        words.push_back(static_cast<uint32_t>((static_cast<unsigned __int128>(row[c]) << 32) / q0));
      }
      return words;
    };
  };
  constexpr int kSelections = 800;  // 50 per nibble value and position
  const he::SecretKey key = he::GenerateSecretKey(ctx);
  const double statistic =
      MaxStatistic(Collect(kSelections, 0, sample(key)), Collect(kSelections, 1, sample(key)));
  EXPECT_LT(statistic, kCritical);
  // A zero secret leaves c0 = e + m: small, and across two windows apart at coefficients < k.
  he::SecretKey zero = key;
  std::fill(zero.ntt.begin(), zero.ntt.end(), 0);
  const double caught =
      MaxStatistic(Collect(kSelections, 0, sample(zero)), Collect(kSelections, 1, sample(zero)));
  EXPECT_GT(caught, kCritical) << "the test failed to see a zero secret";
  std::printf("hybrid selections: statistic %.1f (honest), %.1f (zero secret), critical %.0f\n",
              statistic, caught, kCritical);
}

}  // namespace
}  // namespace veil::lattice
