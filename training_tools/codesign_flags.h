// veil-codesign's command-line flags (absl, defined in codesign_flags.cc) and the options they
// make: the workload, layout choice, training, grid and sweep.
#ifndef VEIL_TRAINING_TOOLS_CODESIGN_FLAGS_H_
#define VEIL_TRAINING_TOOLS_CODESIGN_FLAGS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training_tools/models.h"
#include "training_tools/profile.h"
#include "training_tools/sweep.h"
#include "training_tools/workload.h"

namespace veil::training {

struct CodesignFlags {
  WorkloadOptions workload;
  uint64_t seed = 1;
  int seeds = 3;
  int top_k = 8;
  // --private
  bool private_profile = false;
  int paillier_bits = 2048;
  bool insecure_for_comparison = false;
  int report_value_bits = 16;
  LayoutChoice choice;
  std::string layout_file;
  std::string out;
  double backend_words_per_s = 0;
  int64_t max_bytes = 0;
  bool quick = false;
  bool model = true;
  int epochs = 0;
  int threads = 2;
  int validation_examples = 0;
  bool allow_unreachable_rows = false;
  UnseenRowsPolicy unseen_rows = UnseenRowsPolicy::kDefault;
  double tolerance = 0;
  int bootstrap = 500;
  bool payoff = true;
  int64_t payoff_max_rows = 0;
  int64_t synthetic_rows = 0;
  int64_t synthetic_requests = 0;
};

// Reads the flags. Returns INVALID_ARGUMENT naming the flag for a value out of range or a name
// it does not know (--text_split, --unseen_rows).
absl::StatusOr<CodesignFlags> ReadCodesignFlags();

// The public placement key of --seed.
std::array<uint8_t, 16> LayoutSeed(const CodesignFlags& flags);

// The training seeds: --seed, --seed + 1, ... (--seeds of them).
std::vector<uint64_t> TrainingSeeds(const CodesignFlags& flags);

// The workload's training options (--quick: smaller; --epochs, --validation_examples, --threads).
TrainOptions TrainOptionsFor(const CodesignFlags& flags, const Workload& workload);

// The default grid (quick or full) with the lists given by --grid_* in place of its own. Returns
// INVALID_ARGUMENT naming the flag for a value that is not a non-negative number.
absl::StatusOr<SweepGrid> GridFromFlags(const CodesignFlags& flags);

// The sweep's placement key, cost model, byte budget, policies, statistics and threads.
SweepOptions SweepOptionsFor(const CodesignFlags& flags);

// --out as a file to write (INVALID_ARGUMENT if it is a directory or empty), or as a folder
// (created if missing; INVALID_ARGUMENT if it is a file; "." if empty).
absl::StatusOr<std::string> OutputFile(const CodesignFlags& flags, const std::string& what);
absl::StatusOr<std::string> OutputFolder(const CodesignFlags& flags);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_CODESIGN_FLAGS_H_
