#include "pir/he/ntt.h"

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512 = false;  // F + DQ + BW + VL, with the OS saving the ZMM state
  bool ifma = false;
};

// __builtin_cpu_supports checks the OS state (XGETBV) as well as CPUID.
CpuFeatures DetectCpu() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  f.ifma = f.avx512 && __builtin_cpu_supports("avx512ifma");
  return f;
}

const CpuFeatures& Cpu() {
  static const CpuFeatures cpu = DetectCpu();
  return cpu;
}

}  // namespace

std::string_view NttKernelName(NttKernel kernel) {
  switch (kernel) {
    case NttKernel::kReference:
      return "reference";
    case NttKernel::kScalar:
      return "scalar";
    case NttKernel::kAvx512U64:
      return "avx512-u64";
    case NttKernel::kAvx512Ifma:
      return "avx512-ifma52";
    case NttKernel::kAvx512U32:
      return "avx512-u32";
    case NttKernel::kAvx2U32:
      return "avx2-u32";
    case NttKernel::kAvx2F64:
      return "avx2-f64";
  }
  return "unknown";
}

absl::StatusOr<NttTables> NttTables::Create(int log_n, const Modulus& q) {
  if (log_n < kMinLogN || log_n > kMaxLogN) {
    return absl::InvalidArgumentError(
        absl::StrCat("log2 N must be in [", kMinLogN, ", ", kMaxLogN, "], got ", log_n));
  }
  const size_t n = size_t{1} << log_n;
  absl::StatusOr<uint64_t> psi = MinimalPrimitiveRoot(2 * n, q);
  if (!psi.ok()) return psi.status();
  NttTables t;
  t.log_n_ = log_n;
  t.q_ = q;
  t.psi_ = *psi;
  absl::StatusOr<uint64_t> psi_inv = q.Inverse(*psi);
  if (!psi_inv.ok()) return psi_inv.status();
  t.roots_.resize(n);
  t.inv_roots_.resize(n);
  uint64_t power = 1, inv_power = 1;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t r = ReverseBits(static_cast<uint32_t>(j), log_n);
    t.roots_[r] = power;
    t.inv_roots_[r] = inv_power;
    power = q.Mul(power, *psi);
    inv_power = q.Mul(inv_power, *psi_inv);
  }
  for (size_t j = 0; j < n; ++j) {
    t.roots_shoup_.push_back(q.ShoupOf(t.roots_[j]));
    t.inv_roots_shoup_.push_back(q.ShoupOf(t.inv_roots_[j]));
  }
  absl::StatusOr<uint64_t> n_inv = q.Inverse(n);
  if (!n_inv.ok()) return n_inv.status();
  t.n_inv_ = *n_inv;
  t.n_inv_shoup_ = q.ShoupOf(*n_inv);
  if (q.bits() <= 30) {
    for (size_t j = 0; j < n; ++j) {
      t.roots32_.push_back(static_cast<uint32_t>(t.roots_[j]));
      t.inv_roots32_.push_back(static_cast<uint32_t>(t.inv_roots_[j]));
      t.roots_shoup32_.push_back(static_cast<uint32_t>((t.roots_[j] << 32) / q.value()));
      t.inv_roots_shoup32_.push_back(static_cast<uint32_t>((t.inv_roots_[j] << 32) / q.value()));
    }
  }
  if (t.Runs(NttKernel::kAvx2F64)) {
    const double qd = static_cast<double>(q.value());  // exact below 2^53, as are the roots
    for (size_t j = 0; j < n; ++j) {
      t.roots_f64_.push_back(static_cast<double>(t.roots_[j]));
      t.roots_over_q_.push_back(static_cast<double>(t.roots_[j]) / qd);
      t.inv_roots_f64_.push_back(static_cast<double>(t.inv_roots_[j]));
      t.inv_roots_over_q_.push_back(static_cast<double>(t.inv_roots_[j]) / qd);
    }
  }
  t.best_ = t.Kernels().back();
  return t;
}

bool NttTables::Runs(NttKernel kernel) const {
  switch (kernel) {
    case NttKernel::kReference:
    case NttKernel::kScalar:
      return true;
    case NttKernel::kAvx512U64:
    case NttKernel::kAvx512Ifma:
    case NttKernel::kAvx512U32:
    case NttKernel::kAvx2U32:
    case NttKernel::kAvx2F64:
      break;
  }
  if (n() < 2 * static_cast<size_t>(internal::VectorLanes(kernel))) return false;
  if (kernel == NttKernel::kAvx2F64) return Cpu().avx2 && Cpu().fma && q_.bits() <= 50;
  if (kernel == NttKernel::kAvx512U64) return Cpu().avx512;
  if (kernel == NttKernel::kAvx512Ifma) return Cpu().ifma && q_.bits() <= 50;
  if (kernel == NttKernel::kAvx2U32) return Cpu().avx2 && q_.bits() <= 30;
  return Cpu().avx512 && q_.bits() <= 30;
}

