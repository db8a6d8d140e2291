// Parameters of the single-server LWE protocols (SimplePIR and DoublePIR) and their correctness
// rule.
//
// LWE (Regev) over Z_q, q = 2^32 (native uint32 wrap-around), secret dimension n = 1024, error a
// discrete Gaussian with rho(x) = exp(-x^2 / (2 sigma^2)), sigma = 6.4: the parameter set that
// SimplePIR analyses for 128-bit security (Henzinger, Hong, Corrigan-Gibbs, Meiklejohn,
// Vaikuntanathan, "One Server for the Price of Two: Simple and Fast Single-Server Private
// Information Retrieval", USENIX Security 2023, Section 4.2 and Appendix C, estimated with the
// lattice estimator of Albrecht et al.; its source's pir/params.csv lists n = 2^10, log q = 32,
// sigma = 6.4 for every database width up to 2^21 samples). The security holds for at most
// 2^21 LWE samples under one secret: every query uses a fresh secret, and no matrix here has
// more than kMaxSamples rows.
//
// Plaintexts are Z_p with p = 2^8 (VIPIR's choice): one table byte is one database element, and
// the server's product is INT8 x INT32 mod 2^32.
#ifndef VEIL_PIR_LATTICE_PARAMS_H_
#define VEIL_PIR_LATTICE_PARAMS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace veil::lattice {

// Wire identifiers: never renumber.
enum class Protocol : uint8_t {
  kSimplePir = 1,  // query D0 words, answer D1 words, hint D1 x n words
  kDoublePir = 2,  // SimplePIR folded once more over its own answer and hint (smaller hint)
};

// "simple" or "double".
std::string_view ProtocolName(Protocol protocol);
// Accepts "simple", "double", "lwe-simple", "lwe-double". Returns INVALID_ARGUMENT otherwise.
absl::StatusOr<Protocol> ParseProtocol(std::string_view name);

inline constexpr uint32_t kLweDimension = 1024;  // n
inline constexpr int kLogModulus = 32;           // q = 2^32
inline constexpr double kErrorSigma = 6.4;       // sigma of the discrete Gaussian error
// Largest number of LWE samples one secret may be used with (SimplePIR's analysed range).
inline constexpr uint64_t kMaxSamples = uint64_t{1} << 21;
// Probability bound with which one lookup may fail (SimplePIR's delta).
inline constexpr double kLog2FailureBound = -40;
inline constexpr uint32_t kPlaintextModulus = 256;     // p
inline constexpr uint32_t kDelta = uint32_t{1} << 24;  // floor(q / p) for p = 2^8
// Base-p digits of one Z_q word (kappa): 4 bytes.
inline constexpr uint32_t kDigitsPerWord = 4;

// THE correctness rule (SimplePIR, Section 4.2): the decryption error of one Z_p element is the
// inner product of a database row (entries in [-p/2, p/2)) with the m-sample Gaussian error, a
// subgaussian of parameter sigma * (p/2) * sqrt(m); rounding succeeds when it stays below
// Delta / 2, which fails with probability at most delta' when
//     floor(q / p) >= sqrt(2) * sigma * p * sqrt(m) * sqrt(ln(2 / delta')).
// `decryptions` Z_p decryptions must all succeed: by the union bound each gets
// delta' = 2^-40 / decryptions, so that together they fail with probability at most 2^-40.
// Returns whether the rule holds for plaintext modulus p, width m and that many decryptions.
bool CorrectnessHolds(uint32_t p, uint64_t m, uint64_t decryptions);

// Z_p decryptions one database element costs: 1 for SimplePIR; for DoublePIR the (n + 1) * kappa
// second-level digits of the element's hint row and answer word (kappa = ceil(32 / log2 p)), then
// the first-level element itself.
uint64_t DecryptionsPerElement(Protocol protocol, uint32_t p);

// Largest p in [2, 2^16] for which CorrectnessHolds(p, m, elements * DecryptionsPerElement(p));
// 0 if none.
uint32_t LargestPlaintextModulus(Protocol protocol, uint64_t m, uint64_t elements = 1);

// Largest width m (at most 2^40) for which CorrectnessHolds(p, m, elements *
// DecryptionsPerElement(protocol, p)); 0 if none.
uint64_t LargestWidth(Protocol protocol, uint32_t p, uint64_t elements = 1);

// The bound of the rule on the probability that one of `decryptions` decryptions fails at width
// m and modulus p, as log2: log2(decryptions * 2 * exp(-floor(q/p)^2 / (2 p^2 sigma^2 m))).
double Log2FailureBound(uint32_t p, uint64_t m, uint64_t decryptions);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_PARAMS_H_
