// Batched homomorphic aggregation on CPU threads: the product mod n^2 of many ciphertexts
// (= the encryption of the sum of their plaintexts), element by element over batches of
// reports, as QHCS's aggregator sums clients' encrypted matrices.
//
// Work split: the reports are cut into `threads` contiguous chunks; each thread multiplies its
// chunk into one running product per element (one mpz_mul + mpz_mod per addition: the bare
// modular multiplication, allocation-free), and the threads' partial products are combined
// pairwise, a binary tree of depth ceil(log2 threads). The Sequential variants, one loop over
// everything, are the references: both give the same integers.
#ifndef VEIL_PIR_HE_PAILLIER_AGGREGATE_H_
#define VEIL_PIR_HE_PAILLIER_AGGREGATE_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/packing.h"
#include "pir/he/paillier/paillier.h"

namespace veil::he {

// The homomorphic sum of `ciphertexts`. Returns INVALID_ARGUMENT if there are none or
// threads < 1.
absl::StatusOr<Ciphertext> Aggregate(const PublicKey& key, absl::Span<const Ciphertext> ciphertexts,
                                     int threads);
absl::StatusOr<Ciphertext> AggregateSequential(const PublicKey& key,
                                               absl::Span<const Ciphertext> ciphertexts,
                                               int threads);

// The element-wise sum of batches (reports): summands add up. Returns INVALID_ARGUMENT if there
// are no batches, threads < 1, or a batch has another key id, packing, value count or ciphertext
// count than the first; OUT_OF_RANGE (before any multiplication) if the packed sum would exceed
// the packing's headroom (Packer::CheckSummands).
absl::StatusOr<CiphertextBatch> AggregateBatches(const PublicKey& key,
                                                 absl::Span<const CiphertextBatch> batches,
                                                 int threads);
absl::StatusOr<CiphertextBatch> AggregateBatchesSequential(
    const PublicKey& key, absl::Span<const CiphertextBatch> batches, int threads);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_AGGREGATE_H_
