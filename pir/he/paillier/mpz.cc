#include "pir/he/paillier/mpz.h"

#include <sodium.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"

namespace veil::he {

std::string Mpz::ToHex() const {
  std::string hex(mpz_sizeinbase(v_, 16) + 2, '\0');
  mpz_get_str(hex.data(), 16, v_);
  hex.resize(std::char_traits<char>::length(hex.c_str()));
  return hex;
}

absl::StatusOr<Mpz> Mpz::FromHex(std::string_view hex) {
  if (hex.empty()) return absl::InvalidArgumentError("empty hex integer");
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError("hex integer has a character that is not a hex digit");
    }
  }
  Mpz x;
  mpz_set_str(x.get(), std::string(hex).c_str(), 16);
  return x;
}

void Wipe(mpz_ptr x) {
  // _mp_alloc limbs are what GMP owns (mpz_init may point at a shared dummy limb: alloc 0).
  if (x->_mp_alloc > 0) {
    sodium_memzero(x->_mp_d, static_cast<size_t>(x->_mp_alloc) * sizeof(mp_limb_t));
  }
  x->_mp_size = 0;
}

bool ToFixedBytes(const Mpz& x, absl::Span<uint8_t> out) {
  if (mpz_sgn(x.get()) < 0) return false;
  const size_t bytes = (x.bits() + 7) / 8;
  if (bytes > out.size()) return false;
  std::fill(out.begin(), out.end(), uint8_t{0});
  if (bytes > 0) {
    size_t written = 0;
    mpz_export(out.data() + (out.size() - bytes), &written, 1, 1, 1, 0, x.get());
  }
  return true;
}

Mpz FromBytes(absl::Span<const uint8_t> bytes) {
  Mpz x;
  if (!bytes.empty()) mpz_import(x.get(), bytes.size(), 1, 1, 1, 0, bytes.data());
  return x;
}

void ToLimbs(const Mpz& x, mp_limb_t* out, size_t limbs) {
  const size_t size = mpz_size(x.get());
  const mp_limb_t* in = mpz_limbs_read(x.get());
  for (size_t i = 0; i < limbs; ++i) out[i] = i < size ? in[i] : 0;
}

void FromLimbs(const mp_limb_t* limbs, size_t count, Mpz& x) {
  mp_limb_t* dst = mpz_limbs_write(x.get(), count);
  std::copy(limbs, limbs + count, dst);
  mpz_limbs_finish(x.get(), count);
}

SecureModMul::SecureModMul(const Mpz& modulus)
    : modulus_(mpz_limbs_read(modulus.get())),
      limbs_(mpz_size(modulus.get())),
      product_(2 * limbs_),
      scratch_(std::max(mpn_sec_mul_itch(limbs_, limbs_), mpn_sec_div_r_itch(2 * limbs_, limbs_))) {
}

SecureModMul::~SecureModMul() {
  sodium_memzero(product_.data(), product_.size() * sizeof(mp_limb_t));
  sodium_memzero(scratch_.data(), scratch_.size() * sizeof(mp_limb_t));
}

void SecureModMul::Mul(const mp_limb_t* a, const mp_limb_t* b, mp_limb_t* out) {
  mpn_sec_mul(product_.data(), a, limbs_, b, limbs_, scratch_.data());
  mpn_sec_div_r(product_.data(), 2 * limbs_, modulus_, limbs_, scratch_.data());
  std::copy(product_.begin(), product_.begin() + limbs_, out);
}

SecretMpz RandomBits(size_t bits) {
  std::vector<uint8_t> buf((bits + 7) / 8);
  randombytes_buf(buf.data(), buf.size());
  SecretMpz x;
  if (!buf.empty()) mpz_import(x.get(), buf.size(), 1, 1, 1, 0, buf.data());
  sodium_memzero(buf.data(), buf.size());
  mpz_fdiv_r_2exp(x.get(), x.get(), bits);
  return x;
}

SecretMpz RandomBelow(const Mpz& bound) {
  SecretMpz x = RandomBits(bound.bits() + 64);
  mpz_mod(x.get(), x.get(), bound.get());
  return x;
}

}  // namespace veil::he
