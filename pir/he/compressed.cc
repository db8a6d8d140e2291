#include "pir/he/compressed.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "pir/he/modarith_hd.h"
#include "pir/he/poly.h"
#include "pir/he/rns.h"
#include "pir/he/scratch.h"

namespace veil::he {

namespace {

uint128_t Mask(int bits) { return (uint128_t{1} << bits) - 1; }

// The low 128 bits of a multi-word integer.
uint128_t Low128(absl::Span<const uint64_t> words) {
  return words.size() > 1 ? (uint128_t{words[1]} << 64) | words[0] : uint128_t{words[0]};
}

int BitLength128(uint128_t x) {
  const uint64_t hi = static_cast<uint64_t>(x >> 64), lo = static_cast<uint64_t>(x);
  return hi != 0 ? 128 - __builtin_clzll(hi) : lo != 0 ? 64 - __builtin_clzll(lo) : 0;
}

// round(2^b c / Q) mod 2^b for each coefficient c of one polynomial (k rows of N residues).
std::vector<uint128_t> Round(const BfvContext& ctx, const uint64_t* poly, int b) {
  const RnsBase& base = ctx.q_base();
  const size_t n = ctx.n(), k = base.size();
  // 2^b / q_j = whole_j + rest_j / q_j.
  std::vector<uint128_t> whole(k);
  std::vector<uint64_t> rest(k);
  std::vector<double> inverse(k);
  for (size_t j = 0; j < k; ++j) {
    const uint64_t q = base[j].value();
    whole[j] = (uint128_t{1} << b) / q;
    rest[j] = static_cast<uint64_t>((uint128_t{1} << b) % q);
    inverse[j] = 1.0 / static_cast<double>(q);
  }
  std::vector<uint128_t> out(n);
  for (size_t c = 0; c < n; ++c) {
    uint128_t sum = 0;  // mod 2^128, then mod 2^b
    double fraction = 0;
    for (size_t j = 0; j < k; ++j) {
      const uint64_t q = base[j].value();
      const uint64_t y =
          MulShoup(poly[j * n + c], base.punctured_inverse(j), base.punctured_inverse_shoup(j), q);
      // y 2^b / q_j = y whole_j + (y rest_j) / q_j, the latter below 2^124.
      const uint128_t y_rest = static_cast<uint128_t>(y) * rest[j];
      sum += y * whole[j] + y_rest / q;
      fraction += static_cast<double>(static_cast<uint64_t>(y_rest % q)) * inverse[j];
    }
    sum += static_cast<uint128_t>(std::floor(fraction + 0.5));
    out[c] = sum & Mask(b);
  }
  return out;
}

// Widths in [1, kMaxCompressionBits]; `what` names them in the error.
absl::Status CheckBits(CompressionBits b, const char* what) {
  if (b.c0 < 1 || b.c1 < 1 || b.c0 > kMaxCompressionBits || b.c1 > kMaxCompressionBits) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", b.c0, " and ", b.c1,
                                                   " are outside [1, ", kMaxCompressionBits, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCompressedCiphertext(const BfvContext& ctx, const CompressedCiphertext& ct) {
  if (absl::Status s = ctx.CheckId(ct.params_id, "compressed ciphertext"); !s.ok()) return s;
  const CompressionBits& b = ct.bits;
  if (absl::Status s = CheckBits(b, "compressed ciphertext bits"); !s.ok()) return s;
  if (ct.c0.size() != ctx.n() || ct.c1.size() != ctx.n()) {
    return absl::InvalidArgumentError(absl::StrCat("compressed ciphertext has ", ct.c0.size(),
                                                   " and ", ct.c1.size(), " coefficients, not ",
                                                   ctx.n()));
  }
  for (size_t c = 0; c < ctx.n(); ++c) {
    if ((ct.c0[c] >> b.c0) != 0 || (ct.c1[c] >> b.c1) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressed ciphertext coefficient ", c, " is out of range"));
    }
  }
  return absl::OkStatus();
}

CompressionBits DefaultCompressionBits(const BfvContext& ctx) {
  const int t_bits = ctx.plain_modulus().bits();
  return {t_bits + 5, t_bits + ctx.log_n() + 5};
}

absl::StatusOr<CompressedCiphertext> Compress(const BfvContext& ctx, const Ciphertext& ct,
                                              CompressionBits bits) {
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  if (ct.size != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("only size-2 ciphertexts are compressed, not size ", ct.size));
  }
  if (absl::Status s = CheckBits(bits, "compression bits"); !s.ok()) return s;
  const size_t words = ctx.q_size() * ctx.n();
  return CompressedCiphertext{ctx.id(), bits, Round(ctx, ct.poly(0, words), bits.c0),
                              Round(ctx, ct.poly(1, words), bits.c1)};
}

absl::StatusOr<CompressedDecryption> DecryptCompressed(const BfvContext& ctx, const SecretKey& sk,
                                                       const CompressedCiphertext& ct) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  if (absl::Status s = CheckCompressedCiphertext(ctx, ct); !s.ok()) return s;
  const size_t n = ctx.n();
  const int b0 = ct.bits.c0, b1 = ct.bits.c1, b = std::max(b0, b1);  // the phase mod 2^b
  // c_1' s has |coefficients| <= 2^(b1 - 1) N: the first primes of QP whose product has
  // b1 + log2 N + 2 bits hold it exactly (centred, with room to spare).
  const int needed_bits = b1 + ctx.log_n() + 2;
  std::vector<uint64_t> primes;
  absl::StatusOr<RnsBase> base;
  do {
    primes.push_back(ctx.modulus(primes.size()).value());
    base = RnsBase::Create(primes);
    if (!base.ok()) return base.status();
  } while (base->product_bits() < needed_bits && primes.size() <= ctx.q_size());
  if (base->product_bits() < needed_bits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "c_1 at ", b1, " bits is too wide for these parameters' primes to multiply exactly"));
  }
  const size_t r = primes.size();
  const absl::Span<const NttTables> rows = ctx.qp_ntt().first(r);

  // c_1' centred, in the r rows, times s.
  std::vector<uint64_t> p(r * n);
  const uint128_t half = uint128_t{1} << (b1 - 1);
  for (size_t c = 0; c < n; ++c) {
    const bool negative = ct.c1[c] >= half;
    const uint128_t magnitude = negative ? (uint128_t{1} << b1) - ct.c1[c] : ct.c1[c];
    for (size_t i = 0; i < r; ++i) {
      const uint64_t residue = (*base)[i].Reduce(magnitude);
      p[i * n + c] = negative ? (*base)[i].Neg(residue) : residue;
    }
  }
  internal::ForwardNtt(rows, p.data());
  internal::MultiplyRows(rows, p.data(), sk.ntt.data(), p.data());
  internal::InverseNtt(rows, p.data());

  // The centred product composed mod 2^128: the phase v = c_0' 2^(b - b0) + c_1' s 2^(b - b1)
  // mod 2^b; then m = round(t v / 2^b) mod t, with t v held as hi 2^64 + lo64 (below 2^182).
  std::vector<uint128_t> punctured(r);
  std::vector<double> inverse(r);
  for (size_t i = 0; i < r; ++i) {
    punctured[i] = Low128(base->punctured_product(i));
    inverse[i] = 1.0 / static_cast<double>(primes[i]);
  }
  const uint128_t product = Low128(base->product());
  const uint64_t t = ctx.params().t;
  CompressedDecryption out{Plaintext{ctx.id(), std::vector<uint64_t>(n)}, 0};
  uint128_t max_noise = 0;
  for (size_t c = 0; c < n; ++c) {
    uint128_t x = 0;
    double overflow = 0;
    for (size_t i = 0; i < r; ++i) {
      const uint64_t y = MulShoup(p[i * n + c], base->punctured_inverse(i),
                                  base->punctured_inverse_shoup(i), primes[i]);
      x += y * punctured[i];
      overflow += static_cast<double>(y) * inverse[i];
    }
    // The product lies far inside (-Q_r/2, Q_r/2): rounding the overflow count centres it.
    x -= static_cast<uint128_t>(std::floor(overflow + 0.5)) * product;
    const uint128_t v = ((x << (b - b1)) + (ct.c0[c] << (b - b0))) & Mask(b);
    const uint128_t lo = static_cast<uint128_t>(t) * static_cast<uint64_t>(v);
    const uint128_t hi = static_cast<uint128_t>(t) * static_cast<uint64_t>(v >> 64) + (lo >> 64);
    const uint128_t low_bits = ((hi << 64) | static_cast<uint64_t>(lo)) & Mask(b);  // [t v]
    // round(t v / 2^b) = floor(t v / 2^b) + up, without branches on the secret phase.
    const uint64_t up = static_cast<uint64_t>(low_bits >> (b - 1));
    const uint128_t floor =
        b >= 64 ? hi >> (b - 64) : ((hi << 64) | static_cast<uint64_t>(lo)) >> b;
    const uint64_t m = static_cast<uint64_t>(floor) + up;  // <= t
    out.m.coeffs[c] = m - (t & (0 - static_cast<uint64_t>(m >= t)));
    const uint128_t up_mask = 0 - static_cast<uint128_t>(up);
    const uint128_t noise = (((uint128_t{1} << b) - low_bits) & up_mask) | (low_bits & ~up_mask);
    max_noise = std::max(max_noise, noise);
  }
  sodium_memzero(p.data(), p.size() * sizeof(uint64_t));
  out.noise_budget = std::max(0, b - BitLength128(max_noise) - 1);
  return out;
}

}  // namespace veil::he
