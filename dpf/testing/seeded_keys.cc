#include "dpf/testing/seeded_keys.h"

#include <sodium.h>

#include <cstring>

#include "dpf/internal/key_generation.h"

namespace veil::dpf {

SeededRandomForTesting::SeededRandomForTesting(uint64_t seed) {
  for (int i = 0; i < 8; ++i) key_[i] = static_cast<uint8_t>(seed >> (8 * i));
}

SeededRandomForTesting::~SeededRandomForTesting() { sodium_memzero(key_.data(), key_.size()); }

void SeededRandomForTesting::Fill(absl::Span<uint8_t> out) {
  uint8_t nonce[crypto_stream_chacha20_NONCEBYTES] = {};
  std::memcpy(nonce, &nonce_, sizeof(nonce_));
  ++nonce_;
  crypto_stream_chacha20(out.data(), out.size(), nonce, key_.data());
}

absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeys(const DpfParameters& params, uint64_t alpha,
                                                      uint32_t beta, SeededRandomForTesting& rng) {
  Block roots[2];
  for (Block& root : roots) rng.Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(&root), 16));
  auto keys = internal::GenerateKeysFromRoots(params, alpha, beta, roots);
  sodium_memzero(roots, sizeof(roots));
  return keys;
}

}  // namespace veil::dpf
