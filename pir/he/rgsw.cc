#include "pir/he/rgsw.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pir/he/keyswitch.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {

absl::StatusOr<RgswCiphertext> EncryptRgswBit(const BfvContext& ctx, const SecretKey& sk,
                                              uint32_t bit) {
  if (bit > 1) {
    return absl::InvalidArgumentError(absl::StrCat("an RGSW bit must be 0 or 1, not ", bit));
  }
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  // The NTT form of the constant m is m in every slot; m s is s masked (no branch on the bit).
  const uint64_t mask = uint64_t{0} - bit;
  std::vector<uint64_t> m(sk.ntt.size()), ms(sk.ntt.size());
  for (size_t c = 0; c < sk.ntt.size(); ++c) {
    m[c] = bit;
    ms[c] = sk.ntt[c] & mask;
  }
  RgswCiphertext g;
  g.params_id = ctx.id();
  g.m = internal::MakeKeySwitchKey(ctx, sk.ntt.data(), m.data());
  g.ms = internal::MakeKeySwitchKey(ctx, sk.ntt.data(), ms.data());
  sodium_memzero(m.data(), m.size() * sizeof(uint64_t));
  sodium_memzero(ms.data(), ms.size() * sizeof(uint64_t));
  return g;
}

absl::Status CheckRgswCiphertext(const BfvContext& ctx, const RgswCiphertext& g, const char* what) {
  if (absl::Status s = ctx.CheckId(g.params_id, what); !s.ok()) return s;
  if (absl::Status s = CheckKeySwitchKey(ctx, g.m, what); !s.ok()) return s;
  return CheckKeySwitchKey(ctx, g.ms, what);
}

double ExternalProductVariance(const BfvContext& ctx) {
  // Two inner products' key errors (from m and from m s), one ModDown.
  return internal::KeyErrorVariance(ctx) + internal::KeySwitchVariance(ctx);
}

absl::StatusOr<QRgswCiphertext> ConvertToRgsw(const BfvContext& ctx, const KeySwitchKey& conversion,
                                              absl::Span<const uint64_t> m_parts) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  if (absl::Status s = CheckKeySwitchKey(ctx, conversion, "conversion key"); !s.ok()) return s;
  if (m_parts.size() != k * 2 * words) {
    return absl::InvalidArgumentError(
        absl::StrCat("RGSW parts of ", m_parts.size(), " residues (expected ", k * 2 * words, ")"));
  }
  for (size_t r = 0; r < m_parts.size(); ++r) {
    if (m_parts[r] >= ctx.modulus(r / n % k).value()) {
      return absl::InvalidArgumentError("an RGSW part's residue is not below its prime");
    }
  }
  QRgswCiphertext g;
  g.params_id = ctx.id();
  g.parts.resize(2 * m_parts.size());
  std::copy(m_parts.begin(), m_parts.end(), g.parts.begin());
  std::vector<uint64_t> c1(words);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t* c0_ntt = m_parts.data() + i * 2 * words;
    uint64_t* ms = g.parts.data() + (k + i) * 2 * words;
    std::copy_n(c0_ntt + words, words, c1.data());
    internal::InverseNtt(ctx.q_ntt(), c1.data());
    internal::SwitchKey(ctx, c1.data(), conversion, ms, ms + words);
    internal::ForwardNtt(ctx.q_ntt(), ms);
    internal::ForwardNtt(ctx.q_ntt(), ms + words);
    internal::AddRows(ctx.q_ntt(), ms + words, c0_ntt, ms + words);
  }
  return g;
}

double ConvertedVariance(const BfvContext& ctx, double m_variance) {
  const double n = static_cast<double>(ctx.n());
  return n * 2 / 3 * m_variance + internal::KeySwitchVariance(ctx);
}

double QRgswProductVariance(const BfvContext& ctx, double m_variance, double ms_variance) {
  return static_cast<double>(ctx.n()) * internal::DigitMeanSquare(ctx) * (m_variance + ms_variance);
}

