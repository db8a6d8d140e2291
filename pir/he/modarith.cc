#include "pir/he/modarith.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace veil::he {

absl::StatusOr<Modulus> Modulus::Create(uint64_t q) {
  if (q < 3 || q % 2 == 0 || q >= (uint64_t{1} << kMaxModulusBits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("modulus ", q, " must be odd, at least 3 and below 2^", kMaxModulusBits));
  }
  Modulus m;
  m.q_ = q;
  m.bits_ = 64 - __builtin_clzll(q);
  // floor(2^128 / q): q is odd, so 2^128 / q is never an integer and floor((2^128 - 1) / q)
  // equals it.
  const uint128_t all_ones = ~static_cast<uint128_t>(0);
  const uint128_t ratio = all_ones / q;
  m.ratio_hi_ = static_cast<uint64_t>(ratio >> 64);
  m.ratio_lo_ = static_cast<uint64_t>(ratio);
  m.q_inv_ = InverseMod2Pow64(q);
  return m;
}

uint64_t Modulus::Pow(uint64_t base, uint64_t exp) const {
  uint64_t result = 1 % q_, b = Reduce(base);
  while (exp) {
    if (exp & 1) result = Mul(result, b);
    b = Mul(b, b);
    exp >>= 1;
  }
  return result;
}

absl::StatusOr<uint64_t> Modulus::Inverse(uint64_t a) const {
  // Extended Euclid (q need not be prime).
  int64_t old_r = static_cast<int64_t>(Reduce(a)), r = static_cast<int64_t>(q_);
  int64_t old_s = 1, s = 0;
  while (r != 0) {
    const int64_t quot = old_r / r;
    std::swap(old_r, r);
    r -= quot * old_r;
    std::swap(old_s, s);
    s -= quot * old_s;
  }
  if (old_r != 1) {
    return absl::InvalidArgumentError(absl::StrCat(a, " has no inverse modulo ", q_));
  }
  return FromSigned(old_s);
}

namespace {

uint64_t MulModSlow(uint64_t a, uint64_t b, uint64_t n) {
  return static_cast<uint64_t>(static_cast<uint128_t>(a) * b % n);
}

uint64_t PowModSlow(uint64_t a, uint64_t e, uint64_t n) {
  uint64_t r = 1 % n;
  a %= n;
  while (e) {
    if (e & 1) r = MulModSlow(r, a, n);
    a = MulModSlow(a, a, n);
    e >>= 1;
  }
  return r;
}

bool IsPowerOfTwo(uint64_t x) { return x >= 2 && (x & (x - 1)) == 0; }

}  // namespace

bool IsPrime(uint64_t n) {
  static constexpr uint64_t kBases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  if (n < 2) return false;
  for (uint64_t p : kBases) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while (d % 2 == 0) {
    d /= 2;
    ++s;
  }
  for (uint64_t a : kBases) {
    uint64_t x = PowModSlow(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = MulModSlow(x, x, n);
      composite = x != n - 1;
    }
    if (composite) return false;
  }
  return true;
}

absl::StatusOr<std::vector<uint64_t>> GenerateNttPrimes(int bits, uint64_t two_n, int count,
                                                        const std::vector<uint64_t>& exclude) {
  if (bits < 2 || bits > kMaxModulusBits) {
    return absl::InvalidArgumentError(
        absl::StrCat("prime bits must be in [2, ", kMaxModulusBits, "], got ", bits));
  }
  if (!IsPowerOfTwo(two_n)) {
    return absl::InvalidArgumentError(absl::StrCat("2N = ", two_n, " is not a power of two"));
  }
  std::vector<uint64_t> primes;
  const uint64_t limit = uint64_t{1} << bits;
  // Largest candidate = 1 mod two_n below 2^bits; candidates stay above 2^(bits-1).
  for (uint64_t c = ((limit - 1) / two_n) * two_n + 1;
       c > limit / 2 && c > two_n && static_cast<int>(primes.size()) < count; c -= two_n) {
    if (c < limit && IsPrime(c) && std::find(exclude.begin(), exclude.end(), c) == exclude.end()) {
      primes.push_back(c);
    }
  }
  if (static_cast<int>(primes.size()) < count) {
    return absl::NotFoundError(absl::StrCat("only ", primes.size(), " primes of ", bits,
                                            " bits are 1 mod ", two_n, "; ", count, " wanted"));
  }
  return primes;
}

absl::StatusOr<uint64_t> MinimalPrimitiveRoot(uint64_t two_n, const Modulus& q) {
  const uint64_t p = q.value();
  if (!IsPowerOfTwo(two_n) || !IsPrime(p) || (p - 1) % two_n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, " is not a prime = 1 mod ", two_n, " (2N must be a power of two)"));
  }
  // g = x^((p-1)/2N) has order dividing 2N; it is primitive iff g^N = -1.
  uint64_t root = 0;
  for (uint64_t x = 2; root == 0 && x < p; ++x) {
    const uint64_t g = q.Pow(x, (p - 1) / two_n);
    if (q.Pow(g, two_n / 2) == p - 1) root = g;
  }
  // The primitive 2N-th roots are the odd powers of one of them.
  const uint64_t square = q.Mul(root, root);
  uint64_t best = root;
  for (uint64_t r = root, i = 1; i < two_n / 2; ++i) {
    r = q.Mul(r, square);
    best = std::min(best, r);
  }
  return best;
}

uint32_t ReverseBits(uint32_t x, int bits) {
  uint32_t r = 0;
  for (int i = 0; i < bits; ++i, x >>= 1) r = (r << 1) | (x & 1);
  return r;
}

}  // namespace veil::he
