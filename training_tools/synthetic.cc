#include "training_tools/synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace veil::training {
namespace {

// Inverse-CDF sampler of the Zipf law over ranks 1..n with exponent s (the CDF table is built
// once; n up to tens of millions fits in memory).
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (int64_t r = 0; r < n; ++r) cdf_[r] = (sum += std::pow(static_cast<double>(r + 1), -s));
    for (double& v : cdf_) v /= sum;
  }
  // A rank in [0, n): 0 is the most popular row.
  int32_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int32_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

}  // namespace

SyntheticFit FitSynthetic(const AccessProfile& profile, const std::vector<RowRequest>& requests) {
  SyntheticFit fit;
  std::vector<int64_t> frequencies;
  for (int64_t f : profile.frequency) {
    if (f > 0) frequencies.push_back(f);
  }
  std::sort(frequencies.rbegin(), frequencies.rend());
  // Least squares of y = a − s·x with x = log rank, y = log frequency.
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  const double n = static_cast<double>(frequencies.size());
  for (size_t i = 0; i < frequencies.size(); ++i) {
    const double x = std::log(static_cast<double>(i + 1));
    const double y = std::log(static_cast<double>(frequencies[i]));
    sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
  }
  const double cov = n * sxy - sx * sy, var_x = n * sxx - sx * sx, var_y = n * syy - sy * sy;
  if (var_x > 0 && var_y > 0) {
    fit.zipf_exponent = -cov / var_x;
    fit.zipf_r2 = cov * cov / (var_x * var_y);
  }
  // Co-access: how many rows after a request's first are neighbours of an earlier row.
  int64_t later_rows = 0, neighbour_rows = 0;
  for (const RowRequest& request : requests) {
    fit.request_sizes.push_back(static_cast<int32_t>(request.size()));
    for (size_t i = 1; i < request.size(); ++i) {
      ++later_rows;
      for (size_t j = 0; j < i; ++j) {
        const int32_t earlier = request[j];
        if (earlier < 0 || earlier >= profile.num_rows) continue;
        const auto& list = profile.co_accessed[earlier];
        if (std::find(list.begin(), list.end(), request[i]) != list.end()) {
          ++neighbour_rows;
          break;
        }
      }
    }
  }
  fit.co_access_share = later_rows ? static_cast<double>(neighbour_rows) / later_rows : 0;
  for (const auto& list : profile.co_accessed) {
    fit.neighbours = std::max(fit.neighbours, static_cast<int>(list.size()));
  }
  return fit;
}

std::vector<RowRequest> GenerateRequests(const SyntheticFit& fit, int64_t num_rows, int64_t count,
                                         uint64_t seed) {
  const ZipfSampler zipf(num_rows, fit.zipf_exponent);
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution from_neighbour(fit.co_access_share);
  const int neighbours = std::max(fit.neighbours, 1);
  std::vector<RowRequest> requests;
  requests.reserve(count);
  for (int64_t k = 0; k < count; ++k) {
    const size_t size = fit.request_sizes.empty()
                            ? 1
                            : fit.request_sizes[std::uniform_int_distribution<size_t>(
                                  0, fit.request_sizes.size() - 1)(rng)];
    RowRequest request;
    for (size_t i = 0; i < size; ++i) {
      int32_t row;
      if (!request.empty() && from_neighbour(rng)) {
        // Neighbour j of an earlier row: the j-th Zipf draw of a generator seeded by that row.
        const int32_t earlier =
            request[std::uniform_int_distribution<size_t>(0, request.size() - 1)(rng)];
        std::mt19937_64 neighbour_rng(seed ^ (0x9E3779B97F4A7C15ull * (earlier + 1)));
        const int j = std::uniform_int_distribution<int>(0, neighbours - 1)(rng);
        row = zipf(neighbour_rng);
        for (int step = 0; step < j; ++step) row = zipf(neighbour_rng);
      } else {
        row = zipf(rng);
      }
      request.push_back(row);
    }
    std::sort(request.begin(), request.end());
    request.erase(std::unique(request.begin(), request.end()), request.end());
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace veil::training
