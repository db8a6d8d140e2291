// DPF correctness: shares reconstruct beta at alpha and 0 elsewhere for every PRG and output type,
// full-domain evaluation equals point evaluation, EvalDot equals the naive sum, multi-key equals
// single-key, thread counts and instruction sets agree.
#include <random>

#include "dpf/eval.h"
#include "dpf/kernels.h"
#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gtest/gtest.h"

namespace veil::dpf {
namespace {

const Prg kAllPrgs[] = {Prg::kAes128, Prg::kChaCha8, Prg::kChaCha12, Prg::kChaCha20,
                        Prg::kSipHash};

std::vector<DpfParameters> AllOutputs(int log_domain, Prg prg) {
  std::vector<DpfParameters> out;
  for (int w = 0; w <= 4; ++w) out.push_back({log_domain, prg, OutputType::kAdditive, w});
  out.push_back({log_domain, prg, OutputType::kXor, 0});
  return out;
}

uint32_t Combine(const DpfParameters& p, uint32_t a, uint32_t b) {
  return p.output == OutputType::kXor ? a ^ b : a + b;
}

uint32_t PointOfFull(const DpfParameters& p, const std::vector<uint32_t>& full, uint64_t x) {
  return p.output == OutputType::kXor ? (full[x / 32] >> (x % 32)) & 1 : full[x];
}

TEST(DpfTest, EveryAlphaOfSmallDomainsReconstructs) {
  SeededRandomForTesting rng(1);
  for (Prg prg : kAllPrgs) {
    for (int log_domain = 1; log_domain <= 10; ++log_domain) {
      for (const DpfParameters& params : AllOutputs(log_domain, prg)) {
        // Every alpha on small domains; a spread of alphas on the larger ones keeps this fast.
        const uint64_t n = params.domain_size();
        const uint64_t step = log_domain <= 7 ? 1 : n / 37 + 1;
        for (uint64_t alpha = 0; alpha < n; alpha += step) {
          const uint32_t beta = params.output == OutputType::kXor ? 1 : 0x9e3779b9u + alpha;
          auto keys = GenerateKeys(params, alpha, beta, rng);
          ASSERT_TRUE(keys.ok()) << keys.status();
          auto f0 = EvalFull(keys->first);
          auto f1 = EvalFull(keys->second);
          ASSERT_TRUE(f0.ok() && f1.ok());
          for (uint64_t x = 0; x < n; ++x) {
            const uint32_t want = x == alpha ? beta : 0;
            ASSERT_EQ(Combine(params, PointOfFull(params, *f0, x), PointOfFull(params, *f1, x)),
                      want)
                << "prg " << PrgName(prg) << " output " << OutputName(params) << " log "
                << log_domain << " alpha " << alpha << " x " << x;
          }
        }
      }
    }
  }
}

TEST(DpfTest, FullEqualsPointEverywhere) {
  SeededRandomForTesting rng(2);
  for (Prg prg : kAllPrgs) {
    for (const DpfParameters& params : AllOutputs(12, prg)) {
      auto keys = GenerateKeys(params, 1234, 1, rng);
      ASSERT_TRUE(keys.ok());
      for (const DpfKey* key : {&keys->first, &keys->second}) {
        auto full = EvalFull(*key);
        ASSERT_TRUE(full.ok());
        for (uint64_t x = 0; x < params.domain_size(); x += 7) {
          auto point = EvalPoint(*key, x);
          ASSERT_TRUE(point.ok());
          ASSERT_EQ(*point, PointOfFull(params, *full, x)) << OutputName(params) << " x " << x;
        }
      }
    }
  }
}

TEST(DpfTest, RandomAlphaOnLargeDomains) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 gen(seed);
  for (int log_domain : {20, 32, 40}) {
    for (Prg prg : kAllPrgs) {
      DpfParameters params{log_domain, prg};
      const uint64_t alpha = gen() & (params.domain_size() - 1);
      auto keys = GenerateKeys(params, alpha, 5);
      ASSERT_TRUE(keys.ok());
      for (uint64_t x : {alpha, alpha ^ 1, alpha ^ 16, alpha ^ (uint64_t{1} << (log_domain - 1)),
                         gen() & (params.domain_size() - 1)}) {
        uint32_t y = *EvalPoint(keys->first, x) + *EvalPoint(keys->second, x);
        EXPECT_EQ(y, x == alpha ? 5u : 0u) << "log " << log_domain << " x " << x;
      }
    }
  }
}

TEST(DpfTest, EvalFullWindowedBoundsTheWindow) {
  DpfParameters params{14};
  auto keys = GenerateKeys(params, 77, 1);
  ASSERT_TRUE(keys.ok());
  size_t max_chunk = 0;
  uint64_t next_leaf = 0;
  ASSERT_TRUE(EvalFullWindowed(keys->first,
                               [&](uint64_t first_leaf, absl::Span<const uint32_t> words) {
                                 EXPECT_EQ(first_leaf, next_leaf);
                                 next_leaf += words.size() / 16;
                                 max_chunk = std::max(max_chunk, words.size());
                               },
                               3)
                  .ok());
  EXPECT_EQ(next_leaf, params.domain_size() / 16);
  EXPECT_EQ(max_chunk, 8u * 16u);
}

std::vector<uint32_t> NaiveDot(const std::vector<uint32_t>& full, const DpfParameters& params,
                               const TableView& table) {
  std::vector<uint32_t> out(table.row_words, 0);
  for (uint64_t r = 0; r < table.rows; ++r) {
    const uint32_t y = PointOfFull(params, full, r);
    for (uint32_t j = 0; j < table.row_words; ++j) {
      out[j] = params.output == OutputType::kXor ? out[j] ^ (y ? table.row(r)[j] : 0)
                                                 : out[j] + y * table.row(r)[j];
    }
  }
  return out;
}

TEST(DpfTest, EvalDotEqualsNaiveSumAndReconstructsTheRow) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 gen(seed);
  for (uint64_t rows : {1ull, 2ull, 15ull, 17ull, 1000ull, 4097ull, 70001ull}) {
    for (uint32_t row_words : {1u, 3u, 16u, 17u}) {
      const uint64_t stride = row_words + gen() % 2;
      std::vector<uint32_t> data(rows * stride);
      for (auto& w : data) w = static_cast<uint32_t>(gen());
      TableView table{data.data(), rows, row_words, stride};
      for (Prg prg : {Prg::kAes128, Prg::kChaCha12, Prg::kSipHash}) {
        for (const char* out_name : {"add16", "add4", "xor"}) {
          DpfParameters params = *ParseOutput(out_name, {LogDomainForRows(rows), prg});
          const uint64_t alpha = gen() % rows;
          const uint32_t beta = params.output == OutputType::kXor ? 1 : 3;
          auto keys = GenerateKeys(params, alpha, beta);
          ASSERT_TRUE(keys.ok());
          std::vector<uint32_t> a0(row_words), a1(row_words);
          ASSERT_TRUE(EvalDot(keys->first, table, absl::MakeSpan(a0), 1).ok());
          ASSERT_TRUE(EvalDot(keys->second, table, absl::MakeSpan(a1), 3).ok());
          EXPECT_EQ(a0, NaiveDot(*EvalFull(keys->first), params, table))
              << rows << "x" << row_words << " " << out_name;
          for (uint32_t j = 0; j < row_words; ++j) {
            ASSERT_EQ(Combine(params, a0[j], a1[j]), beta * table.row(alpha)[j])
                << rows << "x" << row_words << " " << PrgName(prg) << " " << out_name;
          }
        }
      }
    }
  }
}

