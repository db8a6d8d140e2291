// The randomness behind what a client sends but does not want: the planner's dummy slots and the
// padding entries of pooled bags. It must be unpredictable to the servers (a dummy a server could
// predict would tell it which key is real), so it comes from libsodium's CSPRNG.
#ifndef VEIL_PIR_BATCH_RANDOM_H_
#define VEIL_PIR_BATCH_RANDOM_H_

#include <sodium.h>

#include <cstdint>
#include <limits>

namespace veil::batch {

// A uniform random bit generator (for absl::BitGenRef and <random> distributions) over
// randombytes_buf. Needs sodium_init(), which the client calls before any lookup.
struct CryptoRandom {
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  result_type operator()() {
    result_type value;
    randombytes_buf(&value, sizeof(value));
    return value;
  }
};

}  // namespace veil::batch

#endif  // VEIL_PIR_BATCH_RANDOM_H_
