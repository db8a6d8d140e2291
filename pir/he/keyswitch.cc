#include "pir/he/keyswitch.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace internal {

namespace {

// Digit row i lifted to prime q_j (q_i <= 2 q_j): the digit centered in (-q_i/2, q_i/2], plus q_j
// if negative, branch-free (the digits are random: a branch would mispredict half the time).
// Cloned for AVX-512 and AVX2, where the loop vectorizes (the build's baseline is SSE2, which lacks
// the 64-bit compares).
__attribute__((target_clones("avx512f", "avx2", "default"))) void LiftCentered(
    const uint64_t* digit, size_t n, uint64_t q_i, uint64_t q_j, uint64_t* out) {
  const uint64_t half = q_i / 2;
  for (size_t c = 0; c < n; ++c) {
    const int64_t y = static_cast<int64_t>(digit[c]) -
                      static_cast<int64_t>(q_i & (0 - uint64_t{digit[c] > half}));
    out[c] = static_cast<uint64_t>(y + static_cast<int64_t>(q_j & (0 - uint64_t{y < 0})));
  }
}

// The same for q_i > 2 q_j, digits below 2^50 (so that a double's quotient estimate is off by at
// most one): digit mod q_j, minus q_i mod q_j where the digit is above q_i / 2. Compiled twice:
// for AVX-512 F/DQ (64-bit integer <-> double conversions and products) and the baseline.
__attribute__((always_inline)) inline void LiftCenteredReduceBody(const uint64_t* digit, size_t n,
                                                                  uint64_t q_i, uint64_t q_j,
                                                                  uint64_t* out) {
  const uint64_t half = q_i / 2, q_i_mod_q = q_i % q_j;
  const double inverse = 1.0 / static_cast<double>(q_j);
  for (size_t c = 0; c < n; ++c) {
    const uint64_t estimate = static_cast<uint64_t>(static_cast<double>(digit[c]) * inverse);
    int64_t v = static_cast<int64_t>(digit[c] - estimate * q_j);  // in [-q_j, 2 q_j)
    v += static_cast<int64_t>(q_j & (0 - uint64_t{v < 0}));
    v -= static_cast<int64_t>(q_j & (0 - uint64_t{v >= static_cast<int64_t>(q_j)}));
    v -= static_cast<int64_t>(q_i_mod_q & (0 - uint64_t{digit[c] > half}));
    out[c] = static_cast<uint64_t>(v + static_cast<int64_t>(q_j & (0 - uint64_t{v < 0})));
  }
}

__attribute__((target("avx512f,avx512dq"))) void LiftCenteredReduceAvx512(const uint64_t* digit,
                                                                          size_t n, uint64_t q_i,
                                                                          uint64_t q_j,
                                                                          uint64_t* out) {
  LiftCenteredReduceBody(digit, n, q_i, q_j, out);
}

// The same on AVX2 for q_i <= 2^32 (the lattice ring: 29-bit digits lifted to its 22-bit special
// prime), without the double estimate: a digit below 2^32 mod q_j by one 32-bit Shoup reduction
// (the quotient floor(digit floor(2^32 / q_j) / 2^32) is at most one short), in four 64-bit lanes.
__attribute__((target("avx2"))) void LiftCenteredReduceAvx2(const uint64_t* digit, size_t n,
                                                            uint64_t q_i, uint64_t q_j,
                                                            uint64_t* out) {
  const __m256i q = _mm256_set1_epi64x(static_cast<int64_t>(q_j));
  const __m256i q_minus_1 = _mm256_set1_epi64x(static_cast<int64_t>(q_j - 1));
  const __m256i half = _mm256_set1_epi64x(static_cast<int64_t>(q_i / 2));
  const __m256i q_i_mod_q = _mm256_set1_epi64x(static_cast<int64_t>(q_i % q_j));
  const __m256i one32 = _mm256_set1_epi64x(static_cast<int64_t>((uint64_t{1} << 32) / q_j));
  const __m256i zero = _mm256_setzero_si256();
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(digit + c));
    const __m256i quotient = _mm256_srli_epi64(_mm256_mul_epu32(d, one32), 32);
    __m256i v = _mm256_sub_epi64(d, _mm256_mul_epu32(quotient, q));                  // [0, 2 q_j)
    v = _mm256_sub_epi64(v, _mm256_and_si256(q, _mm256_cmpgt_epi64(v, q_minus_1)));  // [0, q_j)
    v = _mm256_sub_epi64(v, _mm256_and_si256(q_i_mod_q, _mm256_cmpgt_epi64(d, half)));
    v = _mm256_add_epi64(v, _mm256_and_si256(q, _mm256_cmpgt_epi64(zero, v)));  // below 0: + q_j
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), v);
  }
  if (c < n) LiftCenteredReduceBody(digit + c, n - c, q_i, q_j, out + c);
}

