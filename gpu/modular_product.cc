// The plan of a modular product and its host-run (gpu/modular_product.h).
#include "gpu/modular_product.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/montgomery.h"
#include "gpu/internal/product_plan.h"
#include "gpu/internal/runners.h"

namespace veil::gpu {
namespace internal {
namespace {

// Rows a launch folds into one partial product once the device is full: each launch after the
// first shrinks the rows by this factor.
constexpr uint64_t kFanIn = 16;

// a < n, both `limbs` words.
bool Below(const uint32_t* a, const uint32_t* n, int limbs) {
  for (int j = limbs - 1; j >= 0; --j) {
    if (a[j] != n[j]) return a[j] < n[j];
  }
  return false;
}

// x = 2 x mod n for x < n.
void DoubleMod(std::vector<uint32_t>& x, const uint32_t* n) {
  uint32_t carry = 0;
  for (uint32_t& w : x) {
    const uint32_t top = w >> 31;
    w = (w << 1) | carry;
    carry = top;
  }
  if (carry == 0 && Below(x.data(), n, static_cast<int>(x.size()))) return;
  uint32_t borrow = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const uint64_t d = uint64_t{x[j]} - n[j] - borrow;
    x[j] = static_cast<uint32_t>(d);
    borrow = static_cast<uint32_t>(d >> 63);
  }
}

absl::Status Validate(const ModularProductInput& in, absl::Span<const uint32_t> out) {
  const size_t limbs = in.modulus.size();
  if (limbs == 0 || limbs > kMaxModularProductLimbs || in.modulus.back() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("modular product: the modulus needs 1..",
                                                   kMaxModularProductLimbs,
                                                   " words and a non-zero top word"));
  }
  if (in.modulus[0] % 2 == 0 || (limbs == 1 && in.modulus[0] == 1)) {
    return absl::InvalidArgumentError("modular product: the modulus must be odd and above 1");
  }
  if (in.rows == 0 || in.columns == 0 || in.residues.size() / limbs / in.rows != in.columns ||
      in.residues.size() != in.rows * in.columns * limbs || out.size() != in.columns * limbs) {
    return absl::InvalidArgumentError(
        absl::StrCat("modular product: ", in.rows, " x ", in.columns, " residues of ", limbs,
                     " words need ", in.rows * in.columns * limbs, " words in and ",
                     in.columns * limbs, " out; got ", in.residues.size(), " and ", out.size()));
  }
  for (uint64_t i = 0; i < in.rows * in.columns; ++i) {
    if (!Below(in.residues.data() + i * limbs, in.modulus.data(), static_cast<int>(limbs))) {
      return absl::InvalidArgumentError(
          absl::StrCat("modular product: residue ", i, " is not below the modulus"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProductPlan> PlanModularProduct(const ModularProductInput& input,
                                               absl::Span<const uint32_t> out,
                                               uint64_t parallel_items) {
  if (auto s = Validate(input, out); !s.ok()) return s;
  ProductPlan plan;
  plan.limbs = static_cast<int>(input.modulus.size());
  for (int c : kProductLimbClasses) {
    if (c >= plan.limbs) {
      plan.limb_class = c;
      break;
    }
  }
  const uint32_t* n = input.modulus.data();
  plan.n_inv = NegInverse32(n[0]);
  // R mod N, then R^2 mod N (the Montgomery form of R), by doubling 1.
  std::vector<uint32_t> r(plan.limbs, 0);
  r[0] = 1;
  for (int i = 0; i < 32 * plan.limbs; ++i) DoubleMod(r, n);
  std::vector<uint32_t> r2 = r;
  for (int i = 0; i < 32 * plan.limbs; ++i) DoubleMod(r2, n);
  // Square-and-multiply in Montgomery form (the exponent, a row count, is public), then out of it.
  std::vector<uint32_t> acc = r;  // the form of 1
  for (int bit = 63; bit >= 0; --bit) {
    MontMul<kMaxModularProductLimbs>(acc.data(), acc.data(), n, plan.n_inv, plan.limbs, acc.data());
    if ((input.rows >> bit) & 1) {
      MontMul<kMaxModularProductLimbs>(acc.data(), r2.data(), n, plan.n_inv, plan.limbs,
                                       acc.data());
    }
  }
  std::vector<uint32_t> one(plan.limbs, 0);
  one[0] = 1;
  plan.correction.resize(plan.limbs);
  MontMul<kMaxModularProductLimbs>(acc.data(), one.data(), n, plan.n_inv, plan.limbs,
                                   plan.correction.data());
  // First launch: as many partial products per column as the device runs items at once; then
  // kFanIn rows per partial until one is left. One row: a single launch that copies it.
  const uint64_t width = std::max<uint64_t>(1, parallel_items / input.columns);
  for (uint64_t rows = input.rows; rows > 1 || plan.slices.empty();) {
    const uint64_t slices = rows > width ? width : (rows + kFanIn - 1) / kFanIn;
    plan.slices.push_back(slices);
    rows = slices;
  }
  return plan;
}

}  // namespace internal

absl::Status HostRunModularProduct(const ModularProductInput& input, absl::Span<uint32_t> out,
                                   uint64_t parallel_items) {
  auto plan = internal::PlanModularProduct(input, out, parallel_items);
  if (!plan.ok()) return plan.status();
  constexpr int kLimbs = kMaxModularProductLimbs;
  const uint64_t columns = input.columns;
  std::vector<uint32_t> current(input.residues.begin(), input.residues.end()), next;
  uint64_t rows = input.rows;
  for (uint64_t slices : plan->slices) {
    next.assign(slices * columns * plan->limbs, 0);
    const internal::ProductLaunch launch{
        input.modulus.data(), plan->n_inv, plan->limbs, current.data(), rows, columns, slices,
        next.data()};
    internal::HostLoop(launch.items(),
                       [&](uint64_t i) { internal::ReduceItem<kLimbs>(launch, i); });
    current.swap(next);
    rows = slices;
  }
  const internal::FinishLaunch finish{
      input.modulus.data(),    plan->n_inv, plan->limbs, current.data(),
      plan->correction.data(), columns,     out.data()};
  internal::HostLoop(columns, [&](uint64_t c) { internal::FinishItem<kLimbs>(finish, c); });
  return absl::OkStatus();
}

}  // namespace veil::gpu