std::vector<NttKernel> NttTables::Kernels() const {
  // Ordered slowest to fastest: the narrower the lanes, the more butterflies per instruction
  // (AVX2's 4 or 8 lanes before any AVX-512 kernel's 512-bit vectors).
  std::vector<NttKernel> kernels;
  for (NttKernel k :
       {NttKernel::kReference, NttKernel::kScalar, NttKernel::kAvx2F64, NttKernel::kAvx2U32,
        NttKernel::kAvx512U64, NttKernel::kAvx512Ifma, NttKernel::kAvx512U32}) {
    if (Runs(k)) kernels.push_back(k);
  }
  return kernels;
}

void NttTables::Forward(uint64_t* a, NttKernel kernel) const {
  if (!Runs(kernel)) kernel = NttKernel::kScalar;
  switch (kernel) {
    case NttKernel::kReference:
      return internal::ForwardReference(*this, a);
    case NttKernel::kScalar:
      return internal::ForwardScalar(*this, a);
    case NttKernel::kAvx2U32:
      return internal::ForwardAvx2(*this, a);
    case NttKernel::kAvx2F64:
      return internal::ForwardAvx2F64(*this, a);
    default:
      return internal::ForwardAvx512(*this, kernel, a);
  }
}

void NttTables::Inverse(uint64_t* a, NttKernel kernel) const {
  if (!Runs(kernel)) kernel = NttKernel::kScalar;
  switch (kernel) {
    case NttKernel::kReference:
      return internal::InverseReference(*this, a);
    case NttKernel::kScalar:
      return internal::InverseScalar(*this, a);
    case NttKernel::kAvx2U32:
      return internal::InverseAvx2(*this, a);
    case NttKernel::kAvx2F64:
      return internal::InverseAvx2F64(*this, a);
    default:
      return internal::InverseAvx512(*this, kernel, a);
  }
}

void NttTables::MultiplyAdd(uint64_t w, const uint64_t* b, uint64_t* acc, size_t count,
                            NttKernel kernel) const {
  if (!Runs(kernel) || kernel == NttKernel::kReference || kernel == NttKernel::kScalar ||
      kernel == NttKernel::kAvx2U32 || kernel == NttKernel::kAvx2F64) {
    internal::MultiplyAddScalar(*this, w, b, acc, count);
  } else {
    internal::MultiplyAddAvx512(*this, kernel, w, b, acc, count);
  }
}

std::vector<uint64_t> NttByDefinition(const NttTables& tables, const std::vector<uint64_t>& a) {
  const Modulus& q = tables.modulus();
  const size_t n = tables.n();
  std::vector<uint64_t> out(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const uint64_t exponent = 2 * ReverseBits(static_cast<uint32_t>(k), tables.log_n()) + 1;
    const uint64_t step = q.Pow(tables.psi(), exponent);
    uint64_t power = 1, sum = 0;
    for (size_t i = 0; i < n; ++i) {
      sum = q.Add(sum, q.Mul(a[i], power));
      power = q.Mul(power, step);
    }
    out[k] = sum;
  }
  return out;
}

namespace internal {

void ForwardReference(const NttTables& t, uint64_t* a) {
  const Modulus& q = t.modulus();
  const size_t n = t.n();
  for (size_t m = 1, half = n / 2; m < n; m *= 2, half /= 2) {
    for (size_t i = 0; i < m; ++i) {
      const uint64_t w = t.roots()[m + i];
      for (size_t j = 2 * i * half; j < 2 * i * half + half; ++j) {
        const uint64_t x = a[j], y = q.Mul(a[j + half], w);
        a[j] = q.Add(x, y);
        a[j + half] = q.Sub(x, y);
      }
    }
  }
}

void InverseReference(const NttTables& t, uint64_t* a) {
  const Modulus& q = t.modulus();
  const size_t n = t.n();
  for (size_t m = n / 2, half = 1; m >= 1; m /= 2, half *= 2) {
    for (size_t i = 0; i < m; ++i) {
      const uint64_t w = t.inverse_roots()[m + i];
      for (size_t j = 2 * i * half; j < 2 * i * half + half; ++j) {
        const uint64_t x = a[j], y = a[j + half];
        a[j] = q.Add(x, y);
        a[j + half] = q.Mul(q.Sub(x, y), w);
      }
    }
  }
  for (size_t j = 0; j < n; ++j) a[j] = q.Mul(a[j], t.n_inverse());
}

}  // namespace internal
}  // namespace veil::he
