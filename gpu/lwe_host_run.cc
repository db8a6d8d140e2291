// Host-run simulation of the LWE kernels: the phases of gpu/internal/lwe_phases.h executed block
// by block, item by item, with the same pass and grid planning as the device
// (gpu/internal/lwe_plan.h); and the method names.
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/internal/lwe_phases.h"
#include "gpu/internal/lwe_plan.h"
#include "gpu/internal/runners.h"
#include "gpu/lwe.h"

namespace veil::gpu {
namespace {

using internal::LweArgs;

class LweHostRunner {
 public:
  template <class F>
  void Phase(uint32_t items, F&& f) {
    internal::HostLoop(items, [&](uint64_t i) { f(static_cast<uint32_t>(i)); });
  }
  void GlobalAdd(uint32_t* p, uint32_t v) { *p += v; }
  template <uint32_t kN>
  void TensorTiles(const int8_t* a, const int8_t* b, int32_t* c) {
    Phase(internal::kLweTcRows * kN,
          [&](uint32_t item) { internal::LweTensorTileItem<kN>(a, b, c, item); });
  }
};

template <int KB>
void RunBlocks(LweArgs a, bool tensor) {
  std::vector<int8_t> planes;
  if (tensor) {  // the device's planes kernel, item by item
    planes.resize(internal::LwePlaneBytes(a.stride, KB));
    internal::HostLoop(internal::LwePlaneItems(a.stride, KB),
                       [&](uint64_t i) { internal::LwePlaneItem<KB>(a, planes.data(), i); });
    a.planes = planes.data();
  }
  std::vector<uint8_t> smem(tensor ? internal::MakeLweTcLayout(KB).bytes
                                   : internal::LweCoreSharedBytes(KB));
  const uint64_t tiles = internal::LweRowTiles(a.rows, tensor, KB);
  const uint64_t chunks = internal::LweColumnChunks(a.stride);
  LweHostRunner run;
  internal::HostLoop(tiles, [&](uint64_t bx) {
    internal::HostLoop(chunks, [&](uint64_t by) {
      internal::PoisonShared(smem);
      if constexpr (KB >= 4) {
        if (tensor) {
          internal::LweTensorBlock<KB>(run, a, smem.data(), bx, by);
          return;
        }
      }
      if constexpr (KB <= internal::kLweCoreMaxQueries) {
        internal::LweCoreBlock<KB>(run, a, smem.data(), bx, by);
      }
    });
  });
}

}  // namespace

std::string_view LweGpuMethodName(LweGpuMethod method) {
  switch (method) {
    case LweGpuMethod::kAuto:
      return "auto";
    case LweGpuMethod::kCudaCores:
      return "cuda-cores";
    case LweGpuMethod::kTensorCores:
      return "tensor-cores";
  }
  return "unknown";
}

absl::StatusOr<LweGpuMethod> ParseLweGpuMethod(std::string_view name) {
  for (LweGpuMethod m :
       {LweGpuMethod::kAuto, LweGpuMethod::kCudaCores, LweGpuMethod::kTensorCores}) {
    if (name == LweGpuMethodName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown GPU method '", std::string(name),
                                                 "' (auto, cuda-cores or tensor-cores)"));
}

absl::Status LweHostRunMultiply(const lattice::ByteMatrixView& db,
                                absl::Span<const uint32_t> queries, int batch, LweGpuMethod method,
                                absl::Span<uint32_t> out) {
  if (absl::Status s = internal::CheckLweCall(db, queries, batch, out); !s.ok()) return s;
  std::fill(out.begin(), out.end(), 0u);
  const bool tensor = internal::UsesTensorCores(method, batch, LweGpuOptions{}.tensor_min_batch);
  for (const internal::LwePass& pass : internal::PlanLwePasses(batch, tensor)) {
    LweArgs a{db.data,
              db.rows,
              db.cols,
              db.stride,
              queries.data() + pass.first * db.cols,
              pass.queries,
              out.data() + pass.first * db.rows,
              db.rows};
    switch (pass.kb) {
      case 1:
        RunBlocks<1>(a, tensor);
        break;
      case 2:
        RunBlocks<2>(a, tensor);
        break;
      case 4:
        RunBlocks<4>(a, tensor);
        break;
      case 8:
        RunBlocks<8>(a, tensor);
        break;
      case 16:
        RunBlocks<16>(a, tensor);
        break;
      default:
        RunBlocks<32>(a, tensor);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace veil::gpu