void LiftCenteredReduce(const uint64_t* digit, size_t n, uint64_t q_i, uint64_t q_j,
                        uint64_t* out) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  if (avx512) {
    LiftCenteredReduceAvx512(digit, n, q_i, q_j, out);
  } else if (CpuHasAvx2() && q_i <= (uint64_t{1} << 32)) {
    LiftCenteredReduceAvx2(digit, n, q_i, q_j, out);
  } else {
    LiftCenteredReduceBody(digit, n, q_i, q_j, out);
  }
}

}  // namespace

void DecomposeForKeySwitch(const BfvContext& ctx, const uint64_t* d, const uint64_t* d_ntt,
                           uint64_t* digits, bool to_special) {
  const size_t n = ctx.n(), k = ctx.q_size(), rows = k + (to_special ? 1 : 0);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t* digit = d + i * n;
    const uint64_t q_i = ctx.modulus(i).value(), half = q_i / 2;
    for (size_t j = 0; j < rows; ++j) {
      uint64_t* out = digits + (i * rows + j) * n;
      if (j == i) {
        // Modulo q_i the digit is d's row i itself: its transform is at hand when d's is.
        if (d_ntt != nullptr) {
          std::copy_n(d_ntt + i * n, n, out);
          continue;
        }
        std::copy_n(digit, n, out);
      } else {
        // The digit centered in (-q_i/2, q_i/2]: a quarter of the uniform digit's mean square
        // and no mean, whose product with the key's error would be one fixed polynomial per key.
        const Modulus& q = ctx.modulus(j);
        const uint64_t q_j = q.value();
        if (q_i <= 2 * q_j) {
          LiftCentered(digit, n, q_i, q_j, out);
        } else if (q_i < (uint64_t{1} << 50)) {
          LiftCenteredReduce(digit, n, q_i, q_j, out);
        } else {
          const uint64_t q_i_mod_q = q.Reduce(q_i);
          for (size_t c = 0; c < n; ++c) {
            const uint64_t v = q.Reduce(digit[c]);
            const uint64_t t = v - (q_i_mod_q & (0 - uint64_t{digit[c] > half}));
            out[c] = t + (q_j & (0 - uint64_t{t > v}));  // t wrapped below 0
          }
        }
      }
      ctx.ntt(j).Forward(out);
    }
  }
}

double DigitMeanSquare(const BfvContext& ctx) {
  double sum = 0;
  for (size_t i = 0; i < ctx.q_size(); ++i) {
    sum += std::pow(static_cast<double>(ctx.modulus(i).value()), 2) / 12;
  }
  return sum;
}

double KeyErrorVariance(const BfvContext& ctx) {
  const double n = static_cast<double>(ctx.n());
  const double p = static_cast<double>(ctx.modulus(ctx.q_size()).value());
  return n * 10.5 * DigitMeanSquare(ctx) / (p * p);
}

double KeySwitchVariance(const BfvContext& ctx) {
  const double n = static_cast<double>(ctx.n());
  return KeyErrorVariance(ctx) + (1 + 2 * n / 3) / 12;
}

uint64_t* DecomposeToScratch(const BfvContext& ctx, const uint64_t* d, const uint64_t* d_ntt) {
  const size_t k = ctx.q_size();
  uint64_t* digits = GetScratch(Scratch::kDigits, k * (k + 1) * ctx.n());
  DecomposeForKeySwitch(ctx, d, d_ntt, digits);
  return digits;
}

