#include "pir/lattice/rlwe.h"

#include <sodium.h>

#include <cmath>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/modarith.h"
#include "pir/he/poly.h"
#include "pir/he/sampling.h"
#include "pir/he/scratch.h"

namespace veil::lattice {
namespace {

using he::uint128_t;

// log2 Q allowed for 128-bit classical security with a ternary secret (HomomorphicEncryption.org
// standard, Table 1), for log N = 10 .. 15.
constexpr int kStandardLogQ[] = {27, 54, 109, 218, 438, 881};

// floor(2^128 / q) for q >= 3, as (hi, lo).
std::pair<uint64_t, uint64_t> Ratio128(uint64_t q) {
  // 2^128 / q = (2^128 - 1) / q unless q divides 2^128, which an odd q > 1 does not.
  const uint128_t all = ~uint128_t{0};
  const uint128_t r = all / q;
  return {static_cast<uint64_t>(r >> 64), static_cast<uint64_t>(r)};
}

// floor(y floor(2^128 / q) / 2^64) mod 2^64 = 2^64 frac(y / q) to within one unit, for y < q.
inline uint64_t FractionTerm(uint64_t y, uint64_t ratio_hi, uint64_t ratio_lo) {
  return y * ratio_hi + static_cast<uint64_t>((static_cast<uint128_t>(y) * ratio_lo) >> 64);
}

// round(target f / 2^64) mod target, for a fraction f of 2^64 and target <= 2^32. Branch-free:
// the value is secret-dependent.
inline uint32_t ScaleFraction(uint64_t f, uint64_t target) {
  const uint64_t r =
      static_cast<uint64_t>((static_cast<uint128_t>(f) * target + (uint128_t{1} << 63)) >> 64);
  // r <= target; r == target wraps to 0.
  return static_cast<uint32_t>(r - (target & (0 - static_cast<uint64_t>(r == target))));
}

absl::Status CheckSize(const RingContext& ctx, size_t c0, size_t c1, size_t per_half,
                       const char* what) {
  if (c0 != per_half || c1 != per_half) {
    return absl::InvalidArgumentError(absl::StrCat(what, " halves hold ", c0, " and ", c1,
                                                   " residues, expected ", per_half,
                                                   " (N = ", ctx.n(), ", ", ctx.k(), " primes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RingParams> RingParams::Create(int log_n, std::vector<uint64_t> primes,
                                              uint64_t special) {
  if (log_n < 10 || log_n > 16) {
    return absl::InvalidArgumentError(absl::StrCat("log N must be in [10, 16], got ", log_n));
  }
  if (primes.empty() || primes.size() > he::kMaxRnsPrimes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Q needs 1 to ", he::kMaxRnsPrimes, " primes, got ", primes.size()));
  }
  const uint64_t two_n = uint64_t{2} << log_n;
  for (size_t i = 0; i < primes.size(); ++i) {
    const uint64_t q = primes[i];
    if (q >= (uint64_t{1} << 32) || !he::IsPrime(q) || q % two_n != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("modulus ", q, " is not a prime = 1 mod ", two_n, " below 2^32"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (primes[j] == q) return absl::InvalidArgumentError(absl::StrCat("prime ", q, " twice"));
    }
  }
  if (special != 0) {
    if (special >= (uint64_t{1} << 32) || !he::IsPrime(special) || special % two_n != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "special prime ", special, " is not a prime = 1 mod ", two_n, " below 2^32"));
    }
    for (uint64_t q : primes) {
      if (q == special) {
        return absl::InvalidArgumentError(
            absl::StrCat("the special prime ", special, " is also a prime of Q"));
      }
    }
  }
  RingParams p;
  p.log_n = log_n;
  p.primes = std::move(primes);
  p.special = special;
  return p;
}

RingParams RingParams::Default() { return *Create(12, {536813569, 536690689, 536641537}, 4169729); }

std::string RingParams::SecuritySource() const {
  double log_q = 0;
  for (uint64_t q : primes) log_q += std::log2(static_cast<double>(q));
  if (special != 0) log_q += std::log2(static_cast<double>(special));
  const char* name = special != 0 ? "QP" : "Q";
  const int bound = log_n <= 15 ? kStandardLogQ[log_n - 10] : 0;
  if (log_q <= bound) {
    return absl::StrCat("HomomorphicEncryption.org standard, Table 1: 128-bit classical security ",
                        "for N = 2^", log_n, " with log2 Q <= ", bound,
                        " (ternary secret, sigma 3.2); here log2 ", name, " = ",
                        std::floor(log_q * 100) / 100);
  }
  return absl::StrCat("no security claim: log2 ", name, " = ", std::ceil(log_q * 100) / 100,
                      " exceeds the standard's ", bound, " for N = 2^", log_n);
}

struct RingContext::Monomials {
  std::once_flag once;
  std::vector<std::vector<uint64_t>> inverse;
};

const std::vector<std::vector<uint64_t>>& RingContext::inverse_monomials() const {
  std::call_once(monomials_->once, [this] {
    const size_t n = this->n(), words = k() * n;
    std::vector<std::vector<uint64_t>>& out = monomials_->inverse;
    out.resize(params_.log_n);
    for (int l = 0; l < params_.log_n; ++l) {
      std::vector<uint64_t>& m = out[l];
      m.assign(2 * words, 0);
      for (size_t i = 0; i < k(); ++i) m[i * n + n - (size_t{1} << l)] = base_[i].value() - 1;
      he::internal::ForwardNtt(ntt_, m.data());
      for (size_t r = 0; r < words; ++r) m[words + r] = base_[r / n].ShoupOf(m[r]);
    }
  });
  return monomials_->inverse;
}

absl::StatusOr<RingContext> RingContext::Create(const RingParams& params) {
  absl::StatusOr<RingParams> checked =
      RingParams::Create(params.log_n, params.primes, params.special);
  if (!checked.ok()) return checked.status();
  RingContext ctx;
  ctx.params_ = *std::move(checked);
  ctx.monomials_ = std::make_shared<Monomials>();
  absl::StatusOr<he::RnsBase> base = he::RnsBase::Create(ctx.params_.primes);
  if (!base.ok()) return base.status();
  ctx.base_ = *std::move(base);
  const uint64_t q_lo = ctx.base_.product()[0] & 0xffffffffu;
  ctx.q_mod_word_ = q_lo;
  for (size_t i = 0; i < ctx.k(); ++i) {
    const he::Modulus& q = ctx.base_[i];
    absl::StatusOr<he::NttTables> tables = he::NttTables::Create(ctx.params_.log_n, q);
    if (!tables.ok()) return tables.status();
    ctx.ntt_.push_back(*std::move(tables));
    // floor(Q / 2^32) = (Q - (Q mod 2^32)) / 2^32 and Q = 0 mod q_i.
    const uint64_t inv_word = *q.Inverse(q.Reduce(uint64_t{1} << 32));
    ctx.q_div_word_.push_back(q.Mul(q.Neg(q.Reduce(q_lo)), inv_word));
    const auto [hi, lo] = Ratio128(q.value());
    ctx.ratio_hi_.push_back(hi);
    ctx.ratio_lo_.push_back(lo);
  }
  std::tie(ctx.response_ratio_hi_, ctx.response_ratio_lo_) =
      Ratio128(ctx.response_modulus().value());
  if (ctx.params_.special != 0) {
    // BFV needs a plaintext modulus; key switching never reads it.
    std::vector<uint64_t> taken = ctx.params_.primes;
    taken.push_back(ctx.params_.special);
    const absl::StatusOr<std::vector<uint64_t>> t =
        he::GenerateNttPrimes(ctx.params_.log_n + 6, 2 * ctx.n(), 1, taken);
    if (!t.ok()) return t.status();
    absl::StatusOr<he::BfvParams> bfv =
        he::BfvParams::Create(ctx.params_.log_n, ctx.params_.primes, ctx.params_.special, (*t)[0]);
    if (!bfv.ok()) return bfv.status();
    absl::StatusOr<std::shared_ptr<const he::BfvContext>> expansion = he::BfvContext::Create(*bfv);
    if (!expansion.ok()) return expansion.status();
    ctx.expansion_ = *std::move(expansion);
  }
  return ctx;
}

uint64_t RingContext::EncodeWord(uint32_t m, size_t i) const {
  // round(Q m / 2^32) = floor(Q / 2^32) m + floor(((Q mod 2^32) m + 2^31) / 2^32), as BFV's
  // encoding with t = 2^32 (both products fit: (2^32 - 1)^2 + 2^31 < 2^64).
  const he::Modulus& q = base_[i];
  const uint64_t carry = (q_mod_word_ * m + (uint64_t{1} << 31)) >> 32;
  return q.Reduce(static_cast<uint128_t>(q_div_word_[i]) * m + carry);
}

uint64_t RingContext::Fraction(const uint64_t* residues) const {
  uint64_t f = 0;
  for (size_t i = 0; i < k(); ++i) {
    const he::Modulus& q = base_[i];
    const uint64_t y = he::MulShoup(residues[i * n()], base_.punctured_inverse(i),
                                    base_.punctured_inverse_shoup(i), q.value());
    f += FractionTerm(y, ratio_hi_[i], ratio_lo_[i]);
  }
  return f;
}

uint32_t RingContext::DecodeWord(const uint64_t* residues) const {
  return ScaleFraction(Fraction(residues), uint64_t{1} << 32);
}

uint32_t RingContext::SwitchResidue(const uint64_t* residues) const {
  return ScaleFraction(Fraction(residues), response_modulus().value());
}

uint32_t RingContext::DecodeSwitchedWord(uint64_t x) const {
  return ScaleFraction(FractionTerm(x, response_ratio_hi_, response_ratio_lo_), uint64_t{1} << 32);
}

RlweSecret RlweSecret::FromKey(const RingContext& ctx, const he::SecretKey& key) {
  const size_t words = ctx.k() * ctx.n();
  return RlweSecret(std::vector<uint64_t>(key.ntt.begin(), key.ntt.begin() + words));
}

RlweSecret RlweSecret::Generate(const RingContext& ctx) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  std::vector<uint64_t> z(ctx.k() * ctx.n());
  he::SampleTernary(ctx.base().moduli(), ctx.n(), z.data());
  he::internal::ForwardNtt(ctx.ntt(), z.data());
  return RlweSecret(std::move(z));
}

void RlweSecret::Wipe() {
  if (!ntt_.empty()) sodium_memzero(ntt_.data(), ntt_.size() * sizeof(uint64_t));
}

RlweSecret::~RlweSecret() { Wipe(); }

RlweSecret& RlweSecret::operator=(RlweSecret&& other) noexcept {
  if (this != &other) {
    Wipe();
    ntt_ = std::move(other.ntt_);
  }
  return *this;
}

void EncryptWithMask(const RingContext& ctx, const RlweSecret& secret, const uint64_t* message,
                     const uint64_t* a, uint64_t* c0) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const absl::Span<const he::NttTables> rows = ctx.ntt();
  he::SampleError(ctx.base().moduli(), ctx.n(), c0);
  he::internal::ForwardNtt(rows, c0);
  he::internal::AddRows(rows, c0, message, c0);
  std::vector<uint64_t> az(ctx.k() * ctx.n());
  he::internal::MultiplyRows(rows, a, secret.ntt().data(), az.data());
  he::internal::SubRows(rows, c0, az.data(), c0);
  sodium_memzero(az.data(), az.size() * sizeof(uint64_t));
}

absl::StatusOr<RlweCiphertext> EncryptWords(const RingContext& ctx, const RlweSecret& secret,
                                            absl::Span<const uint32_t> words) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t n = ctx.n();
  if (words.size() > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("an RLWE ciphertext holds at most N = ", n, " words, got ", words.size()));
  }
  std::vector<uint64_t> message(ctx.k() * n, 0);
  for (size_t i = 0; i < ctx.k(); ++i) {
    for (size_t c = 0; c < words.size(); ++c) message[i * n + c] = ctx.EncodeWord(words[c], i);
  }
  he::internal::ForwardNtt(ctx.ntt(), message.data());
  RlweCiphertext ct;
  ct.c1.resize(ctx.k() * n);
  ct.c0.resize(ctx.k() * n);
  he::ExpandUniform(he::RandomSeed(), 0, ctx.base().moduli(), n, ct.c1.data());
  EncryptWithMask(ctx, secret, message.data(), ct.c1.data(), ct.c0.data());
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  return ct;
}

