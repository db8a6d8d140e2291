// Negacyclic number-theoretic transform over Z_q[X] / (X^N + 1), N = 2^1 .. 2^16, q prime,
// q = 1 mod 2N, q < 2^62. The convention of SEAL and HEXL (their known answers hold):
//   X[k] = sum_i a_i psi^((2 bitrev(k) + 1) i),
// psi the minimal primitive 2N-th root of unity, outputs in bit-reversed order. Forward is
// Cooley-Tukey from natural order, Inverse the Gentleman-Sande mirror followed by N^{-1}.
//
// Kernels, every one bit-equal to the reference (outputs fully reduced):
//   kReference    radix 2, every product reduced with Barrett (ntt_reference.cc);
//   kScalar       Harvey's lazy butterflies: values kept in [0, 4q), Shoup products (Harvey,
//                 "Faster arithmetic for number-theoretic transforms", 2014, Alg. 4 and 3);
//   kAvx512U64    the same on 8 x 64-bit lanes, the high product word built from 32-bit halves;
//   kAvx512Ifma   8 x 52-bit lanes with IFMA (vpmadd52luq/huq), q < 2^50 (4q < 2^52);
//   kAvx512U32    16 x 32-bit lanes, q < 2^30 (4q < 2^32);
//   kAvx2U32      the same at 8 lanes, for CPUs with AVX2 but no AVX-512 (ntt_avx2.cc);
//   kAvx2F64      4 x 64-bit lanes, the Shoup quotient and remainder from double-precision FMAs,
//                 q < 2^50 (4q < 2^52, exact in doubles): AVX2 has no 64-bit multiply
//                 (ntt_avx2_f64.cc).
// The AVX-512 kernels run where the CPU has AVX-512F/DQ/BW (and IFMA for kAvx512Ifma), kAvx2U32
// where it has AVX2, kAvx2F64 where it has AVX2 and FMA, chosen at run time like dpf/kernels.cc;
// N below two vectors of lanes falls back to kScalar.
#ifndef VEIL_PIR_HE_NTT_H_
#define VEIL_PIR_HE_NTT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pir/he/modarith.h"

namespace veil::he {

inline constexpr int kMinLogN = 1;
inline constexpr int kMaxLogN = 16;

enum class NttKernel : uint8_t {
  kReference = 0,
  kScalar = 1,
  kAvx512U64 = 2,
  kAvx512Ifma = 3,
  kAvx512U32 = 4,
  kAvx2U32 = 5,
  kAvx2F64 = 6,
};

std::string_view NttKernelName(NttKernel kernel);

class NttTables {
 public:
  // Returns INVALID_ARGUMENT if log_n is outside [kMinLogN, kMaxLogN] or q is not a prime
  // = 1 mod 2N.
  static absl::StatusOr<NttTables> Create(int log_n, const Modulus& q);

  int log_n() const { return log_n_; }
  size_t n() const { return size_t{1} << log_n_; }
  const Modulus& modulus() const { return q_; }
  uint64_t psi() const { return psi_; }

  // In place; inputs and outputs in [0, q). The fastest kernel this CPU runs for q (see Best).
  void Forward(uint64_t* a) const { Forward(a, best_); }
  void Inverse(uint64_t* a) const { Inverse(a, best_); }
  // A chosen kernel; one the CPU cannot run for this q (see Runs) runs kScalar instead.
  void Forward(uint64_t* a, NttKernel kernel) const;
  void Inverse(uint64_t* a, NttKernel kernel) const;

  // acc[i] = acc[i] + w b[i] mod q for i < count (inputs below q, w below q), with the Shoup
  // product of `kernel`'s lanes (kAvx512U32 uses the 64-bit lanes: the data are 64-bit words;
  // the AVX2 kernels the scalar product):
  // the arithmetic of one butterfly, without its data movement. veil-bench he measures its rate
  // as the NTT's multiply-add roofline.
  void MultiplyAdd(uint64_t w, const uint64_t* b, uint64_t* acc, size_t count,
                   NttKernel kernel) const;

  // The kernels this CPU runs for this table (reference first, the best last).
  std::vector<NttKernel> Kernels() const;
  NttKernel best() const { return best_; }