namespace internal {

void ExternalProduct(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* x0,
                     const uint64_t* x1, uint64_t* out0, uint64_t* out1) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n, qp_words = (k + 1) * n;
  std::vector<uint64_t> coefficients(words), digits(k * qp_words);
  std::vector<uint64_t> acc(2 * qp_words), half(2 * qp_words);
  // Each half's digits, times its key: c0 with the key from m, c1 with the key from m s.
  auto product = [&](const uint64_t* x, const KeySwitchKey& key, uint64_t* o) {
    std::copy(x, x + words, coefficients.begin());
    InverseNtt(ctx.q_ntt(), coefficients.data());
    DecomposeForKeySwitch(ctx, coefficients.data(), x, digits.data());
    KeySwitchInnerProduct(ctx, digits.data(), key, o, o + qp_words);
  };
  product(x0, g.m, acc.data());
  product(x1, g.ms, half.data());
  AddRows(ctx.qp_ntt(), acc.data(), half.data(), acc.data());
  AddRows(ctx.qp_ntt(), acc.data() + qp_words, half.data() + qp_words, acc.data() + qp_words);
  ModDown(ctx, acc.data(), true, out0);
  ModDown(ctx, acc.data() + qp_words, true, out1);
}

void ExternalProduct(const BfvContext& ctx, const QRgswCiphertext& g, const uint64_t* x0,
                     const uint64_t* x1, uint64_t* out0, uint64_t* out1) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  const size_t digit_words = k * words;  // one half's digits, lifted to the Q rows only
  // This thread's workspace (scratch.h): the coefficients, then both halves' digits.
  uint64_t* coefficients = GetScratch(Scratch::kExternalProduct, words + 2 * digit_words);
  uint64_t* digits = coefficients + words;
  for (size_t h = 0; h < 2; ++h) {
    const uint64_t* x = h == 0 ? x0 : x1;
    std::copy_n(x, words, coefficients);
    InverseNtt(ctx.q_ntt(), coefficients);
    DecomposeForKeySwitch(ctx, coefficients, x, digits + h * digit_words, false);
  }
  // Output half o, row j, slot c: the sum over the halves h (c0's digits with the m parts, c1's
  // with the m s parts) and digits i of digit_{h,i} part_{h,i,o}, reduced lazily: products are
  // below q_j^2 < 2^124 (primes below 2^62, BfvParams), so 8 of them and a residue fit 128 bits.
  for (size_t o = 0; o < 2; ++o) {
    uint64_t* out = o == 0 ? out0 : out1;
    for (size_t j = 0; j < k; ++j) {
      const Modulus& q = ctx.modulus(j);
      for (size_t c = 0; c < n; ++c) {
        uint128_t sum = 0;
        for (size_t t = 0; t < 2 * k; ++t) {  // t = h k + i
          const uint64_t d = digits[t / k * digit_words + (t % k * k + j) * n + c];
          const uint64_t p = g.parts[(t * 2 + o) * words + j * n + c];
          sum += static_cast<uint128_t>(d) * p;
          if (t % 8 == 7) sum = q.Reduce(sum);
        }
        out[j * n + c] = q.Reduce(sum);
      }
    }
  }
}

namespace {

template <typename Rgsw>
void CMuxWith(const BfvContext& ctx, const Rgsw& g, const uint64_t* a0, const uint64_t* a1,
              const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1) {
  const size_t words = ctx.q_size() * ctx.n();
  uint64_t* d = GetScratch(Scratch::kCMux, 2 * words);
  SubRows(ctx.q_ntt(), b0, a0, d);
  SubRows(ctx.q_ntt(), b1, a1, d + words);
  ExternalProduct(ctx, g, d, d + words, d, d + words);
  AddRows(ctx.q_ntt(), a0, d, out0);
  AddRows(ctx.q_ntt(), a1, d + words, out1);
}

}  // namespace

void CMux(const BfvContext& ctx, const RgswCiphertext& g, const uint64_t* a0, const uint64_t* a1,
          const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1) {
  CMuxWith(ctx, g, a0, a1, b0, b1, out0, out1);
}

void CMux(const BfvContext& ctx, const QRgswCiphertext& g, const uint64_t* a0, const uint64_t* a1,
          const uint64_t* b0, const uint64_t* b1, uint64_t* out0, uint64_t* out1) {
  CMuxWith(ctx, g, a0, a1, b0, b1, out0, out1);
}

}  // namespace internal
}  // namespace veil::he
