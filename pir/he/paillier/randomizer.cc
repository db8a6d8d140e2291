#include "pir/he/paillier/randomizer.h"

#include <sodium.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

// The digits of a little-endian bit string: digit i holds bits [w i, w i + w).
void Digits(const uint8_t* bits, size_t nbits, int w, uint32_t* digits, int windows) {
  for (int i = 0; i < windows; ++i) {
    uint32_t d = 0;
    for (int b = 0; b < w; ++b) {
      const size_t at = static_cast<size_t>(i) * w + b;
      if (at < nbits) d |= ((bits[at / 8] >> (at % 8)) & 1u) << b;
    }
    digits[i] = d;
  }
}

}  // namespace

absl::Status TextbookRandomizer::Next(Mpz& rn) {
  SecretMpz r;
  do {
    r = RandomBelow(key_.n());
  } while (mpz_sgn(r.get()) == 0);
  // The exponent n is public: GMP's ordinary powm is fine for a secret base.
  mpz_powm(rn.get(), r.get(), key_.n().get(), key_.n_squared().get());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RandomnessPool>> RandomnessPool::Create(const PublicKey& key,
                                                                       size_t size, int threads) {
  if (threads < 1) return absl::InvalidArgumentError("randomness pool: threads must be >= 1");
  std::vector<SecretMpz> values(size);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      TextbookRandomizer fresh(key);
      for (size_t i = t; i < size; i += threads) fresh.Next(values[i]).IgnoreError();
    });
  }
  for (std::thread& w : workers) w.join();
  return std::unique_ptr<RandomnessPool>(new RandomnessPool(std::move(values)));
}

absl::Status RandomnessPool::Next(Mpz& rn) {
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= values_.size()) {
    next_.store(values_.size(), std::memory_order_relaxed);
    return absl::ResourceExhaustedError(
        absl::StrCat("randomness pool of ", values_.size(), " values is used up"));
  }
  mpz_set(rn.get(), values_[i].get());
  Wipe(values_[i].get());
  return absl::OkStatus();
}

size_t RandomnessPool::remaining() const {
  const size_t used = next_.load(std::memory_order_relaxed);
  return used >= values_.size() ? 0 : values_.size() - used;
}

absl::StatusOr<std::unique_ptr<FixedBaseRandomizer>> FixedBaseRandomizer::Create(
    const PublicKey& key, const FixedBaseOptions& options) {
  if (options.window_bits < 1 || options.window_bits > 8) {
    return absl::InvalidArgumentError("fixed-base randomizer: window_bits must be in 1..8");
  }
  if (options.exponent_bits < 128 || options.exponent_bits > 4096) {
    return absl::InvalidArgumentError("fixed-base randomizer: exponent_bits must be in 128..4096");
  }
  std::unique_ptr<FixedBaseRandomizer> r(new FixedBaseRandomizer(key, options));
  // h = -x^2 mod n generates (for almost every x) the cyclic subgroup of squares times -1
  // that DJN use (Section 4.2); it is public.
  SecretMpz x = RandomBelow(key.n());
  Mpz h;
  mpz_mul(h.get(), x.get(), x.get());
  mpz_mod(h.get(), h.get(), key.n().get());
  mpz_sub(h.get(), key.n().get(), h.get());
  mpz_powm(r->base_.get(), h.get(), key.n().get(), key.n_squared().get());
  r->FillTable();
  return r;
}

void FixedBaseRandomizer::FillTable() {
  const int w = options_.window_bits;
  const size_t digits = size_t{1} << w;
  limbs_ = mpz_size(key_.n_squared().get());
  windows_ = (options_.exponent_bits + w - 1) / w;
  table_.assign(static_cast<size_t>(windows_) * digits * limbs_, 0);
  Mpz power = base_;  // base^(2^(w i)) for the current window i
  Mpz entry, scratch;
  for (int i = 0; i < windows_; ++i) {
    mpz_set_ui(entry.get(), 1);
    mp_limb_t* row = &table_[static_cast<size_t>(i) * digits * limbs_];
    for (size_t d = 0; d < digits; ++d) {
      ToLimbs(entry, row + d * limbs_, limbs_);
      MulModInto(key_, entry, power, scratch);
    }
    power = entry;  // base^(2^(w i) * 2^w)
  }
}

void FixedBaseRandomizer::Power(const Mpz& alpha, Mpz& out) const {
  std::vector<uint8_t> bits((options_.exponent_bits + 7) / 8, 0);
  SecretMpz low;
  mpz_fdiv_r_2exp(low.get(), alpha.get(), options_.exponent_bits);
  size_t written = 0;
  mpz_export(bits.data(), &written, -1, 1, 0, 0, low.get());
  PowerOfBits(bits.data(), out);
  sodium_memzero(bits.data(), bits.size());
}

void FixedBaseRandomizer::PowerOfBits(const uint8_t* bits, Mpz& out) const {
  std::vector<uint32_t> digits(windows_);
  Digits(bits, options_.exponent_bits, options_.window_bits, digits.data(), windows_);
  // Fixed-size, side-channel silent arithmetic: the table entry of each secret digit is read
  // with mpn_sec_tabselect, and the products are SecureModMul's.
  const size_t digit_count = size_t{1} << options_.window_bits;
  SecureModMul mul(key_.n_squared());
  std::vector<mp_limb_t> acc(limbs_), sel(limbs_);
  mpn_sec_tabselect(acc.data(), table_.data(), limbs_, digit_count, digits[0]);
  for (int i = 1; i < windows_; ++i) {
    mpn_sec_tabselect(sel.data(), &table_[static_cast<size_t>(i) * digit_count * limbs_], limbs_,
                      digit_count, digits[i]);
    mul.Mul(acc.data(), sel.data(), acc.data());
  }
  FromLimbs(acc.data(), limbs_, out);
  sodium_memzero(acc.data(), acc.size() * sizeof(mp_limb_t));
  sodium_memzero(sel.data(), sel.size() * sizeof(mp_limb_t));
  sodium_memzero(digits.data(), digits.size() * sizeof(uint32_t));
}

absl::Status FixedBaseRandomizer::Next(Mpz& rn) {
  std::vector<uint8_t> bits((options_.exponent_bits + 7) / 8);
  randombytes_buf(bits.data(), bits.size());
  PowerOfBits(bits.data(), rn);
  sodium_memzero(bits.data(), bits.size());
  return absl::OkStatus();
}

}  // namespace veil::he
