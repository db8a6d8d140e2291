// Fuzz target for the DPF key parser (cmake/VeilFuzz.cmake): any bytes either fail to parse with
// INVALID_ARGUMENT or give a key that serializes back to exactly those bytes (the wire format has
// one encoding per key) and evaluates safely.
#include <cstddef>
#include <cstdint>

#include "dpf/eval.h"
#include "dpf/key.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {

std::vector<std::vector<uint8_t>> Seeds() {
  std::vector<std::vector<uint8_t>> seeds;
  for (dpf::Prg prg : {dpf::Prg::kAes128, dpf::Prg::kChaCha8, dpf::Prg::kChaCha12,
                       dpf::Prg::kChaCha20, dpf::Prg::kSipHash}) {
    for (auto [log_domain, output, leaf] : {std::tuple{1, dpf::OutputType::kAdditive, 0},
                                            {9, dpf::OutputType::kAdditive, 4},
                                            {12, dpf::OutputType::kXor, 0},
                                            {20, dpf::OutputType::kAdditive, 2}}) {
      dpf::DpfParameters params{log_domain, prg, output, leaf};
      auto keys = dpf::GenerateKeys(params, (uint64_t{1} << log_domain) - 1, 1);
      Check(keys.ok(), "GenerateKeys failed");
      seeds.push_back(keys->first.Serialize());
      seeds.push_back(keys->second.Serialize());
    }
  }
  return seeds;
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using veil::fuzz::Check;
  const absl::Span<const uint8_t> bytes(data, size);
  auto key = veil::dpf::DpfKey::Parse(bytes);
  if (!key.ok()) {
    Check(key.status().code() == absl::StatusCode::kInvalidArgument, "Parse: not INVALID_ARGUMENT");
    return 0;
  }
  Check(key->Serialize() == std::vector<uint8_t>(bytes.begin(), bytes.end()),
        "Parse then Serialize changed the key's bytes");
  if (key->params().log_domain <= 16) {
    Check(veil::dpf::EvalPoint(*key, size % key->params().domain_size()).ok(),
          "EvalPoint failed inside the domain");
  }
  return 0;
}
