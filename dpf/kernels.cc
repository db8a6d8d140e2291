#include "dpf/kernels.h"

#include <atomic>

#include "absl/strings/str_cat.h"

namespace veil::dpf {
namespace {

bool CpuHas(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return true;
    case Isa::kAesNiAvx2:
      return __builtin_cpu_supports("aes") && __builtin_cpu_supports("avx2");
    case Isa::kVaesAvx512:
      return __builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("aes");
  }
  return false;
}

std::atomic<Isa>& ActiveIsaSlot() {
  static std::atomic<Isa> slot{AvailableIsas().back()};
  return slot;
}

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return "portable";
    case Isa::kAesNiAvx2:
      return "aesni-avx2";
    case Isa::kVaesAvx512:
      return "vaes-avx512";
  }
  return "unknown";
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kPortable, Isa::kAesNiAvx2, Isa::kVaesAvx512}) {
    if (CpuHas(isa)) isas.push_back(isa);
  }
  return isas;
}

const Kernels& KernelsFor(Isa isa) {
  switch (isa) {
    case Isa::kAesNiAvx2:
      return AesNiAvx2Kernels();
    case Isa::kVaesAvx512:
      return VaesAvx512Kernels();
    case Isa::kPortable:
      break;
  }
  return PortableKernels();
}

Isa ActiveIsa() { return ActiveIsaSlot().load(std::memory_order_relaxed); }

absl::Status SetActiveIsa(Isa isa) {
  if (!CpuHas(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this CPU cannot run the ", std::string(IsaName(isa)), " kernels"));
  }
  ActiveIsaSlot().store(isa, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace veil::dpf
