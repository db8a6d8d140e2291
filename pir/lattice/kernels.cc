#include "pir/lattice/kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

namespace veil::lattice {
namespace {

struct CpuFeatures {
  bool avx2 = false;    // the int32 kernels at 8 lanes (kernels_avx2.cc)
  bool avx512 = false;  // F + BW (byte widening and byte compares)
  bool vnni = false;    // AVX512_VNNI (vpdpbusd)
};

// CPUID plus XGETBV (the OS must save the ZMM state), as dpf/kernels.cc does.
CpuFeatures DetectCpu() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  if (!osxsave || __get_cpuid_max(0, nullptr) < 7) return f;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool zmm_state = (xcr0_lo & 0xe6) == 0xe6;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (xcr0_lo & 0x6) == 0x6 && ((b >> 5) & 1);
  f.avx512 = zmm_state && ((b >> 16) & 1) && ((b >> 30) & 1);
  f.vnni = f.avx512 && ((c >> 11) & 1);
  return f;
}

const CpuFeatures& Cpu() {
  static const CpuFeatures cpu = DetectCpu();
  return cpu;
}

bool CpuRuns(ProductKernel kernel) {
  const CpuFeatures& cpu = Cpu();
  switch (kernel) {
    case ProductKernel::kReference:
      return true;
    case ProductKernel::kInt32Rows:
    case ProductKernel::kInt32Lanes:
      return cpu.avx512 || cpu.avx2;
    case ProductKernel::kPlanesRows:
    case ProductKernel::kPlanesLanes:
      return cpu.vnni;
  }
  return false;
}

std::atomic<bool> avx2_int32_for_testing{false};

// AVX-512 for the int32 forms and MultiplyWords: where the CPU has it, unless a test asks for
// AVX2 on a CPU that has both.
bool UseAvx512() { return Cpu().avx512 && !(avx2_int32_for_testing.load() && Cpu().avx2); }

// The int32 form for this CPU: AVX-512 where it has it (avx512: UseAvx512()), else AVX2 (CpuRuns
// checked first).
internal::RowRangeKernel Int32Kernel(bool lanes, bool avx512) {
  if (lanes) return avx512 ? internal::Int32Lanes : internal::Int32LanesAvx2;
  return avx512 ? internal::Int32Rows : internal::Int32RowsAvx2;
}

// Word y as the AVX2 forms read it: y = h 2^16 + l, l = y's low half as a signed 16-bit number,
// h the high half of y - l (mod 2^32); each stored as its 16 bits.
void SplitWord(uint32_t y, uint16_t& l, uint16_t& h) {
  l = static_cast<uint16_t>(y);
  const uint32_t signed_l = static_cast<uint32_t>(static_cast<int32_t>(static_cast<int16_t>(l)));
  h = static_cast<uint16_t>((y - signed_l) >> 16);
}

void Put16(uint32_t* words, uint64_t index16, uint16_t value) {
  std::memcpy(reinterpret_cast<uint8_t*>(words) + 2 * index16, &value, 2);
}

// Word c of query b in the AVX2 rows form's split layout (kernels.h).
void PutSplitRows(uint32_t y, uint64_t b, uint64_t c, uint64_t width, uint32_t* words) {
  uint16_t l, h;
  SplitWord(y, l, h);
  const uint64_t at = 2 * (b * width + c / 16 * 16) + c % 16;
  Put16(words, at, l);
  Put16(words, at + 16, h);
}

// Word c of query b in the AVX2 lanes form's pair layout (kernels.h).
void PutSplitLanes(uint32_t y, uint64_t b, uint64_t c, uint64_t width, uint32_t* words) {
  uint16_t l, h;
  SplitWord(y, l, h);
  const uint64_t lane = b % 32;
  const uint64_t at = 2 * ((b / 32 * (width / 2) + c / 2) * internal::kSplitLanesPairWords) +
                      (lane / 8) * 16 + (lane % 8) * 2 + c % 2;
  Put16(words, at, l);
  Put16(words, at + 64, h);
}

constexpr ProductKernel kAllKernels[] = {ProductKernel::kReference, ProductKernel::kInt32Rows,
                                         ProductKernel::kInt32Lanes, ProductKernel::kPlanesRows,
                                         ProductKernel::kPlanesLanes};

// Runs fn(begin, end) over `threads` contiguous slices of [0, rows), cut at multiples of 24 rows
// (a multiple of the fast kernels' row blocks).
void ForRowSlices(uint64_t rows, int threads, const std::function<void(uint64_t, uint64_t)>& fn) {
  constexpr uint64_t kCut = 24;
  const uint64_t blocks = (rows + kCut - 1) / kCut;
  const uint64_t workers = std::max<uint64_t>(1, std::min<uint64_t>(threads, blocks));
  std::vector<std::thread> pool;
  for (uint64_t t = 1; t < workers; ++t) {
    pool.emplace_back(fn, std::min(rows, blocks * t / workers * kCut),
                      std::min(rows, blocks * (t + 1) / workers * kCut));
  }
  fn(0, std::min(rows, blocks / workers * kCut));
  for (std::thread& th : pool) th.join();
}

void ReferenceRows(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                   uint64_t row_begin, uint64_t row_end, uint32_t* out, uint64_t out_stride) {
  for (uint64_t r = row_begin; r < row_end; ++r) {
    const int8_t* row = db.row(r);
    for (int b = 0; b < batch; ++b) {
      const uint32_t* q = queries.data() + b * db.cols;
      uint32_t sum = 0;
      for (uint64_t c = 0; c < db.cols; ++c) {
        sum += static_cast<uint32_t>(static_cast<int32_t>(row[c])) * q[c];
      }
      out[b * out_stride + r] = sum;
    }
  }
}

absl::Status CheckArguments(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                            absl::Span<uint32_t> out, uint64_t out_stride, int threads) {
  if (db.data == nullptr || db.rows == 0 || db.cols == 0) {
    return absl::InvalidArgumentError("the byte matrix is empty");
  }
  if (db.stride < AlignedStride(db.cols)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the byte matrix's stride ", db.stride, " is below ", AlignedStride(db.cols)));
  }
  if (batch < 1 || threads < 1) {
    return absl::InvalidArgumentError("batch and threads must be at least 1");
  }
  if (queries.size() != static_cast<uint64_t>(batch) * db.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("queries hold ", queries.size(), " words, expected ", batch, " x ", db.cols));
  }
  if (out_stride < db.rows || out.size() < (batch - 1) * out_stride + db.rows) {
    return absl::InvalidArgumentError(absl::StrCat("out holds ", out.size(), " words with stride ",
                                                   out_stride, ", expected ", batch, " answers of ",
                                                   db.rows, " words"));
  }
  return absl::OkStatus();
}

