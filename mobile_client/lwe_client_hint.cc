// LweClient's hint: from its cache folder, or downloaded in chunk waves (lwe-simple,
// lwe-double; lwe-exppack-s has none).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mobile_client/lwe_client.h"
#include "mobile_client/transport.h"
#include "pir/lattice/client.h"

namespace veil::client {
namespace {

// Hint chunks requested at once, and how often a lost connection may resume a download.
constexpr uint64_t kChunksInFlight = 8;
constexpr int kResumes = 3;
// The whole download may take the timeout plus a second per this many bytes.
constexpr uint64_t kMinHintBytesPerSecond = uint64_t{256} << 10;

std::string CachePath(const std::string& dir, const std::string& hint_digest_hex) {
  return (std::filesystem::path(dir) / (hint_digest_hex + ".lwe-hint")).string();
}

// The cached blob, if the cache holds one of `bytes` bytes with digest `digest`.
std::optional<std::vector<uint8_t>> ReadCachedHint(const std::string& path, uint64_t bytes,
                                                   const std::array<uint8_t, 32>& digest) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  if (!in || static_cast<uint64_t>(in.tellg()) != bytes) return std::nullopt;
  in.seekg(0);
  std::vector<uint8_t> blob(bytes);
  if (!in.read(reinterpret_cast<char*>(blob.data()), static_cast<std::streamsize>(bytes))) {
    return std::nullopt;
  }
  if (lattice::Blake2b256(blob) != digest) return std::nullopt;
  return blob;
}

// Writes the blob under a temporary name, renamed into place when complete.
absl::Status WriteCachedHint(const std::string& dir, const std::string& path,
                             absl::Span<const uint8_t> blob) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("hint cache ", dir, " cannot be created: ", error.message()));
  }
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(blob.data()),
              static_cast<std::streamsize>(blob.size()));
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat("hint cache file ", temporary, " cannot be written"));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("hint cache file ", path, " cannot be written: ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> LweClient::GetHint() {
  const uint64_t bytes = table_.hint_bytes;
  std::string cache_path;
  if (!options_.hint_cache_dir.empty()) {
    cache_path = CachePath(options_.hint_cache_dir, table_.hint_digest_hex);
    if (auto cached = ReadCachedHint(cache_path, bytes, hint_digest_)) {
      hint_from_cache_ = true;
      return *std::move(cached);
    }
  }
  std::vector<uint8_t> blob(bytes);
  const uint64_t chunks = (bytes + hint_chunk_bytes_ - 1) / hint_chunk_bytes_;
  // Each wave has the timeout; the whole download a deadline too, so that a server answering
  // every wave just in time cannot hold the client without bound.
  const absl::Duration allowed =
      options_.timeout + absl::Seconds(static_cast<double>(bytes) / kMinHintBytesPerSecond);
  const absl::Time deadline = absl::Now() + allowed;
  int resumes = 0;
  for (uint64_t first = 0; first < chunks;) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          transport_->Name(0), " sent ", first * hint_chunk_bytes_, " of the hint's ", bytes,
          " bytes in ", absl::FormatDuration(allowed), " (the timeout plus a second per ",
          kMinHintBytesPerSecond, " bytes); too slow"));
    }
    const uint64_t last = std::min(chunks, first + kChunksInFlight);
    absl::Status status = transport_->Run(
        [&]() -> kj::Promise<absl::Status> {
          std::vector<Transport::Send> sends;
          sends.reserve(last - first);
          for (uint64_t c = first; c < last; ++c) {
            const uint64_t offset = c * hint_chunk_bytes_;
            const uint64_t size = std::min(hint_chunk_bytes_, bytes - offset);
            auto send = [this, &blob, offset, size, c](rpc::VeilServer::Client cap, int replica) {
              auto request = cap.castAs<rpc::LweServer>().hintRequest();
              request.setChunk(c);
              request.setHintDigest(capnp::Data::Reader(hint_digest_.data(), hint_digest_.size()));
              return request.send().then([this, &blob, offset, size, c,
                                          replica](capnp::Response<rpc::LweServer::HintResults> r) {
                capnp::Data::Reader data = r.getData();
                if (data.size() != size) {
                  return absl::InternalError(absl::StrCat(transport_->ReplicaName(0, replica),
                                                          " sent hint chunk ", c, " of ",
                                                          data.size(), " bytes, expected ", size));
                }
                // A hedged chunk may come twice: the same bytes (the digest checks them all).
                std::memcpy(blob.data() + offset, data.begin(), size);
                return absl::OkStatus();
              });
            };
            sends.push_back(std::move(send));
          }
          return transport_->CallEach(0, std::move(sends),
                                      std::min(deadline, absl::Now() + options_.timeout));
        },
        "hint download");
    if (absl::IsUnavailable(status) && transport_->Lost()[0] && resumes < kResumes &&
        absl::Now() < deadline) {
      // Resume this wave on a new connection, if the server still serves this hint.
      ++resumes;
      if (absl::Status s = transport_->ReconnectLost(); !s.ok()) return s;
      continue;
    }
    if (!status.ok()) return status;
    first = last;
  }
  if (lattice::Blake2b256(blob) != hint_digest_) {
    return absl::FailedPreconditionError(absl::StrCat(
        transport_->Name(0), " sent a hint whose digest is not the one its config names"));
  }
  if (!cache_path.empty()) {
    if (absl::Status s = WriteCachedHint(options_.hint_cache_dir, cache_path, blob); !s.ok()) {
      return s;
    }
  }
  return blob;
}

}  // namespace veil::client
