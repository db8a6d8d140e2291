// Pooled lookups (EmbeddingBag) over additive shares: the client pads every bag to a fixed size
// with weight-0 entries so that all bags look alike to the servers; each server sums a bag's
// shares into one share of the bag's (weighted) row sum, so the download shrinks by the bag size.
#ifndef VEIL_PIR_BATCH_BAGS_H_
#define VEIL_PIR_BATCH_BAGS_H_

#include <cstdint>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::batch {

// Checks that every bag holds at least one entry and that the sizes add up to `entries`.
// Returns INVALID_ARGUMENT naming the empty bag or the mismatch otherwise.
absl::Status CheckBagSizes(absl::Span<const uint32_t> bag_sizes, uint64_t entries);

// What a client sends for its bags: one (index, weight) per key, bag after bag.
struct PaddedBags {
  std::vector<uint64_t> indices;
  std::vector<uint32_t> weights;    // the DPF's beta: 0 for padding, which adds nothing
  std::vector<uint32_t> bag_sizes;  // as sent: max(size, pad_to) each
};

// Bag b is the next bag_sizes[b] entries of `indices` (rows of a table of `rows` rows), weighted
// by `weights` (empty: all 1). With pad_to > 0 every bag is padded to pad_to keys with weight-0
// entries of rows drawn from `random` (CryptoRandom in production). Returns INVALID_ARGUMENT
// from CheckBagSizes, for a weights span of another length, an index >= rows, or a bag larger
// than pad_to.
absl::StatusOr<PaddedBags> PadBags(absl::Span<const uint64_t> indices,
                                   absl::Span<const uint32_t> bag_sizes,
                                   absl::Span<const int32_t> weights, uint64_t rows,
                                   uint32_t pad_to, absl::BitGenRef random);

// The server's side: out[b] = Σ of bag b's shares mod 2^32, word by word. `shares` holds
// row_words words per key, bag after bag (bag_sizes must pass CheckBagSizes for its key count);
// `out` holds bag_sizes.size() * row_words words.
void SumBags(absl::Span<const uint32_t> shares, absl::Span<const uint32_t> bag_sizes,
             uint32_t row_words, absl::Span<uint32_t> out);

}  // namespace veil::batch

#endif  // VEIL_PIR_BATCH_BAGS_H_
