#include "pir/he/encoder.h"

#include <sodium.h>

#include "absl/strings/str_cat.h"
#include "pir/he/scratch.h"

namespace veil::he {

absl::StatusOr<Plaintext> EncodeSlots(const BfvContext& ctx, absl::Span<const uint64_t> values) {
  const size_t n = ctx.n();
  if (values.size() > n) {
    return absl::InvalidArgumentError(absl::StrCat(values.size(), " slot values given, N = ", n));
  }
  // Slot values are a client's secrets (a bag's weights): the transform's scratch is wiped, and
  // so are the values placed before a bad one.
  internal::SecretNttScope wipe_ntt_scratch;
  Plaintext m{ctx.id(), std::vector<uint64_t>(n, 0)};
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= ctx.params().t) {
      sodium_memzero(m.coeffs.data(), m.coeffs.size() * sizeof(uint64_t));
      return absl::InvalidArgumentError(
          absl::StrCat("slot value ", values[i], " is not below t = ", ctx.params().t));
    }
    m.coeffs[ctx.slot_index()[i]] = values[i];
  }
  ctx.plain_ntt().Inverse(m.coeffs.data());
  return m;
}

absl::StatusOr<Plaintext> EncodeSignedSlots(const BfvContext& ctx,
                                            absl::Span<const int64_t> values) {
  const uint64_t t = ctx.params().t;
  std::vector<uint64_t> residues(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    const int64_t bound = static_cast<int64_t>(t / 2);  // t is an odd prime
    if (v > bound || v < -bound) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot value ", v, " is outside [-(t-1)/2, (t-1)/2] for t = ", t));
    }
    residues[i] = v >= 0 ? static_cast<uint64_t>(v) : t - static_cast<uint64_t>(-v);
  }
  absl::StatusOr<Plaintext> m = EncodeSlots(ctx, residues);
  sodium_memzero(residues.data(), residues.size() * sizeof(uint64_t));
  return m;
}

absl::StatusOr<std::vector<uint64_t>> DecodeSlots(const BfvContext& ctx, const Plaintext& m) {
  if (absl::Status s = ctx.CheckId(m.params_id, "plaintext"); !s.ok()) return s;
  if (m.coeffs.size() != ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plaintext has ", m.coeffs.size(), " coefficients, N = ", ctx.n()));
  }
  internal::SecretNttScope wipe_ntt_scratch;  // a decrypted message
  std::vector<uint64_t> ntt = m.coeffs;
  ctx.plain_ntt().Forward(ntt.data());
  std::vector<uint64_t> values(ctx.n());
  for (size_t i = 0; i < ctx.n(); ++i) values[i] = ntt[ctx.slot_index()[i]];
  sodium_memzero(ntt.data(), ntt.size() * sizeof(uint64_t));
  return values;
}

absl::StatusOr<std::vector<int64_t>> DecodeSignedSlots(const BfvContext& ctx, const Plaintext& m) {
  absl::StatusOr<std::vector<uint64_t>> values = DecodeSlots(ctx, m);
  if (!values.ok()) return values.status();
  std::vector<int64_t> out;
  for (uint64_t v : *values) out.push_back(ctx.plain_modulus().Centered(v));
  return out;
}

}  // namespace veil::he