// The bucket of a batch size: ceil(log2(batch)), capped.
constexpr int kBuckets = 16;
int BucketOf(int batch) {
  int bucket = 0;
  while (bucket + 1 < kBuckets && (1 << bucket) < batch) ++bucket;
  return bucket;
}

// Fastest of three timed runs of each kernel on a synthetic matrix of about 2^26 multiply-adds,
// between 64 KiB and 64 MiB: small batches stream it from beyond the last-level cache, as they
// stream a real table. The reference only competes where no fast kernel runs.
ProductKernel MeasureFastest(int batch) {
  constexpr uint64_t kCols = 4096;
  const uint64_t rows = std::clamp<uint64_t>((uint64_t{1} << 26) / (kCols * batch), 16, 16384);
  std::vector<int8_t> bytes(rows * kCols, 1);
  std::vector<uint32_t> queries(batch * kCols, 0x9e3779b9u), out(batch * rows);
  const ByteMatrixView db{bytes.data(), rows, kCols, kCols};
  std::vector<ProductKernel> candidates = AvailableProductKernels();
  if (candidates.size() > 1) candidates.erase(candidates.begin());
  ProductKernel best = ProductKernel::kReference;
  double best_s = 1e300;
  for (ProductKernel kernel : candidates) {
    double fastest = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      (void)MultiplyBytes(db, queries, batch, absl::MakeSpan(out), rows, 1, kernel);
      fastest = std::min(
          fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (fastest < best_s) {
      best_s = fastest;
      best = kernel;
    }
  }
  return best;
}

}  // namespace

bool internal::CpuHasAvx512() { return Cpu().avx512; }

void internal::UseAvx2Int32ForTesting(bool avx2) { avx2_int32_for_testing = avx2; }

std::string_view ProductKernelName(ProductKernel kernel) {
  switch (kernel) {
    case ProductKernel::kReference:
      return "reference";
    case ProductKernel::kInt32Rows:
      return "int32-rows";
    case ProductKernel::kInt32Lanes:
      return "int32-lanes";
    case ProductKernel::kPlanesRows:
      return "planes-rows";
    case ProductKernel::kPlanesLanes:
      return "planes-lanes";
  }
  return "unknown";
}

