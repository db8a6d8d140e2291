#include "embedding/table.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace veil::embedding {
namespace {

// BLAKE2b-256 of one chunk of the row region.
TableDigestBytes ChunkDigest(absl::Span<const uint8_t> chunk) {
  TableDigestBytes digest;
  crypto_generichash(digest.data(), digest.size(), chunk.data(), chunk.size(), nullptr, 0);
  return digest;
}

// The top level: BLAKE2b-256 of the header (digest zeroed) and the chunk digests in order.
TableDigestBytes CombineDigests(const TableHeader& header,
                                absl::Span<const TableDigestBytes> chunks) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, kTableDigestBytes);
  TableHeader zeroed = header;
  std::fill(std::begin(zeroed.digest), std::end(zeroed.digest), 0);
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(&zeroed), sizeof(zeroed));
  for (const TableDigestBytes& chunk : chunks) {
    crypto_generichash_update(&state, chunk.data(), chunk.size());
  }
  TableDigestBytes digest;
  crypto_generichash_final(&state, digest.data(), digest.size());
  return digest;
}

int HashThreads(int threads) {
  return threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
}

// Checks every header field against the others and against the file size, in the order of the
// header, so that the first inconsistent field is the one named.
absl::Status ValidateHeader(const TableHeader& header, uint64_t file_bytes) {
  if (!std::equal(kTableMagic.begin(), kTableMagic.end(), header.magic)) {
    return absl::InvalidArgumentError("bad magic: not a veil table file");
  }
  if (header.version != kTableVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported version ", header.version, " (this build reads version ", kTableVersion, ")"));
  }
  if (header.header_bytes != sizeof(TableHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("header_bytes is ", header.header_bytes, ", expected ", sizeof(TableHeader)));
  }
  const RowFormat format = static_cast<RowFormat>(header.format);
  if (!IsKnownRowFormat(format)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown row format ", static_cast<int>(header.format)));
  }
  if (header.dim == 0 || header.dim > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", header.dim, " is outside [1, ", kMaxDim, "]"));
  }
  if (!IsKnownRowTag(header.row_tag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown row tag ", static_cast<int>(header.row_tag)));
  }
  const uint32_t row_words =
      RowWords(format, header.dim) + TagWords(static_cast<RowTag>(header.row_tag));
  if (header.row_words != row_words) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row_words ", header.row_words, " does not match format ", RowFormatName(format),
        " with dim ", header.dim, " and its row tags (expected ", row_words, ")"));
  }
  if (header.stride_words != RowStrideWords(header.row_words)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stride_words ", header.stride_words, " is not row_words rounded up to ",
                     kRowAlignWords, " (expected ", RowStrideWords(header.row_words), ")"));
  }
  const int max_frac_bits = format == RowFormat::kFixed32 ? kMaxFracBits : 0;
  if (header.frac_bits > max_frac_bits) {
    return absl::InvalidArgumentError(absl::StrCat("frac_bits ", header.frac_bits,
                                                   " is outside [0, ", max_frac_bits,
                                                   "] for format ", RowFormatName(format)));
  }
  const uint64_t stride_bytes = uint64_t{header.stride_words} * sizeof(uint32_t);
  const uint64_t max_rows =
      (std::numeric_limits<uint64_t>::max() - sizeof(TableHeader)) / stride_bytes;
  if (header.rows == 0 || header.rows > max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows ", header.rows, " is outside [1, ", max_rows, "]"));
  }
  if (header.data_bytes != header.rows * stride_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_bytes ", header.data_bytes,
                     " is not rows * stride_words * 4 = ", header.rows * stride_bytes));
  }
  if (std::any_of(std::begin(header.reserved), std::end(header.reserved),
                  [](uint8_t byte) { return byte != 0; })) {
    return absl::InvalidArgumentError("reserved header bytes are not zero");
  }
  if (file_bytes != sizeof(TableHeader) + header.data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("size mismatch: the file has ", file_bytes,
                                                   " bytes, the header implies ",
                                                   sizeof(TableHeader) + header.data_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

struct TableDigest::State {
  TableHeader header;
  crypto_generichash_state chunk;
  uint64_t chunk_fill = 0;
  std::vector<TableDigestBytes> chunks;
};

TableDigest::TableDigest(const TableHeader& header) : state_(std::make_unique<State>()) {
  // sodium_init only picks the fastest BLAKE2b implementation here (the portable one otherwise);
  // hashing needs no entropy, so its result does not matter.
  [[maybe_unused]] const int sodium_ready = sodium_init();
  state_->header = header;
  crypto_generichash_init(&state_->chunk, nullptr, 0, kTableDigestBytes);
}

TableDigest::~TableDigest() = default;

void TableDigest::Update(absl::Span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const uint64_t take = std::min<uint64_t>(bytes.size(), kDigestChunkBytes - state_->chunk_fill);
    crypto_generichash_update(&state_->chunk, bytes.data(), take);
    state_->chunk_fill += take;
    bytes.remove_prefix(take);
    if (state_->chunk_fill == kDigestChunkBytes) {
      TableDigestBytes digest;
      crypto_generichash_final(&state_->chunk, digest.data(), digest.size());
      state_->chunks.push_back(digest);
      crypto_generichash_init(&state_->chunk, nullptr, 0, kTableDigestBytes);
      state_->chunk_fill = 0;
    }
  }
}

TableDigestBytes TableDigest::Finish() {
  if (state_->chunk_fill > 0) {
    TableDigestBytes digest;
    crypto_generichash_final(&state_->chunk, digest.data(), digest.size());
    state_->chunks.push_back(digest);
    state_->chunk_fill = 0;
  }
  return CombineDigests(state_->header, state_->chunks);
}

TableDigestBytes DigestTable(const TableHeader& header, absl::Span<const uint8_t> rows,
                             int threads) {
  [[maybe_unused]] const int sodium_ready = sodium_init();
  const uint64_t chunks = (rows.size() + kDigestChunkBytes - 1) / kDigestChunkBytes;
  std::vector<TableDigestBytes> digests(chunks);
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t c = next++; c < chunks; c = next++) {
      digests[c] = ChunkDigest(rows.subspan(c * kDigestChunkBytes, kDigestChunkBytes));
    }
  };
  std::vector<std::thread> pool;
  for (uint64_t t = 1; t < std::min<uint64_t>(HashThreads(threads), chunks); ++t) {
    pool.emplace_back(work);
  }
  work();
  for (std::thread& t : pool) t.join();
  return CombineDigests(header, digests);
}