  // roots[j] = psi^bitrev(j) (j < N; roots[0] = 1), inverse_roots[j] = roots[j]^{-1}, with their
  // Shoup companions floor(w * 2^64 / q): stage m of the forward transform uses roots[m + i].
  const std::vector<uint64_t>& roots() const { return roots_; }
  const std::vector<uint64_t>& roots_shoup() const { return roots_shoup_; }
  const std::vector<uint64_t>& inverse_roots() const { return inv_roots_; }
  const std::vector<uint64_t>& inverse_roots_shoup() const { return inv_roots_shoup_; }
  uint64_t n_inverse() const { return n_inv_; }
  uint64_t n_inverse_shoup() const { return n_inv_shoup_; }
  // 32-bit copies (roots and floor(w * 2^32 / q)) for q < 2^30; empty otherwise.
  const std::vector<uint32_t>& roots32() const { return roots32_; }
  const std::vector<uint32_t>& roots_shoup32() const { return roots_shoup32_; }
  const std::vector<uint32_t>& inverse_roots32() const { return inv_roots32_; }
  const std::vector<uint32_t>& inverse_roots_shoup32() const { return inv_roots_shoup32_; }
  // kAvx2F64's: the roots as doubles and fl(w / q) for each, where that kernel runs; empty
  // otherwise.
  const std::vector<double>& roots_f64() const { return roots_f64_; }
  const std::vector<double>& roots_over_q() const { return roots_over_q_; }
  const std::vector<double>& inverse_roots_f64() const { return inv_roots_f64_; }
  const std::vector<double>& inverse_roots_over_q() const { return inv_roots_over_q_; }

 private:
  bool Runs(NttKernel kernel) const;

  int log_n_ = 0;
  Modulus q_;
  uint64_t psi_ = 0;
  NttKernel best_ = NttKernel::kScalar;
  std::vector<uint64_t> roots_, roots_shoup_, inv_roots_, inv_roots_shoup_;
  uint64_t n_inv_ = 0, n_inv_shoup_ = 0;
  std::vector<uint32_t> roots32_, roots_shoup32_, inv_roots32_, inv_roots_shoup32_;
  std::vector<double> roots_f64_, roots_over_q_, inv_roots_f64_, inv_roots_over_q_;
};

// The definition itself, O(N^2): X[k] = sum_i a_i psi^((2 bitrev(k) + 1) i). For tests of the
// convention at small N.
std::vector<uint64_t> NttByDefinition(const NttTables& tables, const std::vector<uint64_t>& a);

namespace internal {
// Kernel entry points (ntt_scalar.cc, ntt_reference.cc, ntt_avx512.cc, ntt_avx2.cc).
void ForwardReference(const NttTables& t, uint64_t* a);
void InverseReference(const NttTables& t, uint64_t* a);
void ForwardScalar(const NttTables& t, uint64_t* a);
void InverseScalar(const NttTables& t, uint64_t* a);
void MultiplyAddScalar(const NttTables& t, uint64_t w, const uint64_t* b, uint64_t* acc,
                       size_t count);
void MultiplyAddAvx512(const NttTables& t, NttKernel kernel, uint64_t w, const uint64_t* b,
                       uint64_t* acc, size_t count);
void ForwardAvx512(const NttTables& t, NttKernel kernel, uint64_t* a);
void InverseAvx512(const NttTables& t, NttKernel kernel, uint64_t* a);
void ForwardAvx2(const NttTables& t, uint64_t* a);
void InverseAvx2(const NttTables& t, uint64_t* a);
void ForwardAvx2F64(const NttTables& t, uint64_t* a);
void InverseAvx2F64(const NttTables& t, uint64_t* a);
// Lanes of a vector for a vector kernel (the smallest N it handles is two vectors).
constexpr int VectorLanes(NttKernel kernel) {
  // 8 x 64 bits (AVX-512), kAvx2U32's 8 x 32, kAvx2F64's 4 x 64.
  return kernel == NttKernel::kAvx512U32 ? 16 : kernel == NttKernel::kAvx2F64 ? 4 : 8;
}
}  // namespace internal

}  // namespace veil::he

#endif  // VEIL_PIR_HE_NTT_H_
