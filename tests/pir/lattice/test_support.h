// What the lattice tests (and the GPU LWE tests) share: one random seed per run (printed, so that
// a failure can be replayed), a scratch directory, random byte matrices and records, one lookup
// end to end, and a small ring for the packed protocols.
#ifndef VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_
#define VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/modarith.h"
#include "pir/lattice/client.h"
#include "pir/lattice/rlwe.h"
#include "pir/lattice/server.h"

namespace veil::lattice::testing {

// A ring of N = 1,024 with three 29-bit primes and a 22-bit special prime (no security claim):
// the packed protocols' tests use it so that tables of several packed groups stay small.
inline RingParams SmallRing() {
  const uint64_t two_n = 2048;
  return *RingParams::Create(10, *he::GenerateNttPrimes(29, two_n, 3),
                             (*he::GenerateNttPrimes(22, two_n, 1))[0]);
}

// This run's seed, drawn once and printed as "<binary> random seed: N".
inline uint64_t TestSeed(const char* binary) {
  static const uint64_t seed = [binary] {
    const uint64_t s = std::random_device{}();
    std::printf("%s random seed: %llu\n", binary, static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A fresh directory under the test's temporary directory, removed with its contents at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "veil_lattice_XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A random rows x cols byte matrix in the layout the kernels read (rows AlignedStride(cols)
// apart, zero padding); the bytes live in `bytes`.
struct RandomByteMatrix {
  RandomByteMatrix(uint64_t rows, uint64_t cols, std::mt19937_64& gen)
      : bytes(rows * AlignedStride(cols), 0) {
    const uint64_t stride = AlignedStride(cols);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t c = 0; c < cols; ++c) bytes[r * stride + c] = static_cast<int8_t>(gen());
    }
    view = {bytes.data(), rows, cols, stride};
  }
  RandomByteMatrix(const RandomByteMatrix&) = delete;
  RandomByteMatrix& operator=(const RandomByteMatrix&) = delete;
  std::vector<int8_t> bytes;
  ByteMatrixView view;
};

inline std::vector<uint8_t> RandomRecords(uint64_t rows, uint32_t record_bytes,
                                          std::mt19937_64& gen) {
  std::vector<uint8_t> records(rows * record_bytes);
  for (uint8_t& b : records) b = static_cast<uint8_t>(gen());
  return records;
}

inline embedding::TableDigestBytes DigestOf(uint64_t tag) {
  embedding::TableDigestBytes d{};
  for (int i = 0; i < 8; ++i) d[i] = static_cast<uint8_t>(tag >> (8 * i));
  return d;
}

// A client for `server` (config and hint taken as a real client would get them).
inline std::unique_ptr<LweClient> ClientFor(const LweServer& server) {
  auto client = LweClient::Create(server.config(), server.hint_blob());
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// Looks up `rows` in one batch and returns the decoded records, concatenated; the largest
// decryption noise seen goes to `noise` if given.
inline std::vector<uint8_t> LookUp(const LweServer& server, const LweClient& client,
                                   const std::vector<uint64_t>& rows,
                                   DecodeNoise* noise = nullptr) {
  const Shape& s = server.shape();
  const int batch = static_cast<int>(rows.size());
  std::vector<uint32_t> queries(batch * s.query_words()), answers(batch * s.answer_words());
  auto made = client.MakeQueries(rows, absl::MakeSpan(queries));
  EXPECT_TRUE(made.ok()) << made.status();
  const std::vector<PendingLookup> pending = *std::move(made);
  absl::Status answered = server.Answer(queries, batch, absl::MakeSpan(answers));
  EXPECT_TRUE(answered.ok()) << answered;
  std::vector<uint8_t> out(batch * s.record_bytes);
  for (int b = 0; b < batch; ++b) {
    DecodeNoise n;
    EXPECT_TRUE(
        client
            .Decode(pending[b],
                    absl::MakeConstSpan(answers).subspan(b * s.answer_words(), s.answer_words()),
                    absl::MakeSpan(out).subspan(b * s.record_bytes, s.record_bytes), &n)
            .ok());
    if (noise != nullptr) {
      noise->first_level = std::max(noise->first_level, n.first_level);
      noise->second_level = std::max(noise->second_level, n.second_level);
      noise->first_level_samples += n.first_level_samples;
      noise->first_level_sum_squares += n.first_level_sum_squares;
    }
  }
  return out;
}

}  // namespace veil::lattice::testing

#endif  // VEIL_TESTS_PIR_LATTICE_TEST_SUPPORT_H_
