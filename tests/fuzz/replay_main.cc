// The driver of a fuzz target in builds without libFuzzer (cmake/VeilFuzz.cmake): runs every file
// of the given corpus directories, then kVeilReplayMutations deterministic mutations of them (bit
// flips, byte changes, insertions, erasures, truncations), so the suite exercises each target's
// parser past its valid seeds under any compiler (and under ASan in the asan preset).
// Usage: TARGET DIR_OR_FILE...   Fails if no input is found.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

constexpr int kVeilReplayMutations = 2000;

std::vector<uint8_t> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// xorshift64*: the mutations are the same on every run, so a failure reproduces.
uint64_t Next(uint64_t& state) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1DULL;
}

void Mutate(std::vector<uint8_t>& bytes, uint64_t& rng) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
  const int edits = 1 + static_cast<int>(Next(rng) % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = bytes.empty() ? 0 : Next(rng) % bytes.size();
    switch (Next(rng) % 5) {
      case 0:
        if (!bytes.empty()) bytes[at] ^= static_cast<uint8_t>(1u << (Next(rng) % 8));
        break;
      case 1:
        if (!bytes.empty()) bytes[at] = kInteresting[Next(rng) % std::size(kInteresting)];
        break;
      case 2:
        bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), static_cast<uint8_t>(Next(rng)));
        break;
      case 3:
        if (!bytes.empty()) bytes.erase(bytes.begin() + static_cast<ptrdiff_t>(at));
        break;
      default:
        bytes.resize(at);
        break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::vector<uint8_t>> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) inputs.push_back(ReadFile(entry.path()));
      }
    } else {
      inputs.push_back(ReadFile(arg));
    }
  }
  if (inputs.empty()) {
    fprintf(stderr, "%s: no input found (usage: %s DIR_OR_FILE...)\n", argv[0], argv[0]);
    return 1;
  }
  for (const auto& input : inputs) LLVMFuzzerTestOneInput(input.data(), input.size());
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < kVeilReplayMutations; ++i) {
    std::vector<uint8_t> bytes = inputs[i % inputs.size()];
    Mutate(bytes, rng);
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  printf("%zu inputs and %d mutations ran\n", inputs.size(), kVeilReplayMutations);
  return 0;
}
