// Key generation from root seeds the caller supplies: the seam through which tests get
// reproducible keys (dpf/testing/seeded_keys.h) and the constant-time test marks the seeds as
// secret. Production code must not draw its own seeds: it calls dpf::GenerateKeys (dpf/key.h),
// which takes them from the system CSPRNG. This header compiles only inside veil_dpf and in
// targets linking veil_dpf_testing (both define VEIL_DPF_INTERNAL).
#ifndef VEIL_DPF_INTERNAL_KEY_GENERATION_H_
#define VEIL_DPF_INTERNAL_KEY_GENERATION_H_

#ifndef VEIL_DPF_INTERNAL
#error "dpf/internal/key_generation.h is for veil_dpf and veil_dpf_testing: use dpf/key.h"
#endif

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "dpf/block.h"
#include "dpf/key.h"
#include "dpf/params.h"

namespace veil::dpf::internal {

// GenerateKeys with root seeds roots[0] (party 0) and roots[1] (party 1); their bit 0 is replaced
// by the party. Same keys for the same arguments. Constant time in alpha, beta and the seeds: no
// branch or memory address depends on them (tests/dpf/constant_time_test.cc checks the compiled
// code under memcheck). The only branch that reads alpha is the range check, which reads just its
// bits above the domain.
// Returns INVALID_ARGUMENT as GenerateKeys does.
absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeysFromRoots(const DpfParameters& params,
                                                               uint64_t alpha, uint32_t beta,
                                                               const Block (&roots)[2]);

}  // namespace veil::dpf::internal

#endif  // VEIL_DPF_INTERNAL_KEY_GENERATION_H_
