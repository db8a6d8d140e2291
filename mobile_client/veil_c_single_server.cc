// The C ABI (veil.h) of the single-server protocols: bfv-bag (veil_bag_client, over
// veil::client::BagClient) and lwe-simple / lwe-double / lwe-exppack-s / lwe-exppack-d / lwe-hybrid
// (veil_lwe_client, over LweClient).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "mobile_client/lwe_client.h"
#include "mobile_client/veil.h"
#include "mobile_client/veil_c_support.h"

using namespace veil_c_support;  // NOLINT: the ABI's shared helpers

// ---- Protocol bfv-bag (veil_bag_client): over veil::client::BagClient. ----

struct veil_bag_client {
  std::unique_ptr<veil::client::BagClient> client;
};

namespace veil_c_support {
template <>
constexpr const char* kKind<veil_bag_client> = "veil_bag_client";
}  // namespace veil_c_support

namespace {

// The body of veil_bag_lookup_pooled and veil_bag_lookup_pooled_sums: checks the arguments, runs
// `lookup` (returning dim values per bag) and copies its result to out.
template <typename T, typename Lookup>
int BagLookup(veil_bag_client* client, const uint64_t* indices, size_t count,
              const uint32_t* bag_sizes, size_t bag_count, const int64_t* weights, T* out,
              size_t out_len, const char* element_name, Lookup lookup) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || bag_sizes == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices, bag_sizes and out are required");
    }
    if (int rc = CheckOut(out_len, bag_count, client->client->table().dim, element_name);
        rc != VEIL_OK) {
      return rc;
    }
    auto values = lookup(
        *client->client, absl::MakeConstSpan(indices, count),
        absl::MakeConstSpan(bag_sizes, bag_count),
        weights == nullptr ? absl::Span<const int64_t>() : absl::MakeConstSpan(weights, count));
    if (!values.ok()) return Fail(values.status());
    std::copy(values->begin(), values->end(), out);
    return VEIL_OK;
  });
}

}  // namespace

extern "C" {

int veil_bag_client_connect(const veil_bag_client_options* options, veil_bag_client** out_client) {
  return Guarded([&]() -> int {
    if (out_client == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "out_client is NULL");
    }
    *out_client = nullptr;
    if (int rc = CheckStructSize(options, "veil_bag_client_options"); rc != VEIL_OK) return rc;
    if (options->server == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "the server address is required");
    }
    veil::client::BagClientOptions o;
    o.server = options->server;
    if (options->timeout_ms != 0) o.timeout = absl::Milliseconds(options->timeout_ms);
    if (options->tls_trusted_certs != nullptr) o.tls_trusted_certs = options->tls_trusted_certs;
    if (options->tls_server_name != nullptr) o.tls_server_name = options->tls_server_name;
    if (options->row_key_file != nullptr) o.row_key_file = options->row_key_file;
    o.min_epoch = options->min_epoch;
    if (options->failure_latch_file != nullptr) o.failure_latch_file = options->failure_latch_file;
    // Out of int's range on either side refused here (a cast would keep the low 32 bits: a
    // positive count for -2^40 + 1,536); a negative count in range Connect refuses.
    if (options->threads < std::numeric_limits<int>::min() ||
        options->threads > std::numeric_limits<int>::max()) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("threads is ", options->threads, ": 0 (the device's cores) to ",
                               std::numeric_limits<int>::max()));
    }
    o.threads = static_cast<int>(options->threads);
    auto client = veil::client::BagClient::Connect(o);
    if (!client.ok()) return Fail(client.status());
    *out_client = Register(new veil_bag_client{*std::move(client)});
    return VEIL_OK;
  });
}

void veil_bag_client_close(veil_bag_client* client) { Close(client); }

int veil_bag_client_table_info(const veil_bag_client* client, veil_bag_table_info* out_info) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || out_info == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client and out_info are required");
    }
    const veil::client::BagTableInfo& t = client->client->table();
    out_info->rows = t.rows;
    out_info->dim = t.dim;
    out_info->frac_bits = t.frac_bits;
    out_info->epoch = t.epoch;
    std::memcpy(out_info->digest, t.digest.data(), sizeof(out_info->digest));
    out_info->query_bytes = t.query_bytes;
    out_info->answer_bytes = t.answer_bytes;
    out_info->galois_key_bytes = t.galois_key_bytes;
    return VEIL_OK;
  });
}

int veil_bag_lookup_pooled(veil_bag_client* client, const uint64_t* indices, size_t count,
                           const uint32_t* bag_sizes, size_t bag_count, const int64_t* weights,
                           int mode, float* out, size_t out_len) {
  if (mode != VEIL_POOL_SUM && mode != VEIL_POOL_MEAN) {
    return Guarded([mode] {
      return Fail(absl::StatusCode::kInvalidArgument, absl::StrCat("unknown pooling mode ", mode));
    });
  }
  const auto pooling =
      mode == VEIL_POOL_SUM ? veil::client::PoolingMode::kSum : veil::client::PoolingMode::kMean;
  return BagLookup(client, indices, count, bag_sizes, bag_count, weights, out, out_len, "floats",
                   [pooling](veil::client::BagClient& c, auto i, auto b, auto w) {
                     return c.LookupPooled(i, b, w, pooling);
                   });
}

