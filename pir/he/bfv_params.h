// BFV parameters (Brakerski, "Fully homomorphic encryption without modulus switching", CRYPTO
// 2012; Fan and Vercauteren, ePrint 2012/144) in RNS form: ring Z[X] / (X^N + 1), ciphertext
// modulus Q = q_0 ... q_{k-1}, one special prime P for hybrid key switching (keys live modulo QP),
// plaintext modulus t = 1 mod 2N (batching: N slots).
//
// Standard sets: SEAL's default 128-bit coefficient moduli (native/src/seal/util/globals.cpp), the
// last prime of each list being the special prime, as in SEAL. Their security source is the
// HomomorphicEncryption.org standard (Albrecht et al., "Homomorphic Encryption Security
// Standard", 2018), Table 1, 128-bit classical security, ternary (uniform) secret, error
// sigma ~ 3.2: log2(QP) <= 109 / 218 / 438 for N = 4096 / 8192 / 16384.
//   N = 4096:  Q = 0xffffee001 * 0xffffc4001 (72 bits), P = 0x1ffffe0001; QP 109 bits.
//   N = 8192:  Q = 0x7fffffd8001 * 0x7fffffc8001 * 0xfffffffc001 * 0xffffff6c001 (174 bits),
//              P = 0xfffffebc001; QP 218 bits.
//   N = 16384: Q = 3 x 48-bit and 5 x 49-bit primes (389 bits), P = 0x1ffffffe48001; QP 438 bits.
#ifndef VEIL_PIR_HE_BFV_PARAMS_H_
#define VEIL_PIR_HE_BFV_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace veil::he {

struct BfvParams {
  int log_n = 0;
  std::vector<uint64_t> q;  // ciphertext primes
  uint64_t special = 0;     // P
  uint64_t t = 0;

  size_t n() const { return size_t{1} << log_n; }

  // Validates: log_n in [2, 16]; 1 to 15 ciphertext primes; every prime (q_i, P, t) a prime
  // = 1 mod 2N below 2^62, all distinct; t below 2^61. Returns INVALID_ARGUMENT naming the
  // first violation.
  static absl::StatusOr<BfvParams> Create(int log_n, std::vector<uint64_t> q, uint64_t special,
                                          uint64_t t);
  // SEAL's default 128-bit set for N = 2^log_n (log_n 12, 13 or 14) with t the largest prime
  // = 1 mod 2N below 2^plain_bits. Returns INVALID_ARGUMENT for another N or plain_bits outside
  // [17, 60] (NOT_FOUND if no such t exists).
  static absl::StatusOr<BfvParams> Standard(int log_n, int plain_bits);

  // Identity of the parameters: the first 8 bytes (little-endian) of BLAKE2b over a canonical
  // encoding of (log_n, q, special, t). Every key, plaintext and ciphertext carries it.
  uint64_t Id() const;
  // The security source of a Standard set ("HomomorphicEncryption.org standard, Table 1, ...")
  // or "custom parameters: no security claim".
  std::string SecuritySource() const;
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_BFV_PARAMS_H_
