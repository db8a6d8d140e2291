// Ciphertext-ciphertext multiplication, HPS style (Halevi, Polyakov, Shoup, CT-RSA 2019):
//   1. each input polynomial (centered mod Q) is extended exactly to the auxiliary base R;
//   2. the tensor product (c0 = a0 b0, c1 = a0 b1 + a1 b0, c2 = a1 b1) is taken in Q u R, where
//      it is exact over the integers (|coefficients| <= N Q^2 / 4 < QR / 2);
//   3. round(t x / Q) is computed in R with the precomputed omega/theta split (bfv_context.h);
//   4. the result, centered mod R, is converted exactly back to Q.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "pir/he/bfv.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace {

// A polynomial over Q u R: k rows mod q_i, then l rows mod r_j, in caller-provided memory.
class ExtendedPoly {
 public:
  ExtendedPoly(const BfvContext& ctx, uint64_t* data) : ctx_(ctx), data_(data) {}
  static size_t Words(const BfvContext& ctx) {
    return (ctx.q_size() + ctx.multiply().aux.size()) * ctx.n();
  }

  const internal::MultiplyConstants& aux_constants() const { return ctx_.multiply(); }
  const RnsBase& aux() const { return ctx_.multiply().aux; }
  uint64_t* q_rows() { return data_; }
  uint64_t* aux_rows() { return data_ + ctx_.q_size() * ctx_.n(); }
  const uint64_t* q_rows() const { return data_; }
  const uint64_t* aux_rows() const { return data_ + ctx_.q_size() * ctx_.n(); }

  // From a polynomial over Q (coefficient form), extended exactly, then transformed.
  void ExtendAndTransform(const uint64_t* poly) {
    std::copy_n(poly, ctx_.q_size() * ctx_.n(), q_rows());
    aux_constants().q_to_aux.ExactConvert(poly, ctx_.n(), aux_rows());
    internal::ForwardNtt(ctx_.q_ntt(), q_rows());
    internal::ForwardNtt(aux_constants().aux_ntt, aux_rows());
  }
  void InverseTransform() {
    internal::InverseNtt(ctx_.q_ntt(), q_rows());
    internal::InverseNtt(aux_constants().aux_ntt, aux_rows());
  }
  // this = a * b (+ c * d when given), pointwise in every row.
  void Tensor(const ExtendedPoly& a, const ExtendedPoly& b, const ExtendedPoly* c = nullptr,
              const ExtendedPoly* d = nullptr) {
    for (int part = 0; part < 2; ++part) {
      const absl::Span<const NttTables> rows =
          part == 0 ? ctx_.q_ntt() : absl::MakeConstSpan(aux_constants().aux_ntt);
      uint64_t* out = part == 0 ? q_rows() : aux_rows();
      const uint64_t* ar = part == 0 ? a.q_rows() : a.aux_rows();
      const uint64_t* br = part == 0 ? b.q_rows() : b.aux_rows();
      internal::MultiplyRows(rows, ar, br, out);
      if (c) {
        internal::MultiplyAccumulateRows(rows, part == 0 ? c->q_rows() : c->aux_rows(),
                                         part == 0 ? d->q_rows() : d->aux_rows(), out);
      }
    }
  }
  // round(t x / Q) over Q (coefficient form).
  void ScaleDown(uint64_t* out) const;

 private:
  const BfvContext& ctx_;
  uint64_t* data_;
};

void ExtendedPoly::ScaleDown(uint64_t* out) const {
  const internal::MultiplyConstants& m = aux_constants();
  const size_t n = ctx_.n(), k = ctx_.q_size(), l = aux().size();
  uint64_t* scaled = internal::GetScratch(internal::Scratch::kPoly, l * n);
  uint64_t a[kMaxRnsPrimes];
  for (size_t c = 0; c < n; ++c) {
    double fraction = 0;
    for (size_t i = 0; i < k; ++i) {
      a[i] = MulShoup(q_rows()[i * n + c], m.qr_inv_mod_q[i], m.qr_inv_mod_q_shoup[i],
                      ctx_.modulus(i).value());
      fraction += double(a[i]) * m.theta[i];
    }
    const uint64_t rounded = static_cast<uint64_t>(fraction + 0.5);  // fraction >= 0
    for (size_t j = 0; j < l; ++j) {
      const Modulus& r = aux()[j];
      uint128_t acc = static_cast<uint128_t>(aux_rows()[j * n + c]) * m.t_inv_q_mod_aux[j];
      for (size_t i = 0; i < k; ++i) acc += static_cast<uint128_t>(a[i]) * m.omega[j * k + i];
      scaled[j * n + c] = r.Reduce(acc + rounded);
    }
  }
  m.aux_to_q.ExactConvert(scaled, n, out);
}

}  // namespace

absl::StatusOr<Ciphertext> Multiply(const BfvContext& ctx, const Ciphertext& a,
                                    const Ciphertext& b) {
  if (absl::Status s = CheckCiphertext(ctx, a, "first operand"); !s.ok()) return s;
  if (absl::Status s = CheckCiphertext(ctx, b, "second operand"); !s.ok()) return s;
  if (a.size != 2 || b.size != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("multiplication takes ciphertexts of size 2, got ", a.size, " and ", b.size));
  }
  const size_t words = ctx.q_size() * ctx.n(), extended = ExtendedPoly::Words(ctx);
  // Seven extended polynomials live at once; they come from this thread's scratch.
  uint64_t* memory = internal::GetScratch(internal::Scratch::kMultiply, 7 * extended);
  ExtendedPoly a0(ctx, memory), a1(ctx, memory + extended), b0(ctx, memory + 2 * extended),
      b1(ctx, memory + 3 * extended);
  a0.ExtendAndTransform(a.poly(0, words));
  a1.ExtendAndTransform(a.poly(1, words));
  b0.ExtendAndTransform(b.poly(0, words));
  b1.ExtendAndTransform(b.poly(1, words));
  ExtendedPoly c0(ctx, memory + 4 * extended), c1(ctx, memory + 5 * extended),
      c2(ctx, memory + 6 * extended);
  c0.Tensor(a0, b0);
  c1.Tensor(a0, b1, &a1, &b0);
  c2.Tensor(a1, b1);
  Ciphertext out{ctx.id(), 3, std::vector<uint64_t>(3 * words), std::nullopt};
  ExtendedPoly* parts[] = {&c0, &c1, &c2};
  for (size_t i = 0; i < 3; ++i) {
    parts[i]->InverseTransform();
    parts[i]->ScaleDown(out.poly(i, words));
  }
  return out;
}

}  // namespace veil::he
