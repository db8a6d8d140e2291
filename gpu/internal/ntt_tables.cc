#include "gpu/internal/ntt_tables.h"

#include "absl/strings/str_cat.h"

namespace veil::gpu::internal {

absl::StatusOr<MontgomeryNttTables> MakeMontgomeryNttTables(const he::NttTables& tables) {
  if (tables.log_n() > kNttMaxLogN) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPU NTT handles N up to 2^", kNttMaxLogN, ", not 2^", tables.log_n()));
  }
  const he::Modulus& q = tables.modulus();
  MontgomeryNttTables t;
  t.log_n = tables.log_n();
  t.q = q.value();
  t.q_inv = q.montgomery_inv();
  t.n_inv_mont = q.ToMontgomery(tables.n_inverse());
  for (size_t j = 0; j < tables.n(); ++j) {
    t.roots.push_back(q.ToMontgomery(tables.roots()[j]));
    t.inverse_roots.push_back(q.ToMontgomery(tables.inverse_roots()[j]));
  }
  if (t.q < (uint64_t{1} << 32)) {
    const auto mont32 = [&](uint64_t w) { return static_cast<uint32_t>((w << 32) % t.q); };
    t.q_inv32 = static_cast<uint32_t>(t.q_inv);  // q^{-1} mod 2^32: q^{-1} mod 2^64's low word
    t.n_inv_mont32 = mont32(tables.n_inverse());
    for (size_t j = 0; j < tables.n(); ++j) {
      t.roots32.push_back(mont32(tables.roots()[j]));
      t.inverse_roots32.push_back(mont32(tables.inverse_roots()[j]));
    }
  }
  return t;
}

absl::Status CheckNttPolys(const he::NttTables& tables, absl::Span<const uint64_t> polys) {
  if (polys.size() % tables.n() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(polys.size(), " residues are not whole ", "polynomials of N = ", tables.n()));
  }
  for (uint64_t v : polys) {
    if (v >= tables.modulus().value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("residue ", v, " is not below q = ", tables.modulus().value()));
    }
  }
  return absl::OkStatus();
}

}  // namespace veil::gpu::internal
