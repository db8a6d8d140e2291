// An asynchronous, bounded encryption pipeline: a producer submits plaintexts, worker threads
// encrypt them, and a consumer takes the ciphertexts in submission order — the software
// counterpart of QHCS's request/response rings in front of its QAT offload.
//
//   Submit(m)  blocks while `capacity` items are in flight (queued, being encrypted, or done but
//              not yet taken): backpressure on a producer that outruns the workers or consumer.
//   Next()     blocks until the oldest outstanding item is done and returns it (or its error).
//   Close()    no more submissions; Next() returns OUT_OF_RANGE once everything is taken.
//   Cancel()   drops queued work, lets workers finish their current item, and makes every
//              blocked and later Submit/Next return CANCELLED.
// The first failed encryption stops the pipeline: queued items are dropped, Next() returns the
// results before it and then its error, and Submit returns that error.
// Submit and Next may be called from different threads (one producer, one consumer); the
// destructor cancels and joins the workers.
#ifndef VEIL_PIR_HE_PAILLIER_PIPELINE_H_
#define VEIL_PIR_HE_PAILLIER_PIPELINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/paillier.h"

namespace veil::he {

struct PipelineOptions {
  int workers = 2;
  size_t capacity = 64;  // items in flight at most
};

class PipelinedEncryptor {
 public:
  using EncryptFn = std::function<absl::StatusOr<Ciphertext>(const Mpz& plaintext)>;

  // Encrypts with Encrypt(key, m, randomness); `randomness` must outlive the pipeline.
  // Returns INVALID_ARGUMENT if workers < 1 or capacity < 1.
  static absl::StatusOr<std::unique_ptr<PipelinedEncryptor>> Create(const PublicKey& key,
                                                                    Randomizer& randomness,
                                                                    const PipelineOptions& options);
  // Runs any per-item function (tests inject slow or failing ones).
  static absl::StatusOr<std::unique_ptr<PipelinedEncryptor>> Create(EncryptFn encrypt,
                                                                    const PipelineOptions& options);
  ~PipelinedEncryptor();

  // Returns CANCELLED after Cancel(), FAILED_PRECONDITION after Close(), or the error that
  // stopped the pipeline.
  absl::Status Submit(Mpz plaintext);
  absl::StatusOr<Ciphertext> Next();
  void Close();
  void Cancel();

  // On a fresh pipeline, producer and consumer in the calling thread: submits `plaintexts`,
  // taking results whenever `capacity` are in flight, then closes and takes the rest. Returns the
  // ciphertexts in order, or the pipeline's first error (then cancels it).
  absl::StatusOr<std::vector<Ciphertext>> EncryptAll(absl::Span<const Mpz> plaintexts);

 private:
  PipelinedEncryptor(EncryptFn encrypt, const PipelineOptions& options);
  void Work();
  void WakeAll();  // with mu_ held

  EncryptFn encrypt_;
  PipelineOptions options_;
  std::mutex mu_;
  std::condition_variable work_;     // workers: the queue has items, or closed or cancelled
  std::condition_variable results_;  // Next: a result is done, or the pipeline stopped
  std::condition_variable space_;    // Submit: fewer than capacity items in flight, or stopped
  std::deque<std::pair<uint64_t, Mpz>> queue_;
  std::map<uint64_t, absl::StatusOr<Ciphertext>> done_;
  uint64_t submitted_ = 0;  // sequence number of the next submission
  uint64_t taken_ = 0;      // sequence number of the next result to hand out
  uint64_t failed_at_ = UINT64_MAX;
  absl::Status failure_;
  bool closed_ = false;
  bool cancelled_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_PIPELINE_H_
