// Fuzz target for the C ABI's inputs that need no server (mobile_client/veil.h): layout files
// (veil_layout_open, then the calls on the handle, after close, and a double close), the options
// structs of veil_client_connect and veil_bag_client_connect (struct_size, PRG name, missing
// addresses, the bag client's threads; the address is a closed loopback port, so nothing is ever
// reached), and return code names. The first byte chooses which; the rest is its input.
// Invariants: every call returns a code veil.h documents for it, sets a message on failure, and
// a closed handle is refused (INVALID_ARGUMENT), never used.
#include <sodium.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mobile_client/veil.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

enum Op : uint8_t { kLayout, kClientOptions, kBagOptions, kStatusName, kOps };

// Nothing listens on port 1 of the loopback: a connect that passes the checks is refused at once.
constexpr char kClosedPort[] = "127.0.0.1:1";

void CheckFailure(int rc, std::initializer_list<int> allowed, const char* what) {
  bool ok = false;
  for (int a : allowed) ok = ok || rc == a;
  Check(ok, what);
  Check(rc == VEIL_OK || veil_last_error()[0] != '\0', "a failure without a message");
}

void FuzzLayout(const uint8_t* data, size_t size) {
  if (size < 1) return;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if ((data[0] & 1) != 0 && bytes.size() >= crypto_generichash_BYTES) {
    const size_t body = bytes.size() - crypto_generichash_BYTES;
    crypto_generichash(bytes.data() + body, crypto_generichash_BYTES, bytes.data(), body, nullptr,
                       0);
  }
  // A layout's rows cost memory (12 bytes a row up to 2^30 rows, the documented bound): skip
  // the big ones, as embedding_layout_fuzzer does.
  if (bytes.size() >= 16) {
    int32_t rows;
    std::memcpy(&rows, bytes.data() + 12, 4);
    if (rows > (1 << 12)) return;
  }
  veil_layout* layout = nullptr;
  const int rc = veil_layout_open(WriteScratchFile(bytes).c_str(), &layout);
  CheckFailure(rc, {VEIL_OK, VEIL_ERR_INVALID_ARGUMENT, VEIL_ERR_RESOURCE_EXHAUSTED},
               "veil_layout_open: undocumented code");
  if (rc != VEIL_OK) {
    Check(layout == nullptr, "a failed open left a handle");
    return;
  }
  veil_layout_info info;
  Check(veil_layout_get_info(layout, &info) == VEIL_OK && info.rows > 0, "veil_layout_get_info");
  int32_t row = 0;
  float out[1];
  uint8_t missing[1];
  Check(
      veil_lookup_layout(nullptr, layout, &row, 1, out, 1, missing, 1) == VEIL_ERR_INVALID_ARGUMENT,
      "veil_lookup_layout without a client");
  veil_layout_close(layout);
  Check(veil_layout_get_info(layout, &info) == VEIL_ERR_INVALID_ARGUMENT,
        "a closed layout was used");
  veil_layout_close(layout);
}

// struct_size (4 bytes), flags (1 byte: bit 0 no server0, bit 1 no server1), the PRG name.
void FuzzClientOptions(const uint8_t* data, size_t size) {
  if (size < 5) return;
  veil_client_options options;
  std::memset(&options, 0, sizeof(options));
  std::memcpy(&options.struct_size, data, 4);
  options.server0 = (data[4] & 1) != 0 ? nullptr : kClosedPort;
  options.server1 = (data[4] & 2) != 0 ? nullptr : kClosedPort;
  options.timeout_ms = 1000;
  const std::string prg(reinterpret_cast<const char*>(data + 5), size - 5);
  if ((data[4] & 4) == 0) options.prg = prg.c_str();
  veil_client* client = reinterpret_cast<veil_client*>(&options);
  const int rc = veil_client_connect(&options, &client);
  CheckFailure(rc, {VEIL_ERR_INVALID_ARGUMENT, VEIL_ERR_UNAVAILABLE, VEIL_ERR_DEADLINE_EXCEEDED},
               "veil_client_connect: undocumented code");
  Check(client == nullptr, "a failed connect left a handle");
}

