// ExportTable (declared in models.h) needs no torch: it only writes floats.
#include <bit>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "training_tools/models.h"

namespace veil::training {

absl::Status ExportTable(const std::vector<float>& table, int32_t rows, int32_t dim,
                         const std::string& workload, const std::string& path) {
  if (rows <= 0 || dim <= 0 || table.size() != static_cast<size_t>(rows) * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: ", table.size(), " floats are not ", rows, " rows of ", dim));
  }
  static_assert(std::endian::native == std::endian::little,
                "the .f32 format is little-endian; add a byte swap for big-endian hosts");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(table.data()),
            static_cast<std::streamsize>(table.size() * sizeof(float)));
  std::ofstream sidecar(path + ".json");
  sidecar << "{\"rows\":" << rows << ",\"dim\":" << dim << ",\"dtype\":\"f32\",\"workload\":\""
          << workload << "\"}\n";
  if (!out || !sidecar) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace veil::training