namespace {

template <typename Word>
void InnerProduct(const BfvContext& ctx, const uint64_t* digits, const Word* key_b,
                  const Word* key_a, uint64_t* out0, uint64_t* out1) {
  const size_t n = ctx.n(), k = ctx.q_size(), rows = k + 1;
  std::vector<const uint64_t*> d(k);
  std::vector<const Word*> b(k), a(k);
  for (size_t j = 0; j < rows; ++j) {
    for (size_t i = 0; i < k; ++i) {
      const size_t row = (i * rows + j) * n;
      d[i] = digits + row;
      b[i] = key_b + row;
      a[i] = key_a + row;
    }
    PlainDotProduct(DotProductArgsOf<uint64_t, Word>{&ctx.modulus(j), k, n, d.data(), b.data(),
                                                     a.data(), out0 + j * n, out1 + j * n});
  }
}

}  // namespace

void KeySwitchInnerProduct(const BfvContext& ctx, const uint64_t* digits, const KeySwitchKey& key,
                           uint64_t* out0, uint64_t* out1) {
  if (!key.b32.empty()) {
    InnerProduct(ctx, digits, key.b32.data(), key.a32.data(), out0, out1);
  } else {
    InnerProduct(ctx, digits, key.b.data(), key.a.data(), out0, out1);
  }
}

void NarrowKeySwitchKey(const BfvContext& ctx, KeySwitchKey& key) {
  for (size_t j = 0; j <= ctx.q_size(); ++j) {
    if (!PlainDotProductUsesAvx2(ctx.modulus(j), ctx.q_size())) return;
  }
  key.b32.assign(key.b.begin(), key.b.end());  // residues below 2^32
  key.a32.assign(key.a.begin(), key.a.end());
}

void ModDown(const BfvContext& ctx, uint64_t* c, bool to_ntt, uint64_t* out) {
  const size_t n = ctx.n(), k = ctx.q_size();
  const Modulus& p = ctx.modulus(k);
  uint64_t* last = c + k * n;
  ctx.ntt(k).Inverse(last);
  const uint64_t half_p = p.value() / 2;
  uint64_t* r = GetScratch(Scratch::kModDown, n);
  for (size_t j = 0; j < k; ++j) {
    const Modulus& q = ctx.modulus(j);
    const uint64_t p_mod_q = ctx.key_switch().p_mod_q[j];
    // The centered residue r - P (r > P/2) taken mod q_j.
    if (p.value() <= q.value()) {
      LiftCentered(last, n, p.value(), q.value(), r);  // last[i] < P <= q_j: its own residue
    } else {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t v = q.Reduce(last[i]);
        r[i] = last[i] > half_p ? q.Sub(v, p_mod_q) : v;
      }
    }
    uint64_t* row = c + j * n;
    if (to_ntt) {
      ctx.ntt(j).Forward(r);
    } else {
      ctx.ntt(j).Inverse(row);
    }
    const uint64_t inv = ctx.key_switch().p_inv_mod_q[j];
    const uint64_t inv_shoup = ctx.key_switch().p_inv_mod_q_shoup[j];
    SubMulShoup(q, n, row, r, &inv, &inv_shoup, 0, out + j * n);
  }
}

void SwitchKey(const BfvContext& ctx, const uint64_t* d, const KeySwitchKey& key, uint64_t* ks0,
               uint64_t* ks1) {
  const size_t qp_words = (ctx.q_size() + 1) * ctx.n();
  const uint64_t* digits = DecomposeToScratch(ctx, d);
  uint64_t* acc0 = GetScratch(Scratch::kKeySwitch0, qp_words);
  uint64_t* acc1 = GetScratch(Scratch::kKeySwitch1, qp_words);
  KeySwitchInnerProduct(ctx, digits, key, acc0, acc1);
  ModDown(ctx, acc0, false, ks0);
  ModDown(ctx, acc1, false, ks1);
}

