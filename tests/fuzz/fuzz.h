// What every fuzz target (a *_fuzzer.cc with LLVMFuzzerTestOneInput, built by veil_fuzzer() in
// cmake/VeilFuzz.cmake) shares: its seeds, a scratch file for parsers that read from a path, and
// the check that turns a broken invariant into a crash libFuzzer reports.
#ifndef VEIL_TESTS_FUZZ_FUZZ_H_
#define VEIL_TESTS_FUZZ_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace veil::fuzz {

// Valid inputs of the target (defined in each *_fuzzer.cc): the corpus in
// tests/fuzz/corpus/<target>/ is what they were when it was written. Running a target with
// VEIL_FUZZ_WRITE_SEEDS=DIR writes them to DIR as seed-NN files and exits (scripts/fuzz --seeds).
std::vector<std::vector<uint8_t>> Seeds();

// A file of this process's own (in /dev/shm, else $TMPDIR or /tmp), rewritten with `bytes` on every
// call; for parsers that take a path. Returns the path.
const std::string& WriteScratchFile(absl::Span<const uint8_t> bytes);

// Aborts with `what` on stderr unless `ok`: an invariant the target checks (a round trip that
// differs, an error code the API does not document) is reported as a crash.
void Check(bool ok, const char* what);

}  // namespace veil::fuzz

#endif  // VEIL_TESTS_FUZZ_FUZZ_H_
