// Fuzz target for the client hint blob a client receives from an LWE server
// (pir/lattice/hint.h, ParseClientHint), checked against a fixed expected shape, seed and table
// digest. The first byte chooses whether the target first rewrites the header's client digest to
// match the payload (odd) or leaves the bytes as they are (even), so that mutations of the payload
// reach the checks after the digest.
// Invariants: a blob is refused with INVALID_ARGUMENT or FAILED_PRECONDITION, or its header is the
// expected one and the returned hint is exactly its payload.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pir/lattice/hint.h"
#include "pir/lattice/shape.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

using namespace veil::lattice;

struct Expected {
  Shape shape;
  Seed seed;
  embedding::TableDigestBytes table_digest{};
};

// SimplePIR's: DoublePIR's client hint (4n x n words) is 16 MiB, too big an input to fuzz; the
// blob's parser is the same for both protocols.
const Expected& Expect() {
  static const Expected* expected = [] {
    auto* e = new Expected;
    auto shape = ChooseShape(Protocol::kSimplePir, 16, 2);
    Check(shape.ok(), "ChooseShape failed");
    e->shape = *shape;
    e->table_digest.fill(0x40);
    e->seed = DeriveSeed(e->shape, e->table_digest);
    return e;
  }();
  return *expected;
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  const Expected& e = Expect();
  Hint hint;
  hint.client.assign(e.shape.d1 * kLweDimension, 7);
  const HintHeader header = MakeHintHeader(e.shape, e.seed, e.table_digest, hint);
  std::vector<uint8_t> blob = SerializeClientHint(header, hint);
  blob.insert(blob.begin(), 1);
  std::vector<uint8_t> stale = blob;
  stale[1 + offsetof(HintHeader, table_digest)] ^= 1;
  return {blob, stale};
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::lattice;
  using veil::fuzz::Check;
  if (size < 1) return 0;
  const veil::fuzz::Expected& e = veil::fuzz::Expect();
  std::vector<uint8_t> blob(data + 1, data + size);
  if ((data[0] & 1) != 0 && blob.size() >= sizeof(HintHeader)) {
    const Digest digest = Blake2b256(absl::MakeConstSpan(blob).subspan(sizeof(HintHeader)));
    std::memcpy(blob.data() + offsetof(HintHeader, client_digest), digest.data(), digest.size());
  }
  auto hint = ParseClientHint(blob, e.shape, e.seed, e.table_digest);
  if (!hint.ok()) {
    Check(hint.status().code() == absl::StatusCode::kInvalidArgument ||
              hint.status().code() == absl::StatusCode::kFailedPrecondition,
          "ParseClientHint: undocumented code");
    return 0;
  }
  HintHeader header;
  std::memcpy(&header, blob.data(), sizeof(header));
  Check(header.rows == e.shape.rows && header.d0 == e.shape.d0 && header.d1 == e.shape.d1 &&
            header.protocol == static_cast<uint8_t>(e.shape.protocol) &&
            std::memcmp(header.seed, e.seed.data(), e.seed.size()) == 0 &&
            std::memcmp(header.table_digest, e.table_digest.data(), e.table_digest.size()) == 0,
        "a hint of other parameters was accepted");
  Check(hint->size() * 4 == blob.size() - sizeof(HintHeader) &&
            std::memcmp(hint->data(), blob.data() + sizeof(HintHeader),
                        blob.size() - sizeof(HintHeader)) == 0,
        "the hint is not the blob's payload");
  return 0;
}
