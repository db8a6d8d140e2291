// ExpPack's expansion (pir/lattice/expansion.h) on a CUDA device: one RLWE ciphertext of a query's
// LWE secret becomes the n special ciphertexts K_j, level by level, one block per node
// (gpu/internal/expansion_phases.h), equal to ExpandLweSecret's leaves bit for bit. The session's
// keys live on the device. This header includes no CUDA headers.
#ifndef VEIL_GPU_EXPANSION_H_
#define VEIL_GPU_EXPANSION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/lattice/rlwe.h"

namespace veil::gpu {

// The leaves: K_j's halves (beta_j, then alpha_j; k x N residues each, NTT form over Q) for
// j < n, leaf-major: 2 k N words per leaf.
struct ExpandedKeys {
  uint32_t lwe_n = 0;
  std::vector<uint64_t> leaves;
};

class GpuExpansion {
 public:
  // Copies the level keys (of ParseExpansionKeys for lwe_n), the Galois permutations and the
  // NTT tables to the device and reserves the levels' buffers. Returns
  // lattice::internal::PrepareExpansion's errors for the keys, INVALID_ARGUMENT for rings of
  // more than 3 primes or N above 2^12, UNAVAILABLE without a device, RESOURCE_EXHAUSTED if
  // device memory is short, INTERNAL for other CUDA failures.
  static absl::StatusOr<std::unique_ptr<GpuExpansion>> Create(const lattice::RingContext& ctx,
                                                              const he::GaloisKeys& keys,
                                                              uint32_t lwe_n, int device = 0);
  ~GpuExpansion();

  // The leaves of one query's ciphertext (EncryptLweSecret's wire form). Returns
  // PrepareExpansion's errors for the ciphertext, INTERNAL for CUDA failures. Calls from several
  // threads run one after the other.
  absl::StatusOr<ExpandedKeys> Expand(absl::Span<const uint8_t> ciphertext) const;
  // Median device seconds of `reps` expansions of `ciphertext` (the leaves stay on the device).
  absl::StatusOr<double> MeasureExpand(absl::Span<const uint8_t> ciphertext, int reps) const;

 private:
  struct Impl;
  explicit GpuExpansion(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The kernel's phases run on the host, level by level, block by block and item by item (CI).
// GpuExpansion::Expand's arguments and errors, without the device.
absl::StatusOr<ExpandedKeys> HostRunExpansion(const lattice::RingContext& ctx,
                                              const he::GaloisKeys& keys, uint32_t lwe_n,
                                              absl::Span<const uint8_t> ciphertext);

namespace internal {

// The device-independent part of a run: per-prime Montgomery NTT tables (Q's primes, then P),
// the per-level keys, permutations and monomials, laid out as the kernel reads them.
struct ExpansionPlan {
  uint32_t log_n = 0, k = 0, lwe_n = 0, levels = 0;
  std::vector<uint64_t> moduli, p_inv;        // k + 1 moduli (P last); P^{-1} mod q_j
  std::vector<std::vector<uint64_t>> roots;   // forward roots per prime (Montgomery form)
  std::vector<std::vector<uint64_t>> iroots;  // inverse roots per prime
  std::vector<uint64_t> q_inv, n_inv_mont;    // per prime
  std::vector<uint64_t> key_b, key_a;         // level-major, k (k + 1) N residues each
  std::vector<uint32_t> perms;                // level-major, N each
  std::vector<uint64_t> monos;                // level-major, k N each (X^{-2^l}, NTT form)
};
absl::StatusOr<ExpansionPlan> MakeExpansionPlan(const lattice::RingContext& ctx,
                                                const he::GaloisKeys& keys, uint32_t lwe_n);
// Nodes at the largest level (the buffers' size): min(2^(levels - 1), n), at least 1.
uint32_t MaxExpansionNodes(const ExpansionPlan& plan);

}  // namespace internal
}  // namespace veil::gpu

#endif  // VEIL_GPU_EXPANSION_H_
