// Per-thread scratch buffers for the temporaries of the hot paths (key switching, rotations).
// Fresh vectors of a few hundred KiB per operation cost more than the arithmetic on this kind
// of machine: zeroing and page faults took 60% of a rotation at N = 4096 under perf. SEAL keeps
// a memory pool for the same reason.
#ifndef VEIL_PIR_HE_SCRATCH_H_
#define VEIL_PIR_HE_SCRATCH_H_

#include <cstddef>
#include <cstdint>

namespace veil::he::internal {

enum class Scratch : int {
  kDigits = 0,  // DecomposeForKeySwitch output
  kKeySwitch0,  // KeySwitchInnerProduct outputs (QP rows)
  kKeySwitch1,
  kModDown,  // ModDown's centered remainders
  kRotate,   // a rotation's key-switched halves before the automorphism
  kOut0,     // key-switched halves (Q rows)
  kOut1,
  kPoly,             // one polynomial
  kMultiply,         // the extended polynomials of Multiply
  kBabySteps,        // EncodedMatrix::Multiply: the baby steps in NTT form
  kGiantSteps,       // and the giant steps' sums
  kExternalProduct,  // ExternalProduct over Q (rgsw.h): coefficients, digits and sums
  kCMux,             // CMux's difference of its inputs
  kExpanded,         // pir/lattice's hybrid: a query's expanded ciphertexts before conversion
  kSelection,        // and its CMux trees' inner nodes
  kExpansion,        // pir/lattice's expansion: a worker's path and packing block
  kExpansionStep,    // and one step's temporaries
  kPackSums,         // pir/lattice's packing sums (one accumulator per worker, or virtual groups)
  kPackNodes,        // the deferred packing's expanded nodes, tiled
  kPackRotated,      // and its switched sums
  kNarrowNtt,        // the 32-bit NTT kernels' narrowed copy (ntt_avx512.cc, ntt_avx2.cc)
  kCount,
};

// This thread's buffer for `use`, at least `words` long; its contents are unspecified. Valid until
// the thread's next GetScratch for the same use.
uint64_t* GetScratch(Scratch use, size_t words);

// Zeroes all of this thread's buffer for `use` (nothing if it has none).
void WipeScratch(Scratch use);

// Wipes this thread's kNarrowNtt buffer when it goes out of scope. The narrowed and
// floating-point NTT kernels (ntt_avx2.cc, ntt_avx2_f64.cc, ntt_avx512.cc) leave their last
// transform there (an inverse one's output times n), so every function that transforms secret
// data on its thread (keys, encryption's a s, decryption's phase, a client's messages) declares
// one; a function that hands such transforms to other threads declares one in each.
class SecretNttScope {
 public:
  SecretNttScope() = default;
  SecretNttScope(const SecretNttScope&) = delete;
  SecretNttScope& operator=(const SecretNttScope&) = delete;
  ~SecretNttScope() { WipeScratch(Scratch::kNarrowNtt); }
};

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_SCRATCH_H_
