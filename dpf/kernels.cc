#include "dpf/kernels.h"

#include <cpuid.h>

#include <atomic>

#include "absl/strings/str_cat.h"

namespace veil::dpf {
namespace {

struct CpuFeatures {
  bool aes = false, avx2 = false, avx512 = false, vaes = false;
};

// CPUID plus XGETBV (the OS must save the YMM / ZMM state). Written out rather than
// __builtin_cpu_supports, which older compilers lack for "vaes".
CpuFeatures DetectCpu() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.aes = (c >> 25) & 1;
  if (!osxsave || __get_cpuid_max(0, nullptr) < 7) return f;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6) == 0x6;
  const bool zmm_state = (xcr0_lo & 0xe6) == 0xe6;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm_state && ((b >> 5) & 1);
  f.avx512 = zmm_state && ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
  f.vaes = ymm_state && ((c >> 9) & 1);
  return f;
}

bool CpuHas(Isa isa) {
  static const CpuFeatures cpu = DetectCpu();
  switch (isa) {
    case Isa::kPortable:
      return true;
    case Isa::kAesNiAvx2:
      return cpu.aes && cpu.avx2;
    case Isa::kVaesAvx512:
      return cpu.aes && cpu.avx2 && cpu.avx512 && cpu.vaes;
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
