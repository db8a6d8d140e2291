// DPF keys (BGI16 tree DPF with early termination): generation, compact wire format, validation.
//
// Wire format, version 2 (all integers little-endian):
//   0  'V' 'D'                magic
//   2  version                2
//   3  prg                    Prg
//   4  log_domain             1 .. kMaxLogDomain
//   5  output                 low nibble: OutputType; high nibble: log2(W) (additive only, else 0)
//   6  party                  0 or 1
//   7  root seed              16 bytes; its lowest bit is the root control bit and equals party
//  23  correction seeds       levels x 16 bytes; bit 0 of each holds the left control-bit correction
//      right control bits     ceil(levels / 8) bytes, level i at bit (i % 8) of byte i / 8
//      final correction word  4 * leaf_block_words bytes
// At log_domain 20 with W = 16 a key is 7 + 16 + 16 * 16 + 2 + 64 = 345 bytes.
// Version 1 had the same layout but keyed ChaCha with s || s and the 256-bit-key constants: its
// ChaCha keys evaluate to other values today, so version 1 is rejected rather than misread.
#ifndef VEIL_DPF_KEY_H_
#define VEIL_DPF_KEY_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/block.h"
#include "dpf/params.h"

namespace veil::dpf {

inline constexpr uint8_t kKeyMagic0 = 'V';
inline constexpr uint8_t kKeyMagic1 = 'D';
inline constexpr uint8_t kKeyVersion = 2;
inline constexpr size_t kKeyHeaderBytes = 7;

namespace internal {
class KeyGenerator;  // key.cc: the constant-time construction of a key pair from two root seeds
}  // namespace internal

// One party's key. Secret: every buffer it drops is wiped first. Destruction and assignment wipe
// the key's old contents before they are freed or overwritten; a moved-from key is wiped and left
// as a default-constructed one.
class DpfKey {
 public:
  DpfKey() = default;
  DpfKey(const DpfKey&) = default;
  DpfKey& operator=(const DpfKey& other);
  DpfKey(DpfKey&& other) noexcept;
  DpfKey& operator=(DpfKey&& other) noexcept;
  ~DpfKey();

  // Parses and fully validates a serialized key. Returns INVALID_ARGUMENT, with a message naming
  // the problem, for truncated or over-long input, wrong magic or version, an unknown PRG or output
  // type, a log domain out of range, a bad party, or a root control bit that contradicts the party.
  static absl::StatusOr<DpfKey> Parse(absl::Span<const uint8_t> bytes);
  std::vector<uint8_t> Serialize() const;
  // Size of the serialized key for these parameters.
  static size_t SerializedSize(const DpfParameters& params);

  const DpfParameters& params() const { return params_; }
  int party() const { return party_; }
  Block root() const { return root_; }
  // Level i's correction: seed with the left control-bit correction in bit 0.
  const std::vector<Block>& cw_seed() const { return cw_seed_; }
  // Level i's right control-bit correction (0 or 1).
  const std::vector<uint8_t>& cw_right() const { return cw_right_; }
  // Final correction word: leaf_block_words() words.
  absl::Span<const uint32_t> final_cw() const {
    return absl::MakeConstSpan(final_cw_.data(), params_.leaf_block_words());
  }

 private:
  friend class internal::KeyGenerator;
  // Wipes every secret byte and empties the key (as default-constructed).
  void Clear();

  DpfParameters params_;
  int party_ = 0;
  Block root_;
  std::vector<Block> cw_seed_;
  std::vector<uint8_t> cw_right_;
  std::array<uint32_t, 16> final_cw_{};
};

// Splits the point function f(alpha) = beta (0 elsewhere) into two keys. For additive output the
// shares add to beta at alpha; for XOR output beta must be 1 and the shares XOR to the indicator.
// The root seeds come from libsodium's randombytes_buf (the system CSPRNG): callers cannot supply
// randomness. (Tests and benchmarks get reproducible keys from dpf/testing/seeded_keys.h, target
// veil_dpf_testing, which production targets never link.) Constant time in alpha, beta and the
// seeds: no branch or memory index depends on them.
// Returns INVALID_ARGUMENT for bad parameters, alpha outside the domain, or beta != 1 with XOR.
absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeys(const DpfParameters& params, uint64_t alpha,
                                                      uint32_t beta);

}  // namespace veil::dpf

#endif  // VEIL_DPF_KEY_H_
