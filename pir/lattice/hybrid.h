// The hybrid protocol's selection, "lwe-hybrid" below the sockets (issue 15, after VIPIR's hybrid
// of scalar folding and RGSW folding): ExpPack(S) (pack_simple.h) packs SimplePIR's D1-word
// answer into c = ceil(D1 / N) RLWE ciphertexts, of which a record touches only the w of a
// window; the client sends RGSW ciphertexts (pir/he/rgsw.h) of the bits of the window's first
// group, and the server selects the window with CMux trees over the packed ciphertexts before
// switching them to the response modulus: w ciphertexts down instead of c.
//
//   window  w = 1 when R divides N (records never straddle a group), R / N when N divides R,
//           else ceil(R / N) + 1; at most c. The window's first group for record row (slot t,
//           rows [t R, (t + 1) R)) is min(floor(t R / N), c - w): G = c - w + 1 starts, sent
//           as b = ceil(log2 G) RGSW bits (LSB first), HybridSelectionBytes.
//   server  for each j < w a CMux tree over the packed ciphertexts j .. j + G - 1 (padded to
//           2^b with the last; a pair of equal leaves needs no CMux): (2^b - 1) w external
//           products at most.
//   client  the w ciphertexts hold rows [start N, (start + w) N) of the column.
//
// Noise: every level adds one external product's (he::ExternalProductVariance) to the packed
// ciphertext's, whose noise it carries unchanged (HybridNoiseBound).
//
// What it costs, against ExpPack(S) on the same shape: b RGSW ciphertexts up
// (2 x 167,456 B each at the default ring) to save c - w ciphertexts of 32 KiB down, so it moves
// fewer bytes only when (c - w) 32,768 > b 334,912, i.e. c above ~50 (docs/lattice.md).
#ifndef VEIL_PIR_LATTICE_HYBRID_H_
#define VEIL_PIR_LATTICE_HYBRID_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/rgsw.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/shape.h"

namespace veil::lattice {

struct HybridWindow {
  uint64_t groups = 0;  // c
  uint64_t window = 0;  // w
  uint64_t starts = 0;  // G = c - w + 1
  uint32_t bits = 0;    // b = ceil(log2 G)

  // The first group of the window that holds `row`'s record (row < shape.rows).
  uint64_t StartOf(const RingContext& ring, const Shape& shape, uint64_t row) const;
};

HybridWindow HybridWindowFor(const RingContext& ring, const Shape& shape);

// Bytes of the selection (b RGSW ciphertexts, he::RgswCiphertextsBytes) and of the response
// (w switched ciphertexts). Need a ring with a special prime (ring.expansion()).
uint64_t HybridSelectionBytes(const RingContext& ring, const Shape& shape);
uint64_t HybridResponseBytes(const RingContext& ring, const Shape& shape);

// The client: RGSW ciphertexts of start's b bits under `key` (the session's secret over QP),
// serialized. Constant time in start. Returns INVALID_ARGUMENT if start >= window.starts.
absl::StatusOr<std::vector<uint8_t>> MakeHybridSelection(const RingContext& ring,
                                                         const he::SecretKey& key,
                                                         const HybridWindow& window,
                                                         uint64_t start);

// The server: the selection's ciphertexts, checked. Returns he::ParseRgswCiphertexts' errors and
// INVALID_ARGUMENT for a count other than window.bits.
absl::StatusOr<std::vector<he::RgswCiphertext>> ParseHybridSelection(
    const RingContext& ring, const HybridWindow& window, absl::Span<const uint8_t> bytes);

// Packed ciphertexts 0 .. c - 1 (NTT form over Q) narrowed to the window the bits select:
// window.window ciphertexts. Returns INVALID_ARGUMENT for another count of either.
absl::StatusOr<std::vector<RlweCiphertext>> SelectWindow(const RingContext& ring,
                                                         const HybridWindow& window,
                                                         absl::Span<const RlweCiphertext> packed,
                                                         absl::Span<const he::RgswCiphertext> bits);

// ExpPackNoiseBound with b levels of external products added; its rule is ExpPack's (on sigma).
PackingNoise HybridNoiseBound(const RingContext& ctx, uint32_t lwe_n, uint32_t bits);
bool HybridNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n, uint32_t bits);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_HYBRID_H_
