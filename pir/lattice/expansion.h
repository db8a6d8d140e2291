// ExpPack's expansion (issue 15): the client sends, per query, one RLWE ciphertext of its fresh
// LWE secret s instead of n packing keys (packing.h), and once per session the keys of L Galois
// automorphisms; the server expands the ciphertext into the n special ciphertexts K_j that ring
// packing needs. The technique is the query expansion of SealPIR (Angel, Chen, Laine, Setty,
// S&P 2018, Algorithm 3) that VIPIR's ExpPack applies to the packing keys.
//
//   client  S(X) = 2^-L sum_{j<n} round(Q s_j / 2^32) X^j (mod Q), L = ceil(log2 n), encrypted
//           under its RLWE secret z: one ciphertext whose c1 is expanded from a seed
//           (SecretCiphertextBytes = 32 + 4 k N: 49,184 bytes at N = 4096, k = 3);
//   keys    the Galois keys of the elements g_l = N / 2^l + 1 (l < L), hybrid key switching with
//           the special prime P of RingParams (pir/he/keyswitch.h), seeded and bit-packed by
//           he::SerializeGaloisKeys, with the products the deferred levels need (below):
//           ExpansionKeyBytes (3,516,676 bytes at n = 1024, N = 4096: 21 keys);
//   server  level l maps every ciphertext c to c + g_l(c) and (c - g_l(c)) X^{-2^l}: the
//           automorphism X -> X^{g_l} negates exactly the coefficients at odd multiples of 2^l,
//           so the first keeps the coefficients j with bit l of j clear and the second moves the
//           others down by 2^l, both doubled. After L levels leaf j holds 2^L S_j, i.e.
//           round(Q s_j / 2^32), as its constant coefficient and zero elsewhere: K_j. The leaves
//           come depth first, kPackKeysPerBlock at a time, straight into the packing sums, so a
//           worker never holds more than L levels of ciphertexts (2^L - 1 key switches in all,
//           in the NTT domain: an automorphism permutes the slots).
//
// Noise: each level doubles the noise at the coefficients the automorphism fixes (up to sign)
// and adds a key switch's; ExpandedKeyVariance follows every coefficient's variance through the
// tree. Security: the keys encrypt z(X^g) under z (the circular-security assumption of every
// rotation key) modulo QP, within the HE standard's bound for N (RingParams::SecuritySource).
#ifndef VEIL_PIR_LATTICE_EXPANSION_H_
#define VEIL_PIR_LATTICE_EXPANSION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/packing.h"
#include "pir/lattice/rlwe.h"

