// Batch kernels of the CPU evaluator, one table of function pointers per instruction set. Every
// variant produces exactly the bits of the portable one (prg_portable.h); tests compare them.
#ifndef VEIL_DPF_KERNELS_H_
#define VEIL_DPF_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "dpf/block.h"
#include "dpf/params.h"

namespace veil::dpf {

enum class Isa : uint8_t {
  kPortable = 0,  // plain C++ (bitsliced AES, dpf/aes_bitsliced.h: constant time, but slower)
  kAesNiAvx2 = 1,  // AES-NI on 128-bit lanes, AVX2 ChaCha and multiply-accumulate
  kVaesAvx512 = 2,  // VAES on 512-bit vectors (4 AES blocks per instruction), AVX-512 elsewhere
};

struct Kernels {
  // children[2i], children[2i+1] = the corrected children of parents[i] (CorrectChildren).
  void (*expand_level)(Prg prg, const Block* parents, size_t n, Block cw_left, bool cw_right,
                       Block* children);
  // values[i * words ...] = the finished output words of leaf i (ConvertLeaf then FinishLeaf).
  void (*convert_leaves)(Prg prg, const Block* leaves, size_t n, int words, OutputType output,
                         bool party1, const uint32_t* final_cw, uint32_t* values);
  // acc[k * row_words + j] += sum_r y[k][r] * rows[r][j] (mod 2^32) for k < keys, r < nrows;
  // y[k] points at nrows words.
  void (*mac_add)(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                  size_t nrows, uint32_t row_words, uint32_t* acc);
  // acc[k * row_words + j] ^= XOR of rows[r][j] over r < nrows with bit r of y[k] set (y[k]
  // holds the selection bits, bit r at word r / 32, bit r % 32).
  void (*mac_xor)(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                  size_t nrows, uint32_t row_words, uint32_t* acc);
};

std::string_view IsaName(Isa isa);
// The instruction sets this CPU runs, portable first.
std::vector<Isa> AvailableIsas();
const Kernels& KernelsFor(Isa isa);

// The set used by evaluation: the best available unless changed. Returns FAILED_PRECONDITION if
// the CPU lacks `isa`. Not for concurrent use with evaluation (tests and benchmarks only).
Isa ActiveIsa();
absl::Status SetActiveIsa(Isa isa);

// Per-ISA tables (kernels_*.cc).
const Kernels& PortableKernels();
const Kernels& AesNiAvx2Kernels();
const Kernels& VaesAvx512Kernels();

}  // namespace veil::dpf

#endif  // VEIL_DPF_KERNELS_H_
