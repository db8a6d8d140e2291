// Synthetic request logs for tables larger than the real data sets, fitted to a real profile:
// row popularity follows the Zipf law whose exponent is fitted by least squares on
// log(rank) → log(frequency), and co-access follows the measured share of looked-up rows that
// are among the top co-accessed rows of an earlier row of the same request.
#ifndef VEIL_TRAINING_TOOLS_SYNTHETIC_H_
#define VEIL_TRAINING_TOOLS_SYNTHETIC_H_

#include <cstdint>
#include <vector>

#include "training_tools/profile.h"

namespace veil::training {

struct SyntheticFit {
  double zipf_exponent = 0;            // frequency ∝ rank^(−s)
  double zipf_r2 = 0;                  // goodness of the log-log fit
  double co_access_share = 0;          // rows (after a request's first) drawn from a neighbour list
  std::vector<int32_t> request_sizes;  // empirical distribution (sampled uniformly)
  int neighbours = 0;                  // top-k of the profile the share was measured against
};

// Fits `profile` (built from `requests`). Rows never accessed are left out of the Zipf fit.
SyntheticFit FitSynthetic(const AccessProfile& profile, const std::vector<RowRequest>& requests);

// Draws `count` requests over `num_rows` rows: sizes from the fit, each row either a Zipf draw
// (rank r → row r, so low rows are hot) or, with the fitted share, one of the `neighbours`
// rows associated with an earlier row of the request (themselves Zipf draws seeded by that row,
// so co-accessed rows are popular ones, as in the real data). Deterministic for a seed.
std::vector<RowRequest> GenerateRequests(const SyntheticFit& fit, int64_t num_rows, int64_t count,
                                         uint64_t seed);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_SYNTHETIC_H_
