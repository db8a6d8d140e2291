#include "pir/he/noise_model.h"

#include <algorithm>
#include <cmath>

#include "pir/he/sampling.h"

namespace veil::he {
namespace {

double Log2Sum(double a, double b) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log2(1.0 + std::exp2(lo - hi));
}

}  // namespace

NoiseModel::NoiseModel(const BfvContext& ctx)
    : log2_t_(std::log2(double(ctx.params().t))),
      n_(double(ctx.n())),
      k_(double(ctx.q_size())),
      log2_p_(std::log2(double(ctx.params().special))) {
  log2_q_ = 0;
  double q_max = 0;
  for (const Modulus& q : ctx.q_base().moduli()) {
    log2_q_ += std::log2(double(q.value()));
    q_max = std::max(q_max, double(q.value()));
  }
  log2_q_max_ = std::log2(q_max);
}

double NoiseModel::FreshSymmetric() const {
  return log2_t_ + std::log2(kErrorBound + 0.5) - log2_q_;
}

double NoiseModel::FreshPublic() const {
  return log2_t_ + std::log2(kErrorBound * (2 * n_ + 1) + 0.5) - log2_q_;
}

double NoiseModel::Add(double a, double b) const { return Log2Sum(a, b); }

double NoiseModel::MultiplyPlain(double v, double plain_norm) const {
  return v + std::log2(n_ * plain_norm);
}

double NoiseModel::KeySwitchTerm() const {
  const double digits = std::log2(k_ * n_ * kErrorBound) + log2_q_max_ - log2_p_;
  return log2_t_ + Log2Sum(digits, std::log2((n_ + 1) / 2)) - log2_q_;
}

double NoiseModel::Rotate(double v) const { return Log2Sum(v, KeySwitchTerm()); }

double NoiseModel::MultiplyRelin(double a, double b) const {
  // (v1 + v2) t N (N + 2) / 2  +  N v1 v2  +  t (2 (1 + N + N^2)) / Q  +  key switching.
  const double linear = Log2Sum(a, b) + log2_t_ + std::log2(n_ * (n_ + 2) / 2);
  const double product = a + b + std::log2(n_);
  const double rounding = log2_t_ + std::log2(2 * (1 + n_ + n_ * n_)) - log2_q_;
  return Log2Sum(Log2Sum(linear, product), Log2Sum(rounding, KeySwitchTerm()));
}

}  // namespace veil::he
