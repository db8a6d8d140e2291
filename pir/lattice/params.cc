#include "pir/lattice/params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace veil::lattice {

std::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kSimplePir:
      return "simple";
    case Protocol::kDoublePir:
      return "double";
  }
  return "unknown";
}

absl::StatusOr<Protocol> ParseProtocol(std::string_view name) {
  if (name == "simple" || name == "lwe-simple") return Protocol::kSimplePir;
  if (name == "double" || name == "lwe-double") return Protocol::kDoublePir;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown LWE protocol '", std::string(name), "' (simple or double)"));
}

bool CorrectnessHolds(uint32_t p, uint64_t m, uint64_t decryptions) {
  if (p < 2 || m == 0 || decryptions == 0) return false;
  const double delta = std::ldexp(1.0, kLog2FailureBound) / static_cast<double>(decryptions);
  const double floor_q_over_p = std::floor(std::ldexp(1.0, kLogModulus) / p);
  return floor_q_over_p >= std::sqrt(2.0) * kErrorSigma * p * std::sqrt(static_cast<double>(m)) *
                               std::sqrt(std::log(2.0 / delta));
}

uint64_t DecryptionsPerElement(Protocol protocol, uint32_t p) {
  if (protocol == Protocol::kSimplePir || p < 2) return 1;
  const uint64_t kappa = static_cast<uint64_t>(std::ceil(kLogModulus / std::log2(double(p))));
  return (uint64_t{kLweDimension} + 1) * kappa + 1;
}

uint32_t LargestPlaintextModulus(Protocol protocol, uint64_t m, uint64_t elements) {
  // floor(q/p) falls and the right-hand side grows with p (kappa only grows as p falls), so the
  // rule holds on an interval [2, p_max]: scan down from the top.
  for (uint32_t p = 1u << 16; p >= 2; --p) {
    if (CorrectnessHolds(p, m, elements * DecryptionsPerElement(protocol, p))) return p;
  }
  return 0;
}

uint64_t LargestWidth(Protocol protocol, uint32_t p, uint64_t elements) {
  const uint64_t decryptions = elements * DecryptionsPerElement(protocol, p);
  if (!CorrectnessHolds(p, 1, decryptions)) return 0;
  uint64_t lo = 1, hi = uint64_t{1} << 40;  // the rule holds at lo
  if (CorrectnessHolds(p, hi, decryptions)) return hi;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (CorrectnessHolds(p, mid, decryptions) ? lo : hi) = mid;
  }
  return lo;
}

double Log2FailureBound(uint32_t p, uint64_t m, uint64_t decryptions) {
  const double floor_q_over_p = std::floor(std::ldexp(1.0, kLogModulus) / p);
  const double exponent = floor_q_over_p * floor_q_over_p /
                          (2.0 * double(p) * double(p) * kErrorSigma * kErrorSigma * double(m));
  return std::log2(2.0 * double(decryptions)) - exponent / std::log(2.0);
}

}  // namespace veil::lattice