void RotateFromDigits(const BfvContext& ctx, const uint64_t* c0, const uint64_t* digits,
                      uint32_t galois, const KeySwitchKey& key, bool ntt, uint64_t* out0,
                      uint64_t* out1) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  uint64_t* acc0 = GetScratch(Scratch::kKeySwitch0, (k + 1) * n);
  uint64_t* acc1 = GetScratch(Scratch::kKeySwitch1, (k + 1) * n);
  KeySwitchInnerProduct(ctx, digits, key, acc0, acc1);
  uint64_t* d = GetScratch(Scratch::kRotate, 2 * words);
  ModDown(ctx, acc0, ntt, d);
  ModDown(ctx, acc1, ntt, d + words);
  AddRows(ctx.q_ntt(), d, c0, d);
  const std::vector<uint32_t>& perm = ctx.GaloisPermutation(galois);
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < k; ++j) {
      const uint64_t* in = d + h * words + j * n;
      uint64_t* out = (h == 0 ? out0 : out1) + j * n;
      if (ntt) {
        for (size_t c = 0; c < n; ++c) out[c] = in[perm[c]];
      } else {
        ApplyGaloisCoefficients(ctx.modulus(j), ctx.log_n(), galois, in, out);
      }
    }
  }
}

void RotateBeforeModDown(const BfvContext& ctx, const uint64_t* c0, const uint64_t* digits,
                         uint32_t galois, const KeySwitchKey& key, uint64_t* out0, uint64_t* out1) {
  const size_t n = ctx.n(), k = ctx.q_size();
  uint64_t* acc0 = GetScratch(Scratch::kKeySwitch0, (k + 1) * n);
  uint64_t* acc1 = GetScratch(Scratch::kKeySwitch1, (k + 1) * n);
  KeySwitchInnerProduct(ctx, digits, key, acc0, acc1);
  // P c0 over QP (its P row 0), which ModDown returns as c0 exactly: (x - 0) P mod q_j.
  uint64_t* scaled = GetScratch(Scratch::kModDown, 2 * n);
  uint64_t* zero = scaled + n;
  std::fill_n(zero, n, 0);
  for (size_t j = 0; j < k; ++j) {
    const Modulus& q = ctx.modulus(j);
    const uint64_t p = ctx.key_switch().p_mod_q[j], p_shoup = q.ShoupOf(p);
    SubMulShoup(q, n, c0 + j * n, zero, &p, &p_shoup, 0, scaled);
    AddRows(ctx.q_ntt().subspan(j, 1), acc0 + j * n, scaled, acc0 + j * n);
  }
  const std::vector<uint32_t>& perm = ctx.GaloisPermutation(galois);
  for (size_t j = 0; j <= k; ++j) {
    const uint64_t* in0 = acc0 + j * n;
    const uint64_t* in1 = acc1 + j * n;
    uint64_t* to0 = out0 + j * n;
    uint64_t* to1 = out1 + j * n;
    for (size_t c = 0; c < n; ++c) {
      to0[c] = in0[perm[c]];
      to1[c] = in1[perm[c]];
    }
  }
}

absl::StatusOr<const KeySwitchKey*> FindGaloisKey(const BfvContext& ctx, const GaloisKeys& gk,
                                                  uint32_t galois) {
  if (absl::Status s = ctx.CheckId(gk.params_id, "Galois keys"); !s.ok()) return s;
  auto it = gk.keys.find(galois);
  if (it == gk.keys.end()) {
    return absl::NotFoundError(absl::StrCat("no Galois key for element ", galois));
  }
  if (absl::Status s = CheckKeySwitchKey(ctx, it->second, "Galois key"); !s.ok()) return s;
  return &it->second;
}

}  // namespace internal