TEST(DpfTest, MultiKeyEqualsSingleKeyForAnyThreadCount) {
  std::mt19937_64 gen(5);
  const uint64_t rows = 20000;
  const uint32_t row_words = 16;
  std::vector<uint32_t> data(rows * row_words);
  for (auto& w : data) w = static_cast<uint32_t>(gen());
  TableView table{data.data(), rows, row_words, 0};
  for (const char* out_name : {"add16", "xor"}) {
    std::vector<DpfKey> keys;
    for (int i = 0; i < 37; ++i) {
      DpfParameters params = *ParseOutput(out_name, {LogDomainForRows(rows), kAllPrgs[i % 5]});
      keys.push_back(GenerateKeys(params, gen() % rows, 1)->first);
    }
    std::vector<const DpfKey*> ptrs;
    for (const DpfKey& k : keys) ptrs.push_back(&k);
    std::vector<uint32_t> single(keys.size() * row_words);
    for (size_t k = 0; k < keys.size(); ++k) {
      ASSERT_TRUE(
          EvalDot(keys[k], table, absl::MakeSpan(single.data() + k * row_words, row_words)).ok());
    }
    for (int threads : {1, 2, 3, 8}) {
      std::vector<uint32_t> multi(keys.size() * row_words);
      ASSERT_TRUE(EvalDotMulti(ptrs, table, absl::MakeSpan(multi), threads).ok());
      EXPECT_EQ(multi, single) << out_name << " threads " << threads;
    }
  }
}

TEST(DpfTest, EveryIsaGivesTheSameAnswer) {
  std::mt19937_64 gen(11);
  const uint64_t rows = 5000;
  std::vector<uint32_t> data(rows * 16);
  for (auto& w : data) w = static_cast<uint32_t>(gen());
  TableView table{data.data(), rows, 16, 0};
  const Isa original = ActiveIsa();
  for (Prg prg : kAllPrgs) {
    auto keys = GenerateKeys({LogDomainForRows(rows), prg}, 4321, 1);
    ASSERT_TRUE(keys.ok());
    std::vector<uint32_t> reference;
    for (Isa isa : AvailableIsas()) {
      ASSERT_TRUE(SetActiveIsa(isa).ok());
      std::vector<uint32_t> out(16);
      ASSERT_TRUE(EvalDot(keys->first, table, absl::MakeSpan(out)).ok());
      auto full = EvalFull(keys->second);
      out.insert(out.end(), full->begin(), full->end());
      if (reference.empty()) {
        reference = out;
      } else {
        EXPECT_EQ(out, reference) << IsaName(isa) << " " << PrgName(prg);
      }
    }
  }
  ASSERT_TRUE(SetActiveIsa(original).ok());
}

TEST(DpfTest, EvalDotRejectsKeysThatDoNotFitTheTable) {
  std::vector<uint32_t> data(100 * 4);
  TableView table{data.data(), 100, 4, 0};
  auto keys = GenerateKeys({8}, 3, 1);  // 2^8 points, but 100 rows need 2^7
  std::vector<uint32_t> out(4);
  absl::Status s = EvalDot(keys->first, table, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not fit a table of 100 rows"), std::string::npos) << s;
  auto good = GenerateKeys({7}, 3, 1);
  std::vector<uint32_t> short_out(3);
  s = EvalDot(good->first, table, absl::MakeSpan(short_out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output holds 3 words"), std::string::npos) << s;
}

}  // namespace
}  // namespace veil::dpf