absl::StatusOr<std::vector<uint32_t>> DecryptWords(const RingContext& ctx, const RlweSecret& secret,
                                                   const RlweCiphertext& ct) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t n = ctx.n();
  if (absl::Status s = CheckSize(ctx, ct.c0.size(), ct.c1.size(), ctx.k() * n, "ciphertext");
      !s.ok()) {
    return s;
  }
  const absl::Span<const he::NttTables> rows = ctx.ntt();
  std::vector<uint64_t> phase(ctx.k() * n);
  he::internal::MultiplyRows(rows, ct.c1.data(), secret.ntt().data(), phase.data());
  he::internal::AddRows(rows, phase.data(), ct.c0.data(), phase.data());
  he::internal::InverseNtt(rows, phase.data());
  std::vector<uint32_t> words(n);
  for (size_t c = 0; c < n; ++c) words[c] = ctx.DecodeWord(phase.data() + c);
  sodium_memzero(phase.data(), phase.size() * sizeof(uint64_t));
  return words;
}

absl::StatusOr<SwitchedCiphertext> ModSwitch(const RingContext& ctx, const RlweCiphertext& ct) {
  const size_t n = ctx.n();
  if (absl::Status s = CheckSize(ctx, ct.c0.size(), ct.c1.size(), ctx.k() * n, "ciphertext");
      !s.ok()) {
    return s;
  }
  SwitchedCiphertext out;
  std::vector<uint64_t> coeffs(ctx.k() * n);
  for (int half = 0; half < 2; ++half) {
    const std::vector<uint64_t>& in = half == 0 ? ct.c0 : ct.c1;
    std::vector<uint32_t>& switched = half == 0 ? out.c0 : out.c1;
    coeffs = in;
    he::internal::InverseNtt(ctx.ntt(), coeffs.data());
    switched.resize(n);
    for (size_t c = 0; c < n; ++c) switched[c] = ctx.SwitchResidue(coeffs.data() + c);
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> DecryptSwitched(const RingContext& ctx,
                                                      const RlweSecret& secret,
                                                      const SwitchedCiphertext& ct) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t n = ctx.n();
  if (absl::Status s = CheckSize(ctx, ct.c0.size(), ct.c1.size(), n, "switched ciphertext");
      !s.ok()) {
    return s;
  }
  // The response prime is row 0 of Q: its NTT tables and z's row 0 serve.
  const absl::Span<const he::NttTables> row = ctx.ntt().first(1);
  std::vector<uint64_t> phase(ct.c1.begin(), ct.c1.end());
  he::internal::ForwardNtt(row, phase.data());
  he::internal::MultiplyRows(row, phase.data(), secret.ntt().data(), phase.data());
  he::internal::InverseNtt(row, phase.data());
  const uint64_t q = ctx.response_modulus().value();
  std::vector<uint32_t> words(n);
  for (size_t c = 0; c < n; ++c) {
    words[c] = ctx.DecodeSwitchedWord(he::AddMod(phase[c], ct.c0[c], q));
  }
  sodium_memzero(phase.data(), phase.size() * sizeof(uint64_t));
  return words;
}

uint64_t SwitchedBytes(const RingContext& ctx) { return 8 * uint64_t{ctx.n()}; }

std::vector<uint8_t> SerializeSwitched(const SwitchedCiphertext& ct) {
  std::vector<uint8_t> bytes(4 * (ct.c0.size() + ct.c1.size()));
  // Little-endian words (embedding/table.h asserts a little-endian host).
  std::memcpy(bytes.data(), ct.c0.data(), 4 * ct.c0.size());
  std::memcpy(bytes.data() + 4 * ct.c0.size(), ct.c1.data(), 4 * ct.c1.size());
  return bytes;
}

absl::StatusOr<SwitchedCiphertext> ParseSwitched(const RingContext& ctx,
                                                 absl::Span<const uint8_t> bytes) {
  if (bytes.size() != SwitchedBytes(ctx)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a packed response is ", SwitchedBytes(ctx), " bytes, got ", bytes.size()));
  }
  const size_t n = ctx.n();
  SwitchedCiphertext ct;
  ct.c0.resize(n);
  ct.c1.resize(n);
  std::memcpy(ct.c0.data(), bytes.data(), 4 * n);
  std::memcpy(ct.c1.data(), bytes.data() + 4 * n, 4 * n);
  const uint64_t q = ctx.response_modulus().value();
  for (size_t c = 0; c < n; ++c) {
    if (ct.c0[c] >= q || ct.c1[c] >= q) {
      return absl::InvalidArgumentError(
          absl::StrCat("packed response residue ", c, " is not below ", q));
    }
  }
  return ct;
}

}  // namespace veil::lattice
