// Small unsigned multi-word integers (little-endian 64-bit words, fixed width chosen by the
// caller): what CRT composition, noise measurement and the RNS precomputations need. Not for hot
// loops and not constant time (public values or diagnostics only).
#ifndef VEIL_PIR_HE_MULTIWORD_H_
#define VEIL_PIR_HE_MULTIWORD_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace veil::he::multiword {

// a *= b in place; returns the carry word.
uint64_t MulWordInPlace(absl::Span<uint64_t> a, uint64_t b);
// a += b (b no longer than a); returns the carry.
uint64_t AddInPlace(absl::Span<uint64_t> a, absl::Span<const uint64_t> b);
// a -= b (b no longer than a); returns the borrow.
uint64_t SubInPlace(absl::Span<uint64_t> a, absl::Span<const uint64_t> b);
// -1, 0, 1 as a <, ==, > b (equal lengths).
int Compare(absl::Span<const uint64_t> a, absl::Span<const uint64_t> b);
// a /= d in place (d != 0); returns a mod d.
uint64_t DivWordInPlace(absl::Span<uint64_t> a, uint64_t d);
// a mod d (d != 0).
uint64_t ModWord(absl::Span<const uint64_t> a, uint64_t d);
// Number of significant bits (0 for zero).
int BitLength(absl::Span<const uint64_t> a);
// The product of the words, as ceil-sized words (one word per factor).
std::vector<uint64_t> Product(absl::Span<const uint64_t> factors);

}  // namespace veil::he::multiword

#endif  // VEIL_PIR_HE_MULTIWORD_H_