namespace {

absl::Status CheckSize2(const BfvContext& ctx, const Ciphertext& ct) {
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  if (ct.size != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("rotations take ciphertexts of size 2 (relinearise first), got ", ct.size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Ciphertext> Relinearize(const BfvContext& ctx, const Ciphertext& ct,
                                       const RelinKey& rk) {
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  if (absl::Status s = ctx.CheckId(rk.params_id, "relinearisation key"); !s.ok()) return s;
  if (absl::Status s = CheckKeySwitchKey(ctx, rk.key, "relinearisation key"); !s.ok()) return s;
  if (ct.size != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("relinearisation takes a ciphertext of size 3, got ", ct.size));
  }
  const size_t words = ctx.q_size() * ctx.n();
  Ciphertext out{ctx.id(), 2, std::vector<uint64_t>(ct.data.begin(), ct.data.begin() + 2 * words),
                 std::nullopt};
  uint64_t* ks0 = internal::GetScratch(internal::Scratch::kOut0, words);
  uint64_t* ks1 = internal::GetScratch(internal::Scratch::kOut1, words);
  internal::SwitchKey(ctx, ct.poly(2, words), rk.key, ks0, ks1);
  internal::AddRows(ctx.q_ntt(), out.poly(0, words), ks0, out.poly(0, words));
  internal::AddRows(ctx.q_ntt(), out.poly(1, words), ks1, out.poly(1, words));
  return out;
}

absl::StatusOr<Ciphertext> ApplyGalois(const BfvContext& ctx, const Ciphertext& ct, uint32_t galois,
                                       const GaloisKeys& gk) {
  if (absl::Status s = CheckSize2(ctx, ct); !s.ok()) return s;
  absl::StatusOr<const KeySwitchKey*> key = internal::FindGaloisKey(ctx, gk, galois);
  if (!key.ok()) return key.status();
  const size_t words = ctx.q_size() * ctx.n();
  const uint64_t* digits = internal::DecomposeToScratch(ctx, ct.poly(1, words));
  Ciphertext out{ctx.id(), 2, std::vector<uint64_t>(2 * words), std::nullopt};
  internal::RotateFromDigits(ctx, ct.poly(0, words), digits, galois, **key, false,
                             out.poly(0, words), out.poly(1, words));
  return out;
}

absl::StatusOr<Ciphertext> RotateRows(const BfvContext& ctx, const Ciphertext& ct, int step,
                                      const GaloisKeys& gk) {
  if (step == 0) {
    if (absl::Status s = CheckSize2(ctx, ct); !s.ok()) return s;
    return Ciphertext{ctx.id(), ct.size, ct.data, std::nullopt};
  }
  absl::StatusOr<uint32_t> galois = GaloisElementForStep(ctx.log_n(), step);
  if (!galois.ok()) return galois.status();
  return ApplyGalois(ctx, ct, *galois, gk);
}

absl::StatusOr<Ciphertext> RotateColumns(const BfvContext& ctx, const Ciphertext& ct,
                                         const GaloisKeys& gk) {
  return ApplyGalois(ctx, ct, static_cast<uint32_t>(2 * ctx.n() - 1), gk);
}

absl::StatusOr<std::vector<Ciphertext>> RotateRowsHoisted(const BfvContext& ctx,
                                                          const Ciphertext& ct,
                                                          const std::vector<int>& steps,
                                                          const GaloisKeys& gk) {
  if (absl::Status s = CheckSize2(ctx, ct); !s.ok()) return s;
  std::vector<std::pair<uint32_t, const KeySwitchKey*>> plan;
  for (int step : steps) {
    if (step == 0) {
      plan.emplace_back(1, nullptr);
      continue;
    }
    absl::StatusOr<uint32_t> galois = GaloisElementForStep(ctx.log_n(), step);
    if (!galois.ok()) return galois.status();
    absl::StatusOr<const KeySwitchKey*> key = internal::FindGaloisKey(ctx, gk, *galois);
    if (!key.ok()) return key.status();
    plan.emplace_back(*galois, *key);
  }
  const size_t words = ctx.q_size() * ctx.n();
  const uint64_t* digits = internal::DecomposeToScratch(ctx, ct.poly(1, words));
  std::vector<Ciphertext> out;
  out.reserve(plan.size());
  for (const auto& [galois, key] : plan) {
    if (!key) {
      out.push_back(Ciphertext{ctx.id(), 2, ct.data, std::nullopt});
      continue;
    }
    out.push_back(Ciphertext{ctx.id(), 2, std::vector<uint64_t>(2 * words), std::nullopt});
    internal::RotateFromDigits(ctx, ct.poly(0, words), digits, galois, *key, false,
                               out.back().poly(0, words), out.back().poly(1, words));
  }
  return out;
}

}  // namespace veil::he
