// The hybrid protocol's selection, "lwe-hybrid" below the sockets (issue 15, after VIPIR's hybrid
// of scalar folding and RGSW folding): ExpPack(S) (pack_simple.h) packs SimplePIR's D1-word
// answer into c = ceil(D1 / N) RLWE ciphertexts, of which a record touches only the w of a
// window; the client sends the bits of the window's first group inside one RLWE ciphertext, the
// server turns them into RGSW ciphertexts (pir/he/rgsw.h's QRgswCiphertext) and selects the
// window with CMux trees over the packed ciphertexts before switching them to the response
// modulus: w ciphertexts down instead of c.
//
//   window  w = 1 when R divides N (records never straddle a group), R / N when N divides R,
//           else ceil(R / N) + 1; at most c. The window's first group for record row (slot t,
//           rows [t R, (t + 1) R)) is min(floor(t R / N), c - w): G = c - w + 1 starts, as
//           b = ceil(log2 G) bits (LSB first).
//   client  one ciphertext as the expansion's (expansion.h, SecretCiphertextBytes; none when
//           b = 0) whose coefficient b' k + i holds bit b' of the start times the gadget's g_i,
//           i.e. the bit in residue row i and 0 in the others, times 2^-L' (L' =
//           ExpansionLevels(k b)); its session keys are the expansion's and one conversion key
//           from z^2 to z (HybridKeyBytes).
//   server  expands it with the session's expansion keys (their first L' levels) into k b RLWE
//           ciphertexts of bit g_i, converts each bit's k to RGSW with the conversion key
//           (he::ConvertToRgsw: k key switches), and for each j < w runs a CMux tree over the
//           packed ciphertexts j .. j + G - 1 (padded to 2^b with the last; a pair of equal
//           leaves needs no CMux): (2^b - 1) w external products at most.
//   client  the w ciphertexts hold rows [start N, (start + w) N) of the column.
//
// Noise: every level adds one external product's (he::QRgswProductVariance of the expanded
// parts' variance and their conversion's) to the packed ciphertext's, whose noise it carries
// unchanged (HybridNoiseBound).
//
// What it costs, against ExpPack(S) on the same shape: 49,184 B more up per lookup (one seeded
// ciphertext) and 167,468 B more keys per session, to save c - w ciphertexts of 32 KiB down.
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

// lwe-hybrid's session keys: the expansion's Galois keys (MakeExpansionKeys for kLweDimension)
// followed by the conversion key (he::SerializeRelinKey: from z^2 to z); parsed, the conversion
// key sits with the Galois keys under kConversionKeyElement, which no automorphism has (they
// are odd), so that a session's keys stay one he::GaloisKeys.
inline constexpr uint32_t kConversionKeyElement = 0;
uint64_t HybridKeyBytes(const RingContext& ring);
absl::StatusOr<std::vector<uint8_t>> MakeHybridKeys(const RingContext& ring,
                                                    const he::SecretKey& key);
// ParseExpansionKeys' and he::ParseRelinKey's errors; INVALID_ARGUMENT for another size.
absl::StatusOr<he::GaloisKeys> ParseHybridKeys(const RingContext& ring,
                                               absl::Span<const uint8_t> bytes);

// Bytes of the selection (one expansion ciphertext, or none when b = 0) and of the response
// (w switched ciphertexts). Need a ring with a special prime (ring.expansion()).
uint64_t HybridSelectionBytes(const RingContext& ring, const Shape& shape);
uint64_t HybridResponseBytes(const RingContext& ring, const Shape& shape);

// The client: the ciphertext of start's b bits under z. Constant time in start. Returns
// INVALID_ARGUMENT if start >= window.starts or k b exceeds N. It is the two steps below.
absl::StatusOr<std::vector<uint8_t>> MakeHybridSelection(const RingContext& ring,
                                                         const RlweSecret& z,
                                                         const HybridWindow& window,
                                                         uint64_t start);
// Its row-free part, made ahead: an encryption of zero under z, the selection's size (empty
// when b = 0). Returns INVALID_ARGUMENT if k b exceeds N.
absl::StatusOr<std::vector<uint8_t>> PrepareHybridSelection(const RingContext& ring,
                                                            const RlweSecret& z,
                                                            const HybridWindow& window);
// Adds start's bits to a selection PrepareHybridSelection made (the encryption is linear in its
// message: one NTT of the bits and a pass over every residue, constant time in start). Returns
// INVALID_ARGUMENT if start >= window.starts, k b exceeds N or the selection has another size.
absl::Status AddHybridSelection(const RingContext& ring, const HybridWindow& window, uint64_t start,
                                absl::Span<uint8_t> selection);

// The server: the selection's RGSW bits, from its ciphertext and the session's keys
// (ParseHybridKeys), on up to `threads` threads (the expansion's subtrees, then one bit's
// conversion each). Returns ExpandLweSecret's errors (a ciphertext of another size or a residue
// not below its prime), INVALID_ARGUMENT for a selection when b = 0 or threads < 1 and
// FAILED_PRECONDITION for keys without the conversion key.
absl::StatusOr<std::vector<he::QRgswCiphertext>> ExpandHybridSelection(
    const RingContext& ring, const HybridWindow& window, const he::GaloisKeys& keys,
    absl::Span<const uint8_t> bytes, int threads = 1);

// Packed ciphertexts 0 .. c - 1 (NTT form over Q) narrowed to the window the bits select:
// window.window ciphertexts, each tree level's CMuxes spread over up to `threads` threads (the
// same bits whatever the count). Returns INVALID_ARGUMENT for another count of either, or
// threads < 1.
absl::StatusOr<std::vector<RlweCiphertext>> SelectWindow(const RingContext& ring,
                                                         const HybridWindow& window,
                                                         absl::Span<const RlweCiphertext> packed,
                                                         absl::Span<const he::QRgswCiphertext> bits,
                                                         int threads = 1);

// ExpPackNoiseBound with b levels of external products added (he::QRgswProductVariance of parts
// with ExpandedKeyVariance(k b) and their conversion's); its rule is ExpPack's (on sigma).
PackingNoise HybridNoiseBound(const RingContext& ctx, uint32_t lwe_n, uint32_t bits);
bool HybridNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n, uint32_t bits);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_HYBRID_H_
