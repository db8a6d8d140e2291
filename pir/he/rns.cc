#include "pir/he/rns.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "pir/he/multiword.h"

namespace veil::he {

absl::StatusOr<RnsBase> RnsBase::Create(const std::vector<uint64_t>& moduli) {
  if (moduli.empty() || moduli.size() > kMaxRnsPrimes) {
    return absl::InvalidArgumentError(
        absl::StrCat("an RNS base holds 1 to ", kMaxRnsPrimes, " moduli, got ", moduli.size()));
  }
  RnsBase b;
  for (size_t i = 0; i < moduli.size(); ++i) {
    absl::StatusOr<Modulus> m = Modulus::Create(moduli[i]);
    if (!m.ok()) return m.status();
    for (size_t j = 0; j < i; ++j) {
      if (std::gcd(moduli[i], moduli[j]) != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("RNS moduli ", moduli[j], " and ", moduli[i], " are not coprime"));
      }
    }
    b.moduli_.push_back(*m);
  }
  const size_t k = moduli.size();
  b.product_ = multiword::Product(moduli);
  b.punctured_.assign(k * k, 0);
  for (size_t i = 0; i < k; ++i) {
    std::vector<uint64_t> others;
    for (size_t j = 0; j < k; ++j) {
      if (j != i) others.push_back(moduli[j]);
    }
    std::vector<uint64_t> p = multiword::Product(others);
    std::copy(p.begin(), p.end(), b.punctured_.begin() + i * k);
    const uint64_t residue = multiword::ModWord(p, moduli[i]);
    absl::StatusOr<uint64_t> inv = b.moduli_[i].Inverse(residue);
    if (!inv.ok()) return inv.status();
    b.punctured_inv_.push_back(*inv);
    b.punctured_inv_shoup_.push_back(b.moduli_[i].ShoupOf(*inv));
  }
  return b;
}

std::vector<uint64_t> RnsBase::values() const {
  std::vector<uint64_t> v;
  for (const Modulus& m : moduli_) v.push_back(m.value());
  return v;
}

int RnsBase::product_bits() const { return multiword::BitLength(product_); }

void RnsBase::Compose(const uint64_t* residues, size_t stride, absl::Span<uint64_t> out) const {
  // x = sum_i [x_i (Q/q_i)^{-1}]_{q_i} * (Q/q_i) mod Q; the sum is below k*Q, so at most k - 1
  // subtractions of Q bring it into [0, Q). One extra word holds the sum.
  const size_t k = size();
  std::vector<uint64_t> acc(k + 1, 0), term(k + 1, 0);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t y = MulShoup(residues[i * stride], punctured_inv_[i], punctured_inv_shoup_[i],
                                moduli_[i].value());
    std::copy(punctured_.begin() + i * k, punctured_.begin() + (i + 1) * k, term.begin());
    term[k] = multiword::MulWordInPlace(absl::MakeSpan(term).first(k), y);
    multiword::AddInPlace(absl::MakeSpan(acc), term);
  }
  std::vector<uint64_t> q(product_);
  q.push_back(0);
  while (multiword::Compare(acc, q) >= 0) multiword::SubInPlace(absl::MakeSpan(acc), q);
  std::copy_n(acc.begin(), k, out.begin());
}

void RnsBase::Decompose(absl::Span<const uint64_t> x, uint64_t* residues, size_t stride) const {
  for (size_t i = 0; i < size(); ++i)
    residues[i * stride] = multiword::ModWord(x, moduli_[i].value());
}

absl::StatusOr<uint128_t> RnsBase::ComposeU128(const uint64_t* residues, size_t stride) const {
  if (product_bits() > 128) {
    return absl::FailedPreconditionError(
        absl::StrCat("Q has ", product_bits(), " bits: it does not fit in 128"));
  }
  std::vector<uint64_t> x(size());
  Compose(residues, stride, absl::MakeSpan(x));
  uint128_t v = x[0];
  if (size() > 1) v |= static_cast<uint128_t>(x[1]) << 64;
  return v;
}

absl::StatusOr<BaseConverter> BaseConverter::Create(const RnsBase& from, const RnsBase& to) {
  for (const Modulus& p : to.moduli()) {
    for (const Modulus& q : from.moduli()) {
      if (p == q) {
        return absl::InvalidArgumentError(
            absl::StrCat("base conversion between bases that share the modulus ", p.value()));
      }
    }
  }
  BaseConverter c;
  c.from_ = from;
  c.to_ = to;
  for (size_t j = 0; j < to.size(); ++j) {
    for (size_t i = 0; i < from.size(); ++i) {
      c.punctured_mod_to_.push_back(multiword::ModWord(from.punctured_product(i), to[j].value()));
    }
    c.product_mod_to_.push_back(multiword::ModWord(from.product(), to[j].value()));
  }
  for (const Modulus& q : from.moduli()) c.inverse_moduli_.push_back(1.0 / double(q.value()));
  return c;
}

template <bool kExact>
void BaseConverter::Convert(const uint64_t* in, size_t n, uint64_t* out) const {
  const size_t k = from_.size();
  uint64_t y[kMaxRnsPrimes];
  for (size_t c = 0; c < n; ++c) {
    double fraction = 0;
    for (size_t i = 0; i < k; ++i) {
      y[i] = MulShoup(in[i * n + c], from_.punctured_inverse(i), from_.punctured_inverse_shoup(i),
                      from_[i].value());
      if (kExact) fraction += double(y[i]) * inverse_moduli_[i];
    }
    // sum_i y_i Q/q_i = x + a Q with a = floor(sum_i y_i / q_i); rounding instead of flooring
    // subtracts one more Q when x > Q/2: the centered representative.
    const uint64_t v = kExact ? static_cast<uint64_t>(fraction + 0.5) : 0;  // fraction >= 0
    for (size_t j = 0; j < to_.size(); ++j) {
      const Modulus& p = to_[j];
      const uint64_t* row = punctured_mod_to_.data() + j * k;
      uint128_t acc = 0;
      for (size_t i = 0; i < k; ++i) acc += static_cast<uint128_t>(y[i]) * row[i];
      uint64_t r = p.Reduce(acc);
      if (kExact) r = p.Sub(r, p.Mul(v, product_mod_to_[j]));
      out[j * n + c] = r;
    }
  }
}

void BaseConverter::FastConvert(const uint64_t* in, size_t n, uint64_t* out) const {
  Convert<false>(in, n, out);
}

void BaseConverter::ExactConvert(const uint64_t* in, size_t n, uint64_t* out) const {
  Convert<true>(in, n, out);
}

}  // namespace veil::he
