// Marks the per-thread pieces shared by the CPU evaluator (dpf/) and the GPU kernels (gpu/): the
// same source runs on the host in CI and on the device.
#ifndef VEIL_DPF_HD_H_
#define VEIL_DPF_HD_H_

#if defined(__CUDACC__)
#define VEIL_HD __host__ __device__ __forceinline__
#else
#define VEIL_HD inline __attribute__((always_inline))
#endif

#endif  // VEIL_DPF_HD_H_
