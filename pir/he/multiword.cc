#include "pir/he/multiword.h"

namespace veil::he::multiword {

using uint128_t = unsigned __int128;

uint64_t MulWordInPlace(absl::Span<uint64_t> a, uint64_t b) {
  uint64_t carry = 0;
  for (uint64_t& w : a) {
    const uint128_t p = static_cast<uint128_t>(w) * b + carry;
    w = static_cast<uint64_t>(p);
    carry = static_cast<uint64_t>(p >> 64);
  }
  return carry;
}

uint64_t AddInPlace(absl::Span<uint64_t> a, absl::Span<const uint64_t> b) {
  uint64_t carry = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const uint128_t s = static_cast<uint128_t>(a[i]) + (i < b.size() ? b[i] : 0) + carry;
    a[i] = static_cast<uint64_t>(s);
    carry = static_cast<uint64_t>(s >> 64);
  }
  return carry;
}

uint64_t SubInPlace(absl::Span<uint64_t> a, absl::Span<const uint64_t> b) {
  uint64_t borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t bi = i < b.size() ? b[i] : 0;
    const uint64_t d = a[i] - bi - borrow;
    borrow = (a[i] < bi || (a[i] == bi && borrow)) ? 1 : 0;
    a[i] = d;
  }
  return borrow;
}

int Compare(absl::Span<const uint64_t> a, absl::Span<const uint64_t> b) {
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return 0;
}

uint64_t DivWordInPlace(absl::Span<uint64_t> a, uint64_t d) {
  uint128_t rem = 0;
  for (size_t i = a.size(); i-- > 0;) {
    const uint128_t cur = (rem << 64) | a[i];
    a[i] = static_cast<uint64_t>(cur / d);
    rem = cur % d;
  }
  return static_cast<uint64_t>(rem);
}

uint64_t ModWord(absl::Span<const uint64_t> a, uint64_t d) {
  uint128_t rem = 0;
  for (size_t i = a.size(); i-- > 0;) rem = ((rem << 64) | a[i]) % d;
  return static_cast<uint64_t>(rem);
}

int BitLength(absl::Span<const uint64_t> a) {
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i]) return static_cast<int>(64 * i) + 64 - __builtin_clzll(a[i]);
  }
  return 0;
}

std::vector<uint64_t> Product(absl::Span<const uint64_t> factors) {
  std::vector<uint64_t> p(factors.size() + 1, 0);
  p[0] = 1;
  for (uint64_t f : factors) MulWordInPlace(absl::MakeSpan(p), f);
  p.resize(factors.empty() ? 1 : factors.size());
  return p;
}

}  // namespace veil::he::multiword
