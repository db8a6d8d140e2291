// Fuzz target for layout files (embedding/layout.h). The first byte chooses whether the target
// first rewrites the file's trailing BLAKE2b digest to match its contents (odd) or leaves the
// bytes as they are (even): without that, every mutation past the digest check would be refused
// there and the checks of the values (Create's) would never be reached.
// Invariants: Parse fails with INVALID_ARGUMENT (or RESOURCE_EXHAUSTED past its memory limit), or gives a layout whose serialization parses to
// the same serialization, in which every row is the primary row of the slot Locate names.
#include <sodium.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "embedding/layout.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

using embedding::Layout;
using embedding::LayoutParams;

// Parse's memory limit here: larger layouts are refused (RESOURCE_EXHAUSTED) before allocating,
// which keeps runs fast and checks that the limit holds for every header.
constexpr uint64_t kFuzzMemoryBytes = uint64_t{1} << 20;

std::vector<uint8_t> Seed(const LayoutParams& params, std::vector<int32_t> hot,
                          const std::vector<std::vector<int32_t>>& companions, uint8_t mode) {
  auto layout = Layout::Create(params, std::move(hot), companions);
  Check(layout.ok(), "Layout::Create failed");
  std::vector<uint8_t> bytes = layout->Serialize();
  bytes.insert(bytes.begin(), mode);
  return bytes;
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  LayoutParams p;
  p.num_rows = 40;
  p.row_words = 4;
  p.seed = embedding::LayoutSeedFromU64(7);
  p.cold = {5, 2};
  std::vector<std::vector<uint8_t>> seeds = {Seed(p, {}, {}, 1)};
  p.colocation = 2;
  p.hot = {2, 1};
  p.cold = {4, 1};
  std::vector<std::vector<int32_t>> companions(40);
  for (int32_t r = 0; r < 40; ++r) companions[r] = {(r + 1) % 40, (r + 7) % 40};
  seeds.push_back(Seed(p, {3, 9, 17, 31}, companions, 1));
  companions[5] = {6};
  seeds.push_back(Seed(p, {0, 39}, companions, 0));
  return seeds;
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using veil::fuzz::Check;
  if (size < 1) return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if ((data[0] & 1) != 0 && bytes.size() >= crypto_generichash_BYTES) {
    const size_t body = bytes.size() - crypto_generichash_BYTES;
    crypto_generichash(bytes.data() + body, crypto_generichash_BYTES, bytes.data(), body, nullptr,
                       0);
  }
  auto layout = veil::embedding::Layout::Parse(bytes, veil::fuzz::kFuzzMemoryBytes);
  if (!layout.ok()) {
    Check(layout.status().code() == absl::StatusCode::kInvalidArgument ||
              layout.status().code() == absl::StatusCode::kResourceExhausted,
          "Parse: neither INVALID_ARGUMENT nor RESOURCE_EXHAUSTED");
    return 0;
  }
  const std::vector<uint8_t> serialized = layout->Serialize();
  auto again = veil::embedding::Layout::Parse(serialized);
  Check(again.ok(), "a serialized layout does not parse");
  Check(again->Serialize() == serialized, "Serialize, Parse, Serialize changed the layout");
  for (int32_t row = 0; row < layout->num_rows(); ++row) {
    const veil::embedding::SlotRef slot = layout->Locate(row);
    Check(layout->Entry(slot)[0] == row, "a row is not the primary row of its slot");
  }
  return 0;
}
