// Host-run of the GPU NTT kernel (gpu/internal/ntt_phases.h): the device's phases executed item
// by item on the CPU, as CI checks them without a GPU.
#include <vector>

#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/runners.h"
#include "gpu/ntt.h"

namespace veil::gpu {

absl::Status HostRunNtt(const he::NttTables& tables, bool inverse, absl::Span<uint64_t> polys) {
  absl::StatusOr<internal::MontgomeryNttTables> t = internal::MakeMontgomeryNttTables(tables);
  if (!t.ok()) return t.status();
  if (absl::Status s = internal::CheckNttPolys(tables, polys); !s.ok()) return s;
  const uint32_t batch = static_cast<uint32_t>(polys.size() / tables.n());
  const internal::NttArgs args = t->Args(inverse, polys.data(), batch);
  std::vector<uint64_t> shared(tables.n());
  internal::SequentialRunner run;
  internal::HostLoop(batch, [&](uint64_t poly) {
    internal::PoisonShared(shared);
    internal::NttBlock(run, args, static_cast<uint32_t>(poly), shared.data());
  });
  return absl::OkStatus();
}

}  // namespace veil::gpu
