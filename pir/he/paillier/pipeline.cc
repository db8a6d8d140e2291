#include "pir/he/paillier/pipeline.h"

namespace veil::he {

absl::StatusOr<std::unique_ptr<PipelinedEncryptor>> PipelinedEncryptor::Create(
    const PublicKey& key, Randomizer& randomness, const PipelineOptions& options) {
  return Create([key, &randomness](const Mpz& m) { return Encrypt(key, m, randomness); }, options);
}

absl::StatusOr<std::unique_ptr<PipelinedEncryptor>> PipelinedEncryptor::Create(
    EncryptFn encrypt, const PipelineOptions& options) {
  if (options.workers < 1 || options.capacity < 1) {
    return absl::InvalidArgumentError("pipeline: workers and capacity must be >= 1");
  }
  return std::unique_ptr<PipelinedEncryptor>(new PipelinedEncryptor(std::move(encrypt), options));
}

PipelinedEncryptor::PipelinedEncryptor(EncryptFn encrypt, const PipelineOptions& options)
    : encrypt_(std::move(encrypt)), options_(options) {
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { Work(); });
}

PipelinedEncryptor::~PipelinedEncryptor() {
  Cancel();
  for (std::thread& t : workers_) t.join();
}

void PipelinedEncryptor::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return cancelled_ || closed_ || !queue_.empty(); });
    if (cancelled_ || queue_.empty()) return;  // cancelled, or closed with nothing left
    auto [seq, plaintext] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    absl::StatusOr<Ciphertext> result = encrypt_(plaintext);
    lock.lock();
    if (!result.ok() && seq < failed_at_) {
      failed_at_ = seq;
      failure_ = result.status();
      queue_.clear();  // everything queued comes after seq (FIFO)
      space_.notify_all();
    }
    done_.emplace(seq, std::move(result));
    // The consumer waits for the oldest outstanding result only.
    if (seq == taken_ || seq == failed_at_) results_.notify_one();
  }
}

absl::Status PipelinedEncryptor::Submit(Mpz plaintext) {
  std::unique_lock lock(mu_);
  space_.wait(lock, [&] {
    return cancelled_ || closed_ || failed_at_ != UINT64_MAX ||
           submitted_ - taken_ < options_.capacity;
  });
  if (cancelled_) return absl::CancelledError("pipeline cancelled");
  if (failed_at_ != UINT64_MAX) return failure_;
  if (closed_) return absl::FailedPreconditionError("pipeline: Submit after Close");
  queue_.emplace_back(submitted_++, std::move(plaintext));
  work_.notify_one();
  return absl::OkStatus();
}

absl::StatusOr<Ciphertext> PipelinedEncryptor::Next() {
  std::unique_lock lock(mu_);
  results_.wait(lock, [&] {
    return cancelled_ || done_.count(taken_) != 0 || taken_ > failed_at_ ||
           (closed_ && taken_ == submitted_);
  });
  if (cancelled_) return absl::CancelledError("pipeline cancelled");
  if (taken_ > failed_at_) return failure_;
  if (auto it = done_.find(taken_); it != done_.end()) {
    absl::StatusOr<Ciphertext> result = std::move(it->second);
    done_.erase(it);
    ++taken_;
    // A blocked producer waits at `capacity` in flight; waking it at half that lets it refill
    // in one go instead of once per result.
    if (submitted_ - taken_ == options_.capacity / 2) space_.notify_one();
    return result;
  }
  return absl::OutOfRangeError("pipeline: closed and every result taken");
}

void PipelinedEncryptor::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  WakeAll();
}

void PipelinedEncryptor::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  queue_.clear();
  WakeAll();
}

void PipelinedEncryptor::WakeAll() {
  work_.notify_all();
  results_.notify_all();
  space_.notify_all();
}

absl::StatusOr<std::vector<Ciphertext>> PipelinedEncryptor::EncryptAll(
    absl::Span<const Mpz> plaintexts) {
  std::vector<Ciphertext> out;
  out.reserve(plaintexts.size());
  auto take = [&]() -> absl::Status {
    auto c = Next();
    if (!c.ok()) {
      Cancel();
      return c.status();
    }
    out.push_back(*std::move(c));
    return absl::OkStatus();
  };
  size_t submitted = 0;
  for (const Mpz& m : plaintexts) {
    // Never let Submit block: this thread is also the consumer.
    while (submitted - out.size() >= options_.capacity) {
      if (auto s = take(); !s.ok()) return s;
    }
    if (auto s = Submit(m); !s.ok()) {
      Cancel();
      return s;
    }
    ++submitted;
  }
  Close();
  while (out.size() < plaintexts.size()) {
    if (auto s = take(); !s.ok()) return s;
  }
  return out;
}

}  // namespace veil::he
