// Batching (slot) encoding for t = 1 mod 2N: Z_t[X] / (X^N + 1) is N copies of Z_t, seen as a
// 2 x (N/2) matrix of slots. Slot-wise addition and multiplication follow from the ring's;
// RotateRows rotates both rows, RotateColumns swaps them. A slot vector is N values, row 0 first;
// shorter inputs are padded with zeros.
#ifndef VEIL_PIR_HE_ENCODER_H_
#define VEIL_PIR_HE_ENCODER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"

namespace veil::he {

// Returns INVALID_ARGUMENT if more than N values are given or one is not below t.
absl::StatusOr<Plaintext> EncodeSlots(const BfvContext& ctx, absl::Span<const uint64_t> values);
// Signed values, taken mod t. INVALID_ARGUMENT if more than N values are given or one is
// outside [-(t-1)/2, (t-1)/2].
absl::StatusOr<Plaintext> EncodeSignedSlots(const BfvContext& ctx,
                                            absl::Span<const int64_t> values);
// INVALID_ARGUMENT for a plaintext of other parameters or size.
absl::StatusOr<std::vector<uint64_t>> DecodeSlots(const BfvContext& ctx, const Plaintext& m);
// Slots as centered values in [-(t-1)/2, (t-1)/2].
absl::StatusOr<std::vector<int64_t>> DecodeSignedSlots(const BfvContext& ctx, const Plaintext& m);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_ENCODER_H_