absl::StatusOr<ProductKernel> ParseProductKernel(std::string_view name) {
  for (ProductKernel k : kAllKernels) {
    if (name == ProductKernelName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown product kernel '", std::string(name),
                   "' (reference, int32-rows, int32-lanes, planes-rows or planes-lanes)"));
}

std::vector<ProductKernel> AvailableProductKernels() {
  std::vector<ProductKernel> kernels;
  for (ProductKernel k : kAllKernels) {
    if (CpuRuns(k)) kernels.push_back(k);
  }
  return kernels;
}

absl::Status MultiplyBytes(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                           absl::Span<uint32_t> out, uint64_t out_stride, int threads,
                           ProductKernel kernel) {
  if (absl::Status s = CheckArguments(db, queries, batch, out, out_stride, threads); !s.ok()) {
    return s;
  }
  if (!CpuRuns(kernel)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this CPU cannot run the ", std::string(ProductKernelName(kernel)), " kernel"));
  }
  if (kernel == ProductKernel::kReference) {
    ForRowSlices(db.rows, threads, [&](uint64_t begin, uint64_t end) {
      ReferenceRows(db, queries, batch, begin, end, out.data(), out_stride);
    });
    return absl::OkStatus();
  }
  const bool lanes = kernel == ProductKernel::kInt32Lanes || kernel == ProductKernel::kPlanesLanes;
  const bool planes = kernel == ProductKernel::kPlanesRows || kernel == ProductKernel::kPlanesLanes;
  const bool avx512 = UseAvx512();
  const bool split = !planes && !avx512;  // the AVX2 forms' halves
  internal::PreparedQueries prepared;
  prepared.batch = batch;
  prepared.lanes = lanes ? (static_cast<uint64_t>(batch) + 15) / 16 * 16 : batch;
  const uint64_t width = AlignedStride(db.cols);
  const uint64_t groups = (static_cast<uint64_t>(batch) + 31) / 32;
  prepared.group_stride = 32 * width;
  prepared.col_stride = split && lanes ? internal::kSplitLanesPairWords : 32;
  const uint64_t words = lanes ? groups * 32 * width : batch * width;
  std::vector<uint32_t> word_buffer(planes ? 0 : words, 0);
  std::vector<uint8_t> plane_buffer(planes ? 4 * words : 0, 0);
  for (int b = 0; b < batch; ++b) {
    const uint64_t g = b / 32, l = b % 32;
    for (uint64_t c = 0; c < db.cols; ++c) {
      const uint32_t y = queries[b * db.cols + c];
      if (split) {
        (lanes ? PutSplitLanes : PutSplitRows)(y, b, c, width, word_buffer.data());
        continue;
      }
      if (!planes) {
        word_buffer[lanes ? g * prepared.group_stride + c * 32 + l : b * width + c] = y;
        continue;
      }
      for (uint64_t p = 0; p < 4; ++p) {
        const uint64_t at = lanes ? ((g * 4 + p) * (width / 4) + c / 4) * 128 + l * 4 + c % 4
                                  : (4 * b + p) * width + c;
        plane_buffer[at] = static_cast<uint8_t>(y >> (8 * p));
      }
    }
  }
  prepared.words = word_buffer.data();
  prepared.planes = plane_buffer.data();
  const internal::RowRangeKernel run =
      planes ? (lanes ? internal::PlanesLanes : internal::PlanesRows) : Int32Kernel(lanes, avx512);
  ForRowSlices(db.rows, threads, [&](uint64_t begin, uint64_t end) {
    if (begin < end) run(db, prepared, begin, end, out.data(), out_stride);
  });
  return absl::OkStatus();
}