int veil_bag_lookup_pooled_sums(veil_bag_client* client, const uint64_t* indices, size_t count,
                                const uint32_t* bag_sizes, size_t bag_count, const int64_t* weights,
                                int64_t* out, size_t out_len) {
  return BagLookup(client, indices, count, bag_sizes, bag_count, weights, out, out_len, "sums",
                   [](veil::client::BagClient& c, auto i, auto b, auto w) {
                     return c.LookupPooledSums(i, b, w);
                   });
}

int veil_bag_last_call_stats(const veil_bag_client* client, veil_call_stats* out_stats) {
  return LastCallStats(client, out_stats);
}

}  // extern "C"

// ---- The LWE protocols (veil_lwe_client): over
// veil::client::LweClient, which speaks all three. ----

struct veil_lwe_client {
  std::unique_ptr<veil::client::LweClient> client;
};

namespace veil_c_support {
template <>
constexpr const char* kKind<veil_lwe_client> = "veil_lwe_client";
}  // namespace veil_c_support

namespace {

// The body of veil_lwe_lookup and veil_lwe_lookup_words: checks the arguments, runs `lookup`
// (returning row_words words or dim floats per index) and copies its result to out.
template <typename T, typename Lookup>
int LweLookup(veil_lwe_client* client, const uint64_t* indices, size_t count, T* out,
              size_t out_len, bool words, Lookup lookup) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices and out are required");
    }
    const veil::client::LweTableInfo& t = client->client->table();
    if (int rc = CheckOut(out_len, count, words ? t.row_words : t.dim, words ? "words" : "floats");
        rc != VEIL_OK) {
      return rc;
    }
    auto values = lookup(*client->client, absl::MakeConstSpan(indices, count));
    if (!values.ok()) return Fail(values.status());
    std::copy(values->begin(), values->end(), out);
    return VEIL_OK;
  });
}

}  // namespace

extern "C" {

int veil_lwe_client_connect(const veil_lwe_client_options* options, veil_lwe_client** out_client) {
  return Guarded([&]() -> int {
    if (out_client == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "out_client is NULL");
    }
    *out_client = nullptr;
    if (int rc = CheckStructSize(options, "veil_lwe_client_options"); rc != VEIL_OK) return rc;
    if (options->server == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "the server address is required");
    }
    veil::client::LweClientOptions o;
    o.server = options->server;
    if (options->protocol != nullptr) o.protocol = options->protocol;
    if (options->timeout_ms != 0) o.timeout = absl::Milliseconds(options->timeout_ms);
    if (options->tls_trusted_certs != nullptr) o.tls_trusted_certs = options->tls_trusted_certs;
    if (options->tls_server_name != nullptr) o.tls_server_name = options->tls_server_name;
    if (options->row_key_file != nullptr) o.row_key_file = options->row_key_file;
    o.min_epoch = options->min_epoch;
    if (options->hint_cache_dir != nullptr) o.hint_cache_dir = options->hint_cache_dir;
    if (options->failure_latch_file != nullptr) o.failure_latch_file = options->failure_latch_file;
    auto client = veil::client::LweClient::Connect(o);
    if (!client.ok()) return Fail(client.status());
    *out_client = Register(new veil_lwe_client{*std::move(client)});
    return VEIL_OK;
  });
}

void veil_lwe_client_close(veil_lwe_client* client) { Close(client); }

int veil_lwe_client_table_info(const veil_lwe_client* client, veil_lwe_table_info* out_info) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || out_info == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client and out_info are required");
    }
    const veil::client::LweTableInfo& t = client->client->table();
    out_info->rows = t.rows;
    out_info->dim = t.dim;
    out_info->row_words = t.row_words;
    out_info->row_format = static_cast<int32_t>(t.format);
    out_info->frac_bits = t.frac_bits;
    out_info->epoch = t.epoch;
    std::memcpy(out_info->digest, t.digest.data(), sizeof(out_info->digest));
    out_info->hint_bytes = t.hint_bytes;
    out_info->query_bytes = t.query_bytes;
    out_info->answer_bytes = t.answer_bytes;
    out_info->hint_from_cache = client->client->hint_from_cache() ? 1 : 0;
    return VEIL_OK;
  });
}

int veil_lwe_lookup(veil_lwe_client* client, const uint64_t* indices, size_t count, float* out,
                    size_t out_len) {
  return LweLookup(client, indices, count, out, out_len, /*words=*/false,
                   [](veil::client::LweClient& c, auto i) { return c.Lookup(i); });
}

int veil_lwe_lookup_words(veil_lwe_client* client, const uint64_t* indices, size_t count,
                          uint32_t* out, size_t out_len) {
  return LweLookup(client, indices, count, out, out_len, /*words=*/true,
                   [](veil::client::LweClient& c, auto i) { return c.LookupWords(i); });
}

int veil_lwe_last_call_stats(const veil_lwe_client* client, veil_call_stats* out_stats) {
  return LastCallStats(client, out_stats);
}

int veil_lwe_prepare_queries(veil_lwe_client* client, uint32_t count, uint64_t* out_prepared) {
  return Guarded([&]() -> int {
    if (!Resolve(client)) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client is required");
    }
    if (absl::Status s = client->client->PrepareQueries(count); !s.ok()) return Fail(s);
    if (out_prepared != nullptr) *out_prepared = client->client->prepared_queries();
    return VEIL_OK;
  });
}

}  // extern "C"
