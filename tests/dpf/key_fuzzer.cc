// libFuzzer target for the DPF key parser: any bytes either fail to parse with a Status or give a
// key that evaluates safely. Build with Clang (the CMake rule adds -fsanitize=fuzzer), e.g.
//   CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DVEIL_SANITIZE=ON "-DVEIL_COMPONENTS=dpf;tests/dpf"
//   ninja -C build-fuzz dpf_key_fuzzer && build-fuzz/bin/dpf_key_fuzzer -max_total_time=60
#include <cstddef>
#include <cstdint>

#include "dpf/eval.h"
#include "dpf/key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto key = veil::dpf::DpfKey::Parse(absl::MakeConstSpan(data, size));
  if (key.ok() && key->params().log_domain <= 16) {
    (void)veil::dpf::EvalPoint(*key, size % key->params().domain_size());
  }
  return 0;
}