namespace {

// An opened table file: its descriptor (closed when this goes) and validated header.
struct OpenedFile {
  explicit OpenedFile(int fd_in) : fd(fd_in) {}
  ~OpenedFile() { close(fd); }
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;
  int fd;
  uint64_t file_bytes = 0;
  TableHeader header;
};

// Opens `path` without blocking (a FIFO would block open() until a writer comes), refuses anything
// but a regular file, and reads and validates the header.
absl::StatusOr<std::unique_ptr<OpenedFile>> OpenTableFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open table ", path));
  auto file = std::make_unique<OpenedFile>(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  file->file_bytes = static_cast<uint64_t>(st.st_size);
  if (file->file_bytes < sizeof(TableHeader)) {
    return absl::InvalidArgumentError(absl::StrCat("truncated file ", path, ": ",
                                                   file->file_bytes, " bytes, the header alone is ",
                                                   sizeof(TableHeader)));
  }
  const ssize_t read_bytes = pread(fd, &file->header, sizeof(file->header), 0);
  if (read_bytes < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read the header of ", path));
  }
  if (read_bytes != static_cast<ssize_t>(sizeof(file->header))) {
    return absl::InvalidArgumentError(absl::StrCat("truncated file ", path, " while reading"));
  }
  if (absl::Status status = ValidateHeader(file->header, file->file_bytes); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  }
  return file;
}

absl::Status CheckDigest(const TableHeader& header, const TableDigestBytes& actual) {
  if (std::equal(actual.begin(), actual.end(), header.digest)) return absl::OkStatus();
  auto hex = [](const uint8_t* bytes) {
    return absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(bytes), kTableDigestBytes));
  };
  return absl::InvalidArgumentError(absl::StrCat("digest mismatch: the header says ",
                                                 hex(header.digest), ", the contents hash to ",
                                                 hex(actual.data())));
}

// Reads `bytes` bytes of `fd` from `offset` into `out`; DATA_LOSS if the file ends first.
absl::Status ReadFully(int fd, uint8_t* out, uint64_t bytes, uint64_t offset) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = pread(fd, out + done, std::min<uint64_t>(bytes - done, 1 << 24),
                            static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "cannot read the table");
    if (n == 0) return absl::DataLossError("the table file shrank while it was read");
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Table>> Table::Open(const std::string& path) {
  auto file = OpenTableFile(path);
  if (!file.ok()) return file.status();
  void* mapping = mmap(nullptr, (*file)->file_bytes, PROT_READ, MAP_PRIVATE, (*file)->fd, 0);
  if (mapping == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("cannot map ", path));
  return std::unique_ptr<Table>(new Table(mapping, (*file)->file_bytes, (*file)->header));
}

