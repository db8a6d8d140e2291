#include "dpf/kernels_generic.h"
#include "dpf/kernels.h"

namespace veil::dpf {

const Kernels& PortableKernels() {
  static const Kernels kernels = {GenericExpandLevel, GenericConvertLeaves, GenericMacAdd,
                                  GenericMacXor};
  return kernels;
}

}  // namespace veil::dpf
