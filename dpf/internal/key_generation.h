// Key generation from root seeds the caller supplies: the seam through which tests get
// reproducible keys (dpf/testing/seeded_keys.h). Production code must not draw its own seeds: it calls dpf::GenerateKeys (dpf/key.h),
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
// by the party. Same keys for the same arguments.
// Returns INVALID_ARGUMENT as GenerateKeys does.
absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeysFromRoots(const DpfParameters& params,
                                                               uint64_t alpha, uint32_t beta,
                                                               const Block (&roots)[2]);

}  // namespace veil::dpf::internal

#endif  // VEIL_DPF_INTERNAL_KEY_GENERATION_H_