// struct_size (4 bytes), flags (1 byte: bit 0 no server), threads (8 bytes, if present).
void FuzzBagOptions(const uint8_t* data, size_t size) {
  if (size < 5) return;
  veil_bag_client_options options;
  std::memset(&options, 0, sizeof(options));
  std::memcpy(&options.struct_size, data, 4);
  options.server = (data[4] & 1) != 0 ? nullptr : kClosedPort;
  options.timeout_ms = 1000;
  if (size >= 13) std::memcpy(&options.threads, data + 5, 8);
  veil_bag_client* client = reinterpret_cast<veil_bag_client*>(&options);
  const int rc = veil_bag_client_connect(&options, &client);
  CheckFailure(rc, {VEIL_ERR_INVALID_ARGUMENT, VEIL_ERR_UNAVAILABLE, VEIL_ERR_DEADLINE_EXCEEDED},
               "veil_bag_client_connect: undocumented code");
  // A thread count out of range is refused before anything is reached.
  if (options.threads < 0 || options.threads > INT32_MAX) {
    Check(rc == VEIL_ERR_INVALID_ARGUMENT, "a bad thread count was not refused");
  }
  Check(client == nullptr, "a failed connect left a handle");
}

void FuzzStatusName(const uint8_t* data, size_t size) {
  int code = 0;
  std::memcpy(&code, data, std::min(size, sizeof(code)));
  const char* name = veil_status_name(code);
  Check(name != nullptr && name[0] != '\0', "veil_status_name gave no name");
}

std::vector<uint8_t> Bytes(Op op, std::vector<uint8_t> rest) {
  rest.insert(rest.begin(), op);
  return rest;
}

std::vector<uint8_t> Options(Op op, uint32_t struct_size, uint8_t flags, const std::string& prg) {
  std::vector<uint8_t> bytes(6 + prg.size());
  bytes[0] = op;
  std::memcpy(&bytes[1], &struct_size, 4);
  bytes[5] = flags;
  std::memcpy(bytes.data() + 6, prg.data(), prg.size());
  return bytes;
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  // A small layout file, as embedding_layout_fuzzer's seeds (digest rewritten: mode byte 1).
  const std::vector<uint8_t> layout = {
      'V', 'E', 'I', 'L', 'L', 'A', 'Y', 'T', 1, 0,  0,  0,  // magic, version
      8,   0,   0,   0,   2,   0,   0,   0,   0, 0,  0,  0,  // rows, row_words, colocation
      0,   0,   0,   0,   0,   0,   0,   0,   2, 0,  0,  0,
      1,   0,   0,   0,  // hot {0, 0}, cold {2, 1}
      1,   2,   3,   4,   5,   6,   7,   8,   9, 10, 11, 12,
      13,  14,  15,  16,  // seed
      0,   0,   0,   0};  // no hot rows
  std::vector<uint8_t> file = {1};
  file.insert(file.end(), layout.begin(), layout.end());
  file.resize(file.size() + crypto_generichash_BYTES);
  return {Bytes(kLayout, file),
          Options(kClientOptions, sizeof(veil_client_options), 0, "chacha12"),
          Options(kClientOptions, sizeof(veil_client_options), 0, "no-such-prg"),
          Options(kClientOptions, sizeof(veil_client_options) - 8, 0, "aes128"),
          Options(kClientOptions, sizeof(veil_client_options), 4, ""),
          Options(kBagOptions, sizeof(veil_bag_client_options), 0, ""),
          Options(kBagOptions, sizeof(veil_bag_client_options), 1, ""),
          Options(kBagOptions, sizeof(veil_bag_client_options), 0,
                  std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8)),  // threads -1
          Options(kBagOptions, sizeof(veil_bag_client_options), 0,
                  std::string("\0\0\0\x80\0\0\0\0", 8)),  // threads 2^31
          Options(kBagOptions, sizeof(veil_bag_client_options), 0,
                  std::string("\0\x06\0\0\0\xff\xff\xff", 8)),  // -2^40 + 1,536
          Options(kBagOptions, sizeof(veil_bag_client_options), 0,
                  std::string("\x02\0\0\0\0\0\0\0", 8)),  // threads 2
          Bytes(kStatusName, {0xf3, 0xff, 0xff, 0xff})};
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::fuzz;
  if (size < 1) return 0;
  switch (data[0] % kOps) {
    case kLayout:
      FuzzLayout(data + 1, size - 1);
      break;
    case kClientOptions:
      FuzzClientOptions(data + 1, size - 1);
      break;
    case kBagOptions:
      FuzzBagOptions(data + 1, size - 1);
      break;
    case kStatusName:
      FuzzStatusName(data + 1, size - 1);
      break;
  }
  return 0;
}
