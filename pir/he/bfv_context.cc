#include "pir/he/bfv_context.h"

#include <sodium.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pir/he/multiword.h"
#include "pir/he/poly.h"

namespace veil::he {

absl::StatusOr<std::shared_ptr<const BfvContext>> BfvContext::Create(const BfvParams& params) {
  absl::StatusOr<BfvParams> checked =
      BfvParams::Create(params.log_n, params.q, params.special, params.t);
  if (!checked.ok()) return checked.status();
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  std::shared_ptr<BfvContext> ctx(new BfvContext());
  ctx->params_ = *checked;
  ctx->id_ = checked->Id();
  if (absl::Status s = ctx->Init(); !s.ok()) return s;
  return std::shared_ptr<const BfvContext>(std::move(ctx));
}

absl::Status BfvContext::CheckId(uint64_t object_id, const char* what) const {
  if (object_id == id_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s belongs to parameters %016x, not to these (%016x)", what, object_id, id_));
}

const std::vector<uint32_t>& BfvContext::GaloisPermutation(uint32_t galois) const {
  std::lock_guard<std::mutex> lock(galois_mutex_);
  std::unique_ptr<const std::vector<uint32_t>>& perm = galois_perms_[galois];
  if (!perm) {
    perm = std::make_unique<const std::vector<uint32_t>>(
        internal::GaloisNttPermutation(log_n(), galois));
  }
  return *perm;
}

absl::Status BfvContext::Init() {
  std::vector<uint64_t> qp = params_.q;
  qp.push_back(params_.special);
  absl::StatusOr<RnsBase> q = RnsBase::Create(params_.q), qpb = RnsBase::Create(qp);
  if (!q.ok()) return q.status();
  if (!qpb.ok()) return qpb.status();
  q_base_ = *std::move(q);
  qp_base_ = *std::move(qpb);
  for (const Modulus& m : qp_base_.moduli()) {
    absl::StatusOr<NttTables> t = NttTables::Create(log_n(), m);
    if (!t.ok()) return t.status();
    ntt_.push_back(*std::move(t));
  }
  absl::StatusOr<Modulus> t = Modulus::Create(params_.t);
  if (!t.ok()) return t.status();
  absl::StatusOr<NttTables> plain = NttTables::Create(log_n(), *t);
  if (!plain.ok()) return plain.status();
  plain_ntt_ = *std::move(plain);
  const uint64_t two_n = 2 * n(), row = n() / 2;
  slot_index_.resize(n());
  for (uint64_t i = 0, power = 1; i < row; ++i, power = (power * 3) & (two_n - 1)) {
    slot_index_[i] = ReverseBits(static_cast<uint32_t>((power - 1) / 2), log_n());
    slot_index_[row + i] = ReverseBits(static_cast<uint32_t>((two_n - power - 1) / 2), log_n());
  }

  // Encoding: floor(Q / t) and Q mod t.
  std::vector<uint64_t> q_div_t(q_base_.product().begin(), q_base_.product().end());
  encode_.q_mod_t = multiword::DivWordInPlace(absl::MakeSpan(q_div_t), params_.t);
  for (const Modulus& m : q_base_.moduli()) {
    encode_.q_div_t.push_back(multiword::ModWord(q_div_t, m.value()));
  }
  // Key switching: P and P^{-1} modulo each q_i.
  for (const Modulus& m : q_base_.moduli()) {
    const uint64_t p = m.Reduce(params_.special);
    absl::StatusOr<uint64_t> inv = m.Inverse(p);
    if (!inv.ok()) return inv.status();
    key_switch_.p_mod_q.push_back(p);
    key_switch_.p_inv_mod_q.push_back(*inv);
    key_switch_.p_inv_mod_q_shoup.push_back(m.ShoupOf(*inv));
  }
  if (absl::Status s = InitDecrypt(); !s.ok()) return s;
  return InitMultiply();
}

absl::Status BfvContext::InitDecrypt() {
  std::vector<uint64_t> used = qp_base_.values();
  used.push_back(params_.t);
  // gamma: any 61-bit prime coprime to everything else (2 "= 1 mod 2" admits every odd prime).
  absl::StatusOr<std::vector<uint64_t>> gamma = GenerateNttPrimes(61, 2, 1, used);
  if (!gamma.ok()) return gamma.status();
  absl::StatusOr<RnsBase> t_gamma = RnsBase::Create({params_.t, (*gamma)[0]});
  if (!t_gamma.ok()) return t_gamma.status();
  absl::StatusOr<BaseConverter> conv = BaseConverter::Create(q_base_, *t_gamma);
  if (!conv.ok()) return conv.status();
  internal::DecryptConstants& d = decrypt_;
  d.gamma = (*t_gamma)[1];
  d.q_to_t_gamma = *std::move(conv);
  const Modulus& t = plain_modulus();
  for (const Modulus& m : q_base_.moduli()) {
    const uint64_t tg = m.Mul(m.Reduce(params_.t), m.Reduce(d.gamma.value()));
    d.t_gamma_mod_q.push_back(tg);
    d.t_gamma_mod_q_shoup.push_back(m.ShoupOf(tg));
  }
  absl::StatusOr<uint64_t> inv_q_t = t.Inverse(multiword::ModWord(q_base_.product(), t.value()));
  absl::StatusOr<uint64_t> inv_q_g =
      d.gamma.Inverse(multiword::ModWord(q_base_.product(), d.gamma.value()));
  absl::StatusOr<uint64_t> inv_g_t = t.Inverse(t.Reduce(d.gamma.value()));
  if (!inv_q_t.ok() || !inv_q_g.ok() || !inv_g_t.ok()) {
    return absl::InternalError("decryption constants: Q, t and gamma are not coprime");
  }
  d.neg_inv_q_mod_t = t.Neg(*inv_q_t);
  d.neg_inv_q_mod_gamma = d.gamma.Neg(*inv_q_g);
  d.inv_gamma_mod_t = *inv_g_t;
  return absl::OkStatus();
}

absl::Status BfvContext::InitMultiply() {
  internal::MultiplyConstants& m = multiply_;
  const size_t k = q_size();
  // R must hold round(t x / Q) for tensor coefficients x: |x| <= N Q^2 / 4.
  const int needed_bits = q_base_.product_bits() + plain_modulus().bits() + log_n() + 3;
  std::vector<uint64_t> used = qp_base_.values();
  used.push_back(params_.t);
  used.push_back(decrypt_.gamma.value());
  const int count = needed_bits / 59 + 1;  // 60-bit primes carry at least 59 bits each
  absl::StatusOr<std::vector<uint64_t>> primes =
      GenerateNttPrimes(60, uint64_t{2} << log_n(), count, used);
  if (!primes.ok()) return primes.status();
  absl::StatusOr<RnsBase> aux = RnsBase::Create(*primes);
  if (!aux.ok()) return aux.status();
  m.aux = *std::move(aux);
  for (const Modulus& r : m.aux.moduli()) {
    absl::StatusOr<NttTables> t = NttTables::Create(log_n(), r);
    if (!t.ok()) return t.status();
    m.aux_ntt.push_back(*std::move(t));
  }
  absl::StatusOr<BaseConverter> to_aux = BaseConverter::Create(q_base_, m.aux);
  absl::StatusOr<BaseConverter> to_q = BaseConverter::Create(m.aux, q_base_);
  if (!to_aux.ok()) return to_aux.status();
  if (!to_q.ok()) return to_q.status();
  m.q_to_aux = *std::move(to_aux);
  m.aux_to_q = *std::move(to_q);

  // t R as multi-word, then floor(t R / q_i) and its remainder for every i.
  std::vector<uint64_t> t_r(m.aux.product().begin(), m.aux.product().end());
  t_r.push_back(multiword::MulWordInPlace(absl::MakeSpan(t_r), params_.t));
  m.omega.assign(m.aux.size() * k, 0);
  for (size_t i = 0; i < k; ++i) {
    const Modulus& q = q_base_[i];
    std::vector<uint64_t> quotient = t_r;
    const uint64_t rem = multiword::DivWordInPlace(absl::MakeSpan(quotient), q.value());
    m.theta.push_back(double(rem) / double(q.value()));
    for (size_t j = 0; j < m.aux.size(); ++j) {
      m.omega[j * k + i] = multiword::ModWord(quotient, m.aux[j].value());
    }
    absl::StatusOr<uint64_t> r_inv = q.Inverse(multiword::ModWord(m.aux.product(), q.value()));
    if (!r_inv.ok()) return r_inv.status();
    const uint64_t v = q.Mul(q_base_.punctured_inverse(i), *r_inv);
    m.qr_inv_mod_q.push_back(v);
    m.qr_inv_mod_q_shoup.push_back(q.ShoupOf(v));
  }
  for (const Modulus& r : m.aux.moduli()) {
    absl::StatusOr<uint64_t> q_inv = r.Inverse(multiword::ModWord(q_base_.product(), r.value()));
    if (!q_inv.ok()) return q_inv.status();
    m.t_inv_q_mod_aux.push_back(r.Mul(r.Reduce(params_.t), *q_inv));
  }
  return absl::OkStatus();
}

}  // namespace veil::he
