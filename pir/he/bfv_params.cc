#include "pir/he/bfv_params.h"

#include <sodium.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pir/he/modarith.h"
#include "pir/he/rns.h"

namespace veil::he {
namespace {

struct StandardSet {
  int log_n;
  int max_qp_bits;               // HomomorphicEncryption.org standard, Table 1, 128-bit classical
  std::vector<uint64_t> primes;  // SEAL's list; the last one is the special prime
};

const std::vector<StandardSet>& StandardSets() {
  static const std::vector<StandardSet> sets = {
      {12, 109, {0xffffee001, 0xffffc4001, 0x1ffffe0001}},
      {13, 218, {0x7fffffd8001, 0x7fffffc8001, 0xfffffffc001, 0xffffff6c001, 0xfffffebc001}},
      {14,
       438,
       {0xfffffffd8001, 0xfffffffa0001, 0xfffffff00001, 0x1fffffff68001, 0x1fffffff50001,
        0x1ffffffee8001, 0x1ffffffea0001, 0x1ffffffe88001, 0x1ffffffe48001}},
  };
  return sets;
}

absl::Status CheckPrime(const char* what, uint64_t p, uint64_t two_n) {
  if (p >= (uint64_t{1} << kMaxModulusBits) || !IsPrime(p) || p % two_n != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", p, " is not a prime = 1 mod ", two_n,
                                                   " below 2^", kMaxModulusBits));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BfvParams> BfvParams::Create(int log_n, std::vector<uint64_t> q, uint64_t special,
                                            uint64_t t) {
  if (log_n < 2 || log_n > 16) {
    return absl::InvalidArgumentError(absl::StrCat("log2 N must be in [2, 16], got ", log_n));
  }
  if (q.empty() || q.size() >= kMaxRnsPrimes) {
    return absl::InvalidArgumentError(absl::StrCat("the ciphertext modulus needs 1 to ",
                                                   kMaxRnsPrimes - 1, " primes, got ", q.size()));
  }
  const uint64_t two_n = uint64_t{2} << log_n;
  std::vector<uint64_t> all = q;
  all.push_back(special);
  all.push_back(t);
  for (size_t i = 0; i < all.size(); ++i) {
    const char* what = i < q.size()    ? "ciphertext prime"
                       : i == q.size() ? "special prime"
                                       : "plaintext modulus";
    if (absl::Status s = CheckPrime(what, all[i], two_n); !s.ok()) return s;
    if (std::count(all.begin(), all.end(), all[i]) > 1) {
      return absl::InvalidArgumentError(absl::StrCat("prime ", all[i], " appears twice"));
    }
  }
  if (t >= (uint64_t{1} << 61)) {
    return absl::InvalidArgumentError(absl::StrCat("plaintext modulus ", t, " is not below 2^61"));
  }
  return BfvParams{log_n, std::move(q), special, t};
}

absl::StatusOr<BfvParams> BfvParams::Standard(int log_n, int plain_bits) {
  const auto& sets = StandardSets();
  auto it = std::find_if(sets.begin(), sets.end(),
                         [&](const StandardSet& s) { return s.log_n == log_n; });
  if (it == sets.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("standard BFV sets exist for N = 4096, 8192, 16384, not 2^", log_n));
  }
  if (plain_bits < 17 || plain_bits > 60) {
    return absl::InvalidArgumentError(
        absl::StrCat("plaintext bits must be in [17, 60], got ", plain_bits));
  }
  absl::StatusOr<std::vector<uint64_t>> t =
      GenerateNttPrimes(plain_bits, uint64_t{2} << log_n, 1, it->primes);
  if (!t.ok()) return t.status();
  std::vector<uint64_t> q(it->primes.begin(), it->primes.end() - 1);
  return Create(log_n, std::move(q), it->primes.back(), (*t)[0]);
}

uint64_t BfvParams::Id() const {
  std::vector<uint64_t> words = {0x7665696c2d626676ULL /* "veil-bfv" */, uint64_t(log_n), q.size(),
                                 special, t};
  words.insert(words.end(), q.begin(), q.end());
  std::vector<uint8_t> bytes;
  for (uint64_t w : words) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(w >> (8 * i)));
  }
  uint8_t hash[crypto_generichash_BYTES_MIN];
  crypto_generichash(hash, sizeof hash, bytes.data(), bytes.size(), nullptr, 0);
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id |= uint64_t{hash[i]} << (8 * i);
  return id;
}

std::string BfvParams::SecuritySource() const {
  for (const StandardSet& s : StandardSets()) {
    std::vector<uint64_t> primes = q;
    primes.push_back(special);
    if (s.log_n == log_n && s.primes == primes) {
      return absl::StrCat(
          "HomomorphicEncryption.org standard (2018), Table 1: 128-bit classical "
          "security for N = ",
          n(), " with log2(QP) <= ", s.max_qp_bits,
          " (ternary secret, sigma 3.2); SEAL's default coefficient modulus");
    }
  }
  return "custom parameters: no security claim";
}

}  // namespace veil::he