absl::StatusOr<std::unique_ptr<Table>> Table::Load(const std::string& path,
                                                   const LoadOptions& options) {
  auto file = OpenTableFile(path);
  if (!file.ok()) return file.status();
  const uint64_t bytes = (*file)->file_bytes;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot allocate ", bytes, " bytes for ", path));
  }
  // Huge pages where the kernel allows them: a fault per 2 MiB instead of per 4 KiB.
  madvise(memory, bytes, MADV_HUGEPAGE);
  std::unique_ptr<Table> table(new Table(memory, bytes, (*file)->header));
  uint8_t* const base = static_cast<uint8_t*>(memory);
  std::memcpy(base, &(*file)->header, sizeof(TableHeader));
  uint8_t* const rows = base + sizeof(TableHeader);
  const uint64_t data_bytes = (*file)->header.data_bytes;
  const uint64_t chunks = (data_bytes + kDigestChunkBytes - 1) / kDigestChunkBytes;
  // The reader (this thread) and the hashers overlap: a hasher takes the next chunk once it has
  // been read, so verifying costs little more than reading.
  std::vector<TableDigestBytes> digests(chunks);
  absl::Mutex mu;
  uint64_t read_bytes = 0;  // guarded by mu
  bool failed = false;      // guarded by mu
  std::atomic<uint64_t> next{0};
  auto hash = [&] {
    for (uint64_t c = next++; c < chunks; c = next++) {
      const uint64_t end = std::min(data_bytes, (c + 1) * kDigestChunkBytes);
      {
        absl::MutexLock lock(&mu);
        auto ready = [&] { return failed || read_bytes >= end; };
        mu.Await(absl::Condition(&ready));
        if (failed) return;
      }
      digests[c] = ChunkDigest(absl::MakeConstSpan(rows + c * kDigestChunkBytes,
                                                   end - c * kDigestChunkBytes));
    }
  };
  [[maybe_unused]] const int sodium_ready = sodium_init();
  constexpr uint64_t kPiece = uint64_t{8} << 20;
  // A table read in one piece has nothing to overlap: it is hashed on this thread afterwards.
  const bool hash_here = data_bytes <= kPiece;
  std::vector<std::thread> hashers;
  if (options.verify && !hash_here) {
    for (uint64_t t = 0; t < std::min<uint64_t>(HashThreads(options.threads), chunks); ++t) {
      hashers.emplace_back(hash);
    }
  }
  absl::Status status = absl::OkStatus();
  for (uint64_t offset = 0; offset < data_bytes && status.ok(); offset += kPiece) {
    const uint64_t piece = std::min(kPiece, data_bytes - offset);
    status = ReadFully((*file)->fd, rows + offset, piece, sizeof(TableHeader) + offset);
    absl::MutexLock lock(&mu);
    read_bytes = status.ok() ? offset + piece : read_bytes;
    failed = !status.ok();
  }
  for (std::thread& t : hashers) t.join();
  if (options.verify && hash_here && status.ok()) hash();
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
  if (options.verify) {
    if (absl::Status s = CheckDigest((*file)->header, CombineDigests((*file)->header, digests));
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
  }
  mprotect(memory, bytes, PROT_READ);
  return table;
}

Table::Table(const void* mapping, size_t mapping_bytes, const TableHeader& header)
    : mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      header_(header),
      words_(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(mapping) +
                                               sizeof(TableHeader))) {}

Table::~Table() { munmap(const_cast<void*>(mapping_), mapping_bytes_); }

TableDigestBytes Table::digest() const {
  TableDigestBytes digest;
  std::copy(std::begin(header_.digest), std::end(header_.digest), digest.begin());
  return digest;
}

std::string Table::DigestHex() const {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(header_.digest), kTableDigestBytes));
}

dpf::TableView Table::view() const {
  return dpf::TableView{.words = words_,
                        .rows = header_.rows,
                        .row_words = header_.row_words,
                        .stride_words = header_.stride_words};
}

absl::Span<const uint32_t> Table::row(uint64_t i) const {
  return absl::MakeConstSpan(words_ + i * header_.stride_words, header_.row_words);
}

absl::Status Table::DecodeRow(uint64_t i, absl::Span<float> values) const {
  if (i >= rows()) {
    return absl::InvalidArgumentError(absl::StrCat("row ", i, " is outside [0, ", rows(), ")"));
  }
  return embedding::DecodeRow(format(), frac_bits(), dim(), row(i).first(data_words()), values);
}

absl::Status Table::Verify() const {
  return CheckDigest(header_, DigestTable(header_, absl::MakeConstSpan(
                                                       reinterpret_cast<const uint8_t*>(words_),
                                                       header_.data_bytes)));
}

}  // namespace veil::embedding
