#include "gpu/internal/launch_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace veil::gpu::internal {

absl::StatusOr<PackedKey> PackKey(const dpf::DpfKey& key) {
  const dpf::DpfParameters& p = key.params();
  if (p.levels() > dpf::kMaxLogDomain || static_cast<int>(key.cw_seed().size()) != p.levels() ||
      static_cast<int>(key.cw_right().size()) != p.levels()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key has ", key.cw_seed().size(), " correction words for ", p.levels(), " levels"));
  }
  PackedKey k{};
  k.root = key.root();
  for (int i = 0; i < p.levels(); ++i) {
    k.cw_seed[i] = key.cw_seed()[i];
    k.cw_right_bits |= uint64_t{key.cw_right()[i] & 1u} << i;
  }
  absl::Span<const uint32_t> final_cw = key.final_cw();
  std::copy(final_cw.begin(), final_cw.end(), k.final_cw);
  k.prg = static_cast<uint8_t>(p.prg);
  k.output = static_cast<uint8_t>(p.output);
  k.party = static_cast<uint8_t>(key.party());
  k.levels = static_cast<uint8_t>(p.levels());
  k.leaf_words = static_cast<uint8_t>(p.leaf_block_words());
  k.leaf_points_log2 = static_cast<uint8_t>(p.leaf_points_log2());
  k.log_domain = static_cast<uint8_t>(p.log_domain);
  return k;
}

std::vector<KeyGroup> GroupKeys(absl::Span<const PackedKey> keys, uint64_t rows) {
  std::vector<KeyGroup> groups;
  for (size_t i = 0; i < keys.size(); ++i) {
    const PackedKey& key = keys[i];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const KeyGroup& g) {
      return g.keys[0].output == key.output && g.keys[0].leaf_points_log2 == key.leaf_points_log2 &&
             g.keys[0].leaf_words == key.leaf_words && g.keys[0].levels == key.levels;
    });
    if (it == groups.end()) {
      groups.push_back({MakeGeometry(key, rows), {}, {}});
      it = groups.end() - 1;
    }
    it->keys.push_back(key);
    it->index.push_back(static_cast<int>(i));
  }
  return groups;
}

Body BodyFor(Strategy strategy) {
  switch (strategy) {
    case Strategy::kBranchParallel:
      return Body::kBranchParallel;
    case Strategy::kLevelByLevel:
      return Body::kLevelByLevelLeaves;
    case Strategy::kBoundedWindow:
      return Body::kBoundedWindow;
  }
  return Body::kBoundedWindow;
}

TableKind KindFor(TableDtype dtype, const Geometry& geo) {
  if (dtype == TableDtype::kUint32) return TableKind::kWords;
  return geo.xor_output ? TableKind::kInt8Scalar : TableKind::kInt8TensorCore;
}

absl::StatusOr<int> ChooseKeysPerBlock(const Geometry& geo, uint32_t row_words, Body body,
                                       TableKind kind, int max_keys, uint32_t shared_limit) {
  int k = std::min(max_keys, kMaxKeysPerBlock);
  for (; k >= 1; --k) {
    if (MakeSharedLayout(geo, k, row_words, body, kind).bytes <= shared_limit) return k;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("rows of ", row_words, " words need more than ", shared_limit,
                   " bytes of shared memory per block even with one key per block"));
}

absl::StatusOr<std::vector<int8_t>> NarrowToInt8(const dpf::TableView& table) {
  std::vector<int8_t> bytes(table.rows * table.row_words);
  for (uint64_t r = 0; r < table.rows; ++r) {
    const uint32_t* row = table.row(r);
    for (uint32_t c = 0; c < table.row_words; ++c) {
      int32_t v = static_cast<int32_t>(row[c]);
      if (v < -128 || v > 127) {
        return absl::InvalidArgumentError(
            absl::StrCat("INT8 table: word ", c, " of row ", r, " is ", v, ", outside -128..127"));
      }
      bytes[r * table.row_words + c] = static_cast<int8_t>(v);
    }
  }
  return bytes;
}

LaunchArgs MakeLaunchArgs(const KeyGroup& group, uint32_t row_words, TableKind kind,
                          int keys_per_block, uint64_t row_begin, uint64_t row_end) {
  LaunchArgs a;
  a.geo = group.geo;
  a.num_keys = static_cast<int>(group.keys.size());
  a.keys_per_block = keys_per_block;
  a.table_kind = kind;
  a.row_words = row_words;
  a.row_end = std::min(row_end, group.geo.rows);
  a.row_offset = row_begin;
  if (a.row_offset >= a.row_end) return a;  // nothing here: no tiles
  const uint64_t rpt = group.geo.rows_per_tile();
  a.tile_begin = a.row_offset / rpt;
  a.tile_end = (a.row_end + rpt - 1) / rpt;
  return a;
}

}  // namespace veil::gpu::internal
