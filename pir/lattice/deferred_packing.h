// ExpPack's packing sums with the expansion's bottom levels folded into the matrix: the CPU's
// packing engine (CpuPackingEngine, packed.h) does 2^(L-D) - 1 + G (2^D - 1) key switches per
// query instead of the full expansion's 2^L - 1 (G the matrix's groups: 153 instead of 1,023 at
// n = 1,024, D = 4 and 2^24 x 64 B), the G (2^D - 1) without their ModDown but one per group.
//
// Below a node R of level L - D the expansion forms no ciphertext that the packing needs other
// than through linear maps: each step is c + g(c) or (c - g(c)) X^{-2^l}, so the leaf K_j under R
// (j = r + t 2^(L-D), t < 2^D) is sum_s c_{t,s} sigma_s(R), with sigma_s the product of the
// deferred levels' elements over the bits of s (DeferredElement) and c_{t,s} a signed monomial
// that depends on t and s only. A group's packing sum is then
//     sum_j A_j K_j = sum_s sigma_s( sum_r W'_{r,s} R_r ),  W'_{r,s} = sigma_s^-1(sum_t A_j
//     c_{t,s}),
// so the server expands only the top L - D levels, sums the 2^(L-D) nodes against the folded
// polynomials W' (G 2^D virtual groups: the same multiply-adds as the full expansion's leaves, but
// over all 2^(L-D) roots at once, with W' stored in the order the sums read it), and key-switches
// each virtual group's sum but s = 0 once with the key of sigma_s, summing a group's 2^D - 1
// switched sums over QP and rounding them to Q once (he::internal::RotateBeforeModDown). The
// switches add their keys' error to the packed ciphertext directly instead of through the A_j,
// and one rounding for all: less noise (ExpPackNoiseBound with deferred levels). The session keys
// hold the products' keys (ExpansionElements).
#ifndef VEIL_PIR_LATTICE_DEFERRED_PACKING_H_
#define VEIL_PIR_LATTICE_DEFERRED_PACKING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/he/huge_pages.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"

namespace veil::lattice {

// The levels an engine asked to defer `levels` defers for a matrix of n = lwe_n: min(levels,
// kDeferredLevels, L), and 0 for n above N (which every Sums refuses).
uint32_t EngineDeferredLevels(const RingContext& ctx, uint32_t lwe_n, uint32_t levels);

namespace internal {
// The spans of a batch of sums (SumsBatch's: DeferredPacking's and PackingEngine's) in step and
// threads >= 1, else INVALID_ARGUMENT naming the sizes.
absl::Status CheckSumsBatch(size_t keys, size_t ciphertexts, size_t sums, int threads);
}  // namespace internal

class DeferredPacking {
 public:
  // The folded matrix of `matrix` (ring and matrix must outlive the result) with D =
  // min(levels, L) levels deferred, built on up to `threads` threads (G 2^(2D) n / 2^D polynomial
  // multiply-adds; the memory of the matrix again). Returns INVALID_ARGUMENT for a matrix whose
  // n is above N, threads < 1, or levels 0 or above kDeferredLevels (the keys hold no more
  // products).
  static absl::StatusOr<DeferredPacking> Create(const RingContext& ctx, const PackingMatrix& matrix,
                                                uint32_t levels, int threads);

  // W' in PackingMatrix's layout instead of the tiles: G 2^D groups (v = g 2^D + s) of 2^(L-D)
  // polynomials (the roots' coefficients), for an engine that sums the roots against it its own
  // way (a device's: gpu/exppack.h). Create's errors.
  static absl::StatusOr<PackingMatrix> FoldedMatrix(const RingContext& ctx,
                                                    const PackingMatrix& matrix, uint32_t levels,
                                                    int threads);

  uint32_t levels() const { return levels_; }
  // The folded matrix's bytes (the packing matrix's).
  uint64_t bytes() const { return tiles_.size() * sizeof(uint32_t); }

  // The packing sums of `ciphertext` (EncryptLweSecret for the matrix's n) under `keys` (of
  // ExpansionElements for that n), PackingSumWords(matrix) residues: PackAccumulator's layout
  // and phases, not its bits. Returns ExpandLweSecret's errors, INVALID_ARGUMENT for sums of
  // another size or keys lacking a deferred element.
  absl::Status Sums(const he::GaloisKeys& keys, absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const;
  // Several queries' Sums (keys, ciphertexts and sums in step), bit for bit, each failing alone
  // (its status in order: Sums' errors, INVALID_ARGUMENT for null keys; all INVALID_ARGUMENT for
  // spans of different lengths or threads < 1): each query expanded and switched on one of
  // `threads` workers, and the folded matrix streamed once per kBatchChunk queries (each tile
  // against every query's nodes in turn, from cache) instead of once per query.
  static constexpr size_t kBatchChunk = 8;
  std::vector<absl::Status> SumsBatch(absl::Span<const he::GaloisKeys* const> keys,
                                      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                      absl::Span<const absl::Span<uint64_t>> sums,
                                      int threads) const;

 private:
  DeferredPacking(const RingContext& ctx, const PackingMatrix& matrix, uint32_t levels,
                  he::HugePageVector<uint32_t> tiles)
      : ctx_(&ctx), matrix_(&matrix), levels_(levels), tiles_(std::move(tiles)) {}

  // sigma_s and its key for s >= 1 (entry 0 unused).
  using Switches = std::vector<std::pair<uint32_t, const he::KeySwitchKey*>>;
  // Sums' checks of its arguments (and null keys), then the elements' keys: INVALID_ARGUMENT for
  // keys lacking one.
  absl::StatusOr<Switches> CheckedSwitches(const he::GaloisKeys* keys, absl::Span<uint64_t> sums,
                                           int threads) const;
  size_t roots() const;                // 2^(L-D)
  uint64_t virtual_sum_words() const;  // G 2^D x 2 k N
  // The phases of Sums: the top levels' nodes into `nodes` (roots x 2 k N, tiled); every query's
  // virtual sums from its nodes; a query's switches and group sums.
  absl::Status ExpandNodes(const he::GaloisKeys& keys, absl::Span<const uint8_t> ciphertext,
                           int threads, uint64_t* nodes) const;
  void TilePass(absl::Span<const uint64_t* const> nodes, absl::Span<uint64_t* const> virtual_sums,
                int threads) const;
  void SwitchGroups(const Switches& switches, const uint64_t* virtual_sums, int threads,
                    absl::Span<uint64_t> sums) const;

  const RingContext* ctx_;
  const PackingMatrix* matrix_;
  uint32_t levels_;
  // W'_{r,s} of virtual group v = g 2^D + s, slot c of prime i, tiled so that the sums stream it
  // in order (he::internal::TileDotProduct): at ((i N / 8 + c / 8) V + v) R 8 + 8 r + c mod 8,
  // V = G 2^D virtual groups, R = 2^(L-D) roots.
  he::HugePageVector<uint32_t> tiles_;  // on huge pages: streamed per query
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_DEFERRED_PACKING_H_