namespace veil::lattice {

// L = ceil(log2 n) (0 for n = 1).
uint32_t ExpansionLevels(uint32_t lwe_n);
// The CPU's packing defers the expansion's bottom D levels into its matrix (deferred_packing.h),
// D up to min(kDeferredLevels, L): it then needs the keys of the products of those levels'
// elements too. Keys for 4 levels add 11 keys (1.84 MB) to the 10; deferring D levels leaves
// 2^(L-D) - 1 + G (2^D - 1) of the 1,023 key switches per query (G the response's ciphertexts):
// 78 with D = 4 at G = 1, 153 at G = 6 (134 and 169 with D = 3).
inline constexpr uint32_t kDeferredLevels = 4;
uint32_t DeferredLevels(uint32_t lwe_n);
// The D in [1, DeferredLevels(lwe_n)] with the fewest NTTs for a matrix of `groups` groups:
// 20 per key switch of the top levels, 12 per deferred one (their ModDown is once per group, 8)
// (the smaller on a tie: its folded matrix is quicker to build); 0 for lwe_n = 1.
uint32_t BestDeferredLevels(uint32_t lwe_n, uint64_t groups);
// The product mod 2N of g_l over the bottom `deferred` levels l = L - deferred + b for the bits
// b of `mask` (deferred <= L, mask < 2^deferred; 1 for mask 0).
uint32_t DeferredElement(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred, uint32_t mask);
// The session keys' elements: g_l = N / 2^l + 1 for l < L, then DeferredElement(D, mask) for the
// masks with two bits or more, in increasing order: L + 2^D - 1 - D elements (and so the
// products for any D' <= D levels deferred).
std::vector<uint32_t> ExpansionElements(const RingContext& ctx, uint32_t lwe_n);

// Returns FAILED_PRECONDITION without a special prime (RingContext::expansion() null),
// INVALID_ARGUMENT if lwe_n is 0 or above N.
absl::Status CheckExpansion(const RingContext& ctx, uint32_t lwe_n);

// The session's expansion keys (wire form) under `key` (a secret of ctx.expansion()), fresh
// seeds and errors from libsodium. Returns CheckExpansion's and he::GenerateGaloisKeys' errors.
absl::StatusOr<std::vector<uint8_t>> MakeExpansionKeys(const RingContext& ctx,
                                                       const he::SecretKey& key, uint32_t lwe_n);
uint64_t ExpansionKeyBytes(const RingContext& ctx, uint32_t lwe_n);
// he::ParseGaloisKeys' errors, and INVALID_ARGUMENT unless the keys are of exactly the elements
// ExpansionElements names. With `host_switching` the keys come narrowed where this CPU's key
// switching reads them so (he::internal::NarrowKeySwitchKey); a device's engine reads the 64-bit
// words alone.
absl::StatusOr<he::GaloisKeys> ParseExpansionKeys(const RingContext& ctx, uint32_t lwe_n,
                                                  absl::Span<const uint8_t> bytes,
                                                  bool host_switching = true);

// One query's ciphertext of the LWE secret (lwe_n words, wiped by the caller): the 32-byte seed
// of c1, then c0 in NTT form as little-endian 32-bit residues. Constant time in the secret.
// Returns CheckExpansion's errors.
uint64_t SecretCiphertextBytes(const RingContext& ctx);
absl::StatusOr<std::vector<uint8_t>> EncryptLweSecret(const RingContext& ctx, const RlweSecret& z,
                                                      absl::Span<const uint32_t> lwe_secret);

// Receives the special ciphertexts K_index[i] for i < count (count <= kPackKeysPerBlock) in NTT
// form over Q, count x k x N residues per half (PackAccumulator::Add fits).
using SpecialSink = absl::FunctionRef<void(uint32_t count, const uint32_t* index,
                                           const uint64_t* beta, const uint64_t* alpha)>;
// The same from worker `worker` (< the threads asked for): one worker's calls never overlap,
// different workers' do (one PackAccumulator per worker, merged at the end).
using WorkerSpecialSink = absl::FunctionRef<void(int worker, uint32_t count, const uint32_t* index,
                                                 const uint64_t* beta, const uint64_t* alpha)>;

// The server: expands a ciphertext of EncryptLweSecret with keys of ParseExpansionKeys (for the
// same n) into K_0 .. K_{n-1}, each given to `sink` once, on up to `threads` threads (the
// caller's among them; the top levels run first, as many as give the fewest key switches one
// after another, then each worker takes whole subtrees). Returns CheckExpansion's errors, and
// INVALID_ARGUMENT for threads < 1, a ciphertext of another size, a residue not below its prime or
// keys lacking an element.
absl::Status ExpandLweSecret(const RingContext& ctx, const he::GaloisKeys& keys, uint32_t lwe_n,
                             absl::Span<const uint8_t> ciphertext, int threads,
                             WorkerSpecialSink sink);

// ExpandLweSecret (for the matrix's n) into one PackAccumulator of `matrix` per worker, merged
// and checked complete (every leaf once): the packing sums, PackingSumWords(matrix) residues in
// this thread's scratch (he::internal::Scratch::kPackSums), valid until its next call. Returns
// ExpandLweSecret's errors.
absl::StatusOr<absl::Span<const uint64_t>> ExpandIntoPackingSums(
    const RingContext& ctx, const he::GaloisKeys& keys, const PackingMatrix& matrix,
    absl::Span<const uint8_t> ciphertext, int threads);

// The packing sums of a matrix of scalars (double packing's A2: `rows` rows of lwe_n words, each a
// signed 32-bit value) without expanding. A leaf is K_j = T(X^{-j} c) for the root ciphertext c,
// T = prod_l (1 + g_l) over the expansion's L levels (c + g_l(c) is a level's left child, and
// (c - g_l(c)) X^{-2^l} = (1 + g_l)(X^{-2^l} c) its right one, g_l fixing the deeper levels'
// monomials), so for scalars a_j
//     sum_j a_j K_j = T(A(X) c),   A(X) = sum_j a_j X^{-j}:
// one product and L key switches per row instead of the expansion's 2^L - 1 (and n products per
// row). The key switches' errors add to the sums directly instead of through the a_j
// (TraceSwitchVariance): less noise than the expanded keys'.
class TracePacking {
 public:
  // ctx must outlive the result. Returns CheckExpansion's errors, INVALID_ARGUMENT for no rows
  // or scalars other than rows x lwe_n words.
  static absl::StatusOr<TracePacking> Create(const RingContext& ctx, uint32_t lwe_n, uint64_t rows,
                                             absl::Span<const uint32_t> scalars);