absl::Status MultiplyBytesByMatrix(const ByteMatrixView& db, absl::Span<const uint32_t> a,
                                   uint64_t n, absl::Span<uint32_t> out, uint64_t out_stride,
                                   int threads) {
  const uint64_t width = AlignedStride(db.cols);
  if (n == 0 || n % 32 != 0 || a.size() != width * n) {
    return absl::InvalidArgumentError(absl::StrCat("a ", a.size(), "-word matrix of ", n,
                                                   " columns, expected ", width,
                                                   " x n, n a "
                                                   "positive multiple of 32"));
  }
  // The argument checks of MultiplyBytes, for n queries of width words.
  if (absl::Status s =
          CheckArguments(db, a.first(n * db.cols), static_cast<int>(n), out, out_stride, threads);
      !s.ok()) {
    return s;
  }
  if (!CpuRuns(ProductKernel::kInt32Lanes)) {
    ForRowSlices(db.rows, threads, [&](uint64_t begin, uint64_t end) {
      for (uint64_t r = begin; r < end; ++r) {
        for (uint64_t k = 0; k < n; ++k) {
          uint32_t sum = 0;
          for (uint64_t c = 0; c < db.cols; ++c) {
            sum += static_cast<uint32_t>(static_cast<int32_t>(db.row(r)[c])) * a[c * n + k];
          }
          out[k * out_stride + r] = sum;
        }
      }
    });
    return absl::OkStatus();
  }
  internal::PreparedQueries prepared;
  prepared.batch = static_cast<int>(n);
  prepared.lanes = n;
  prepared.group_stride = 32;
  prepared.col_stride = n;
  prepared.words = a.data();
  // The AVX2 lanes form reads A's words split in pairs of columns (a copy of A's size).
  const bool avx512 = UseAvx512();
  std::vector<uint32_t> pairs;
  if (!avx512) {
    pairs.assign(a.size(), 0);
    for (uint64_t c = 0; c < width; ++c) {
      for (uint64_t k = 0; k < n; ++k) PutSplitLanes(a[c * n + k], k, c, width, pairs.data());
    }
    prepared.group_stride = 32 * width;
    prepared.col_stride = internal::kSplitLanesPairWords;
    prepared.words = pairs.data();
  }
  // Each thread's rows in runs of kRunRows: the lanes form passes over its rows once per group of
  // 32 of A's columns (40 groups at n = 1280), so a run (2 MiB of a 1,024-column slice) stays in
  // the last-level cache for all of them, where a whole slice (24 MiB at 2^24 x 64 B) did not.
  constexpr uint64_t kRunRows = 2016;  // a multiple of the kernels' row blocks (24, 48)
  const internal::RowRangeKernel run = Int32Kernel(/*lanes=*/true, avx512);
  ForRowSlices(db.rows, threads, [&](uint64_t begin, uint64_t end) {
    for (uint64_t first = begin; first < end; first += kRunRows) {
      run(db, prepared, first, std::min(end, first + kRunRows), out.data(), out_stride);
    }
  });
  return absl::OkStatus();
}

void MultiplyWords(const uint32_t* rows, uint64_t count, uint64_t n, const uint32_t* vectors,
                   uint64_t nvectors, uint32_t* out, uint64_t out_stride) {
  if (n % 16 == 0 && UseAvx512()) {
    internal::MultiplyWordsAvx512(rows, count, n, vectors, nvectors, out, out_stride);
    return;
  }
  if (n % 8 == 0 && Cpu().avx2) {
    internal::MultiplyWordsAvx2(rows, count, n, vectors, nvectors, out, out_stride);
    return;
  }
  for (uint64_t r = 0; r < count; ++r) {
    for (uint64_t j = 0; j < nvectors; ++j) {
      uint32_t sum = 0;
      for (uint64_t k = 0; k < n; ++k) sum += rows[r * n + k] * vectors[j * n + k];
      out[j * out_stride + r] = sum;
    }
  }
}

ProductKernel FastestKernelForBatch(int batch) {
  // 1 + the kernel, or 0 while not measured (static storage starts zeroed).
  static std::atomic<int> known[kBuckets];
  static std::mutex measuring;
  const int bucket = BucketOf(std::max(batch, 1));
  int k = known[bucket].load(std::memory_order_acquire);
  if (k == 0) {
    std::lock_guard<std::mutex> lock(measuring);
    k = known[bucket].load(std::memory_order_acquire);
    if (k == 0) {
      k = 1 + static_cast<int>(MeasureFastest(1 << bucket));
      known[bucket].store(k, std::memory_order_release);
    }
  }
  return static_cast<ProductKernel>(k - 1);
}

absl::Status MultiplyBytes(const ByteMatrixView& db, absl::Span<const uint32_t> queries, int batch,
                           absl::Span<uint32_t> out, uint64_t out_stride, int threads) {
  return MultiplyBytes(db, queries, batch, out, out_stride, threads, FastestKernelForBatch(batch));
}

}  // namespace veil::lattice
