// Public parameters of a DPF key: PRG, domain size and output group.
#ifndef VEIL_DPF_PARAMS_H_
#define VEIL_DPF_PARAMS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace veil::dpf {

// Wire identifiers: never renumber.
enum class Prg : uint8_t {
  kAes128 = 1,    // fixed-key AES-128 in sigma-MMO form (default)
  kChaCha8 = 2,   // ChaCha with the seed as key, 8 rounds
  kChaCha12 = 3,  // 12 rounds
  kChaCha20 = 4,  // 20 rounds
  kSipHash = 5,   // SipHash-2-4 keyed by the seed: fastest, least analysed as a PRG; never default
};

enum class OutputType : uint8_t {
  kAdditive = 1,  // Z_2^32, leaf blocks of W words, weight beta at alpha; shares add up
  kXor = 2,       // one bit per point, 128-bit leaf blocks; shares XOR to the indicator of alpha
};

inline constexpr int kMaxLogDomain = 40;     // 2^40 points: far beyond any table we serve
inline constexpr int kMaxLeafWordsLog2 = 4;  // W <= 16 words per additive leaf
inline constexpr int kXorLeafBitsLog2 = 7;   // 128 points per XOR leaf block

struct DpfParameters {
  int log_domain = 20;
  Prg prg = Prg::kAes128;
  OutputType output = OutputType::kAdditive;
  int leaf_words_log2 = 4;  // additive only: W = 2^leaf_words_log2 (16 by default)

  // Points covered by one leaf block (W for additive, 128 for XOR).
  int leaf_points_log2() const {
    return output == OutputType::kXor ? kXorLeafBitsLog2 : leaf_words_log2;
  }
  // 32-bit words in a leaf block (W for additive, 4 for XOR).
  int leaf_block_words() const { return output == OutputType::kXor ? 4 : 1 << leaf_words_log2; }
  // Tree levels below the root: early termination saves leaf_points_log2() levels.
  int levels() const {
    int l = log_domain - leaf_points_log2();
    return l > 0 ? l : 0;
  }
  uint64_t domain_size() const { return uint64_t{1} << log_domain; }
};

// Returns INVALID_ARGUMENT naming the bad field if the parameters are out of range.
absl::Status ValidateParameters(const DpfParameters& params);

// Smallest log domain that covers `rows` points (at least 1).
int LogDomainForRows(uint64_t rows);

// Checks that keys of `params` select among `rows` rows: their log domain must be
// LogDomainForRows(rows). Returns INVALID_ARGUMENT naming the mismatch otherwise. The one place
// this rule is checked: by EvalDot before any work, and by servers when a call arrives.
absl::Status CheckDomainFitsRows(const DpfParameters& params, uint64_t rows);

std::string_view PrgName(Prg prg);
// Parses "aes128", "chacha8", "chacha12", "chacha20", "siphash".
absl::StatusOr<Prg> ParsePrg(std::string_view name);
// "add16" (W = 16; also add1 .. add8) or "xor".
absl::StatusOr<DpfParameters> ParseOutput(std::string_view name, DpfParameters base);
std::string OutputName(const DpfParameters& params);

}  // namespace veil::dpf

#endif  // VEIL_DPF_PARAMS_H_