  uint64_t rows() const { return rows_; }
  // Row t's sums (beta, then alpha: the ciphertext sum_j a_{t,j} K_j, NTT form over Q) at
  // t x 2 k N of `sums` (rows x 2 k N residues), for a ciphertext of EncryptLweSecret (lwe_n)
  // under keys of ParseExpansionKeys, the rows on up to `threads` threads. Returns
  // ExpandLweSecret's errors, INVALID_ARGUMENT for sums of another size.
  absl::Status Sums(const he::GaloisKeys& keys, absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const;

 private:
  TracePacking(const RingContext& ctx, uint32_t lwe_n, uint64_t rows,
               std::vector<uint64_t> transforms)
      : ctx_(&ctx), lwe_n_(lwe_n), rows_(rows), transforms_(std::move(transforms)) {}

  const RingContext* ctx_;
  uint32_t lwe_n_;
  uint64_t rows_;
  std::vector<uint64_t> transforms_;  // A_t(X), NTT form over Q: rows x k x N
};

// The mean over the N coefficients of the variance (in units of Z_Q) of the error that
// TracePacking's L key switches add to a row's sums: each switch's (he::internal::
// KeySwitchVariance), then doubled by the later levels as ExpandedKeyVariance's.
double TraceSwitchVariance(const RingContext& ctx, uint32_t lwe_n);

// The mean, over the n leaves and their N coefficients, of the variance of K_j's error (in units
// of Z_Q; the packing noise depends on that sum only): fresh errors of variance 10.5, each key
// switch adding he::internal::KeySwitchVariance, coefficients fixed by an automorphism
// doubling. With deferred_levels the bottom levels (up to L) add no switch: their leaves are
// never formed (deferred_packing.h). The ring must have a special prime (CheckExpansion).
double ExpandedKeyVariance(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred_levels = 0);

// PackingNoiseBound for expanded keys. Its worst case is far above the margin (a key switch's
// worst case is huge), so the rule is on sigma instead: packing's error may exceed 1/256 of
// LWE's rounding margin (as PackingNoiseWithinRule) with probability at most 2^-40 per word,
// i.e. 7.54 sigma <= (Delta / 2) / 256 for a Gaussian (2 exp(-t^2 / 2 sigma^2) <= 2^-40).
// Holds for RingParams::Default() at n = 1024 (sigma 124.4 ~ 2^7.0 words, most of it the switch to
// q'; the limit is 2^12.1). With deferred_levels (the CPU's packing, deferred_packing.h): the
// keys of ExpandedKeyVariance(deferred_levels) and the 2^D - 1 switches of the packed
// ciphertext. The rule is on the full expansion's (an engine may be asked for no deferred level).
PackingNoise ExpPackNoiseBound(const RingContext& ctx, uint32_t lwe_n,
                               uint32_t deferred_levels = 0);
bool ExpPackNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n);

namespace internal {

// The wire form of EncryptLweSecret for any message: `message` (k x N residues, coefficient
// form, already scaled by 2^-L for the levels the server will expand) encrypted under z with c1
// from a fresh seed; the message is wiped.
std::vector<uint8_t> EncryptForExpansion(const RingContext& ctx, const RlweSecret& z,
                                         absl::Span<uint64_t> message);

// What ExpandLweSecret reads, for other implementations of it (gpu/expansion.h): per level l its
// key (into `keys`; ExpansionLevelKeys) and X^{-2^l} in NTT form over Q, then its Shoup factors
// (RingContext::inverse_monomials, which need no keys). ExpansionLevelKeys returns
// CheckExpansion's errors and INVALID_ARGUMENT for keys lacking an element.
absl::StatusOr<std::vector<const he::KeySwitchKey*>> ExpansionLevelKeys(const RingContext& ctx,
                                                                        const he::GaloisKeys& keys,
                                                                        uint32_t lwe_n);
// The root ciphertext of the wire form (c0 from the wire, c1 from its seed; NTT form over Q,
// k x N residues each). INVALID_ARGUMENT for another size or a residue not below its prime.
absl::StatusOr<std::vector<uint64_t>> SecretCiphertextRoot(const RingContext& ctx,
                                                           absl::Span<const uint8_t> ciphertext);

}  // namespace internal
}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_EXPANSION_H_
