// The C ABI (veil.h) over veil::client::Client (two-server dpf2 lookups and layouts): converts
// arguments, catches everything, and keeps the last error message per thread (veil_c_support.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mobile_client/client.h"
#include "mobile_client/veil.h"
#include "mobile_client/veil_c_support.h"

struct veil_client {
  std::unique_ptr<veil::client::Client> client;
};

struct veil_layout {
  veil::embedding::Layout layout;
};

using namespace veil_c_support;  // NOLINT: the ABI's shared helpers

namespace veil_c_support {
template <>
constexpr const char* kKind<veil_client> = "veil_client";
template <>
constexpr const char* kKind<veil_layout> = "veil_layout";
}  // namespace veil_c_support

namespace {

template <typename T>
using RangeLookupMethod = absl::StatusOr<std::vector<T>> (veil::client::Client::*)(
    absl::Span<const uint64_t>, absl::Span<const veil::client::RowRange>);

// The body of veil_lookup_in_ranges and veil_lookup_words_in_ranges: `lookup` returns
// `row_elements` (a TableInfo field: dim or row_words) elements per index.
template <typename T>
int LookupInRanges(veil_client* client, const uint64_t* indices, const veil_row_range* ranges,
                   size_t count, T* out, size_t out_len,
                   uint32_t veil::client::TableInfo::*row_elements, const char* element_name,
                   RangeLookupMethod<T> lookup) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || ranges == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices, ranges and out are required");
    }
    if (int rc = CheckOut(out_len, count, client->client->table().*row_elements, element_name);
        rc != VEIL_OK) {
      return rc;
    }
    std::vector<veil::client::RowRange> row_ranges(count);
    for (size_t i = 0; i < count; ++i) row_ranges[i] = {ranges[i].first_row, ranges[i].rows};
    auto rows = (client->client.get()->*lookup)(absl::MakeConstSpan(indices, count), row_ranges);
    if (!rows.ok()) return Fail(rows.status());
    std::copy(rows->begin(), rows->end(), out);
    return VEIL_OK;
  });
}

}  // namespace

extern "C" {

int veil_abi_version(void) { return VEIL_ABI_VERSION; }

int veil_client_connect(const veil_client_options* options, veil_client** out_client) {
  return Guarded([&]() -> int {
    if (out_client == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "out_client is NULL");
    }
    *out_client = nullptr;
    if (int rc = CheckStructSize(options, "veil_client_options"); rc != VEIL_OK) return rc;
    if (options->server0 == nullptr || options->server1 == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "both server addresses are required");
    }
    veil::client::ClientOptions o;
    o.server0 = options->server0;
    o.server1 = options->server1;
    if (options->timeout_ms != 0) o.timeout = absl::Milliseconds(options->timeout_ms);
    if (options->tls_trusted_certs != nullptr) o.tls_trusted_certs = options->tls_trusted_certs;
    if (options->tls_server_name0 != nullptr) o.tls_server_name0 = options->tls_server_name0;
    if (options->tls_server_name1 != nullptr) o.tls_server_name1 = options->tls_server_name1;
    if (options->row_key_file != nullptr) o.row_key_file = options->row_key_file;
    o.min_epoch = options->min_epoch;
    if (options->failure_latch_file != nullptr) o.failure_latch_file = options->failure_latch_file;
    if (options->pad_bags_to == VEIL_NO_BAG_PADDING) {
      o.pad_bags_to = 0;
    } else if (options->pad_bags_to != 0) {
      o.pad_bags_to = options->pad_bags_to;
    }
    if (options->prg != nullptr) {
      auto prg = veil::dpf::ParsePrg(options->prg);
      if (!prg.ok()) return Fail(prg.status());
      o.prg = *prg;
    }
    auto client = veil::client::Client::Connect(o);
    if (!client.ok()) return Fail(client.status());
    *out_client = Register(new veil_client{*std::move(client)});
    return VEIL_OK;
  });
}

void veil_client_close(veil_client* client) { Close(client); }

int veil_client_table_info(const veil_client* client, veil_table_info* out_info) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || out_info == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client and out_info are required");
    }
    const veil::client::TableInfo& t = client->client->table();
    out_info->rows = t.rows;
    out_info->dim = t.dim;
    out_info->row_words = t.row_words;
    out_info->row_format = static_cast<int32_t>(t.format);
    out_info->frac_bits = t.frac_bits;
    out_info->epoch = t.epoch;
    std::memcpy(out_info->digest, t.digest.data(), sizeof(out_info->digest));
    return VEIL_OK;
  });
}

int veil_lookup(veil_client* client, const uint64_t* indices, size_t count, float* out,
                size_t out_len) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices and out are required");
    }
    if (int rc = CheckOut(out_len, count, client->client->table().dim, "floats"); rc != VEIL_OK) {
      return rc;
    }
    auto rows = client->client->Lookup(absl::MakeConstSpan(indices, count));
    if (!rows.ok()) return Fail(rows.status());
    std::copy(rows->begin(), rows->end(), out);
    return VEIL_OK;
  });
}

int veil_lookup_words(veil_client* client, const uint64_t* indices, size_t count, uint32_t* out,
                      size_t out_len) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices and out are required");
    }
    if (int rc = CheckOut(out_len, count, client->client->table().row_words, "words");
        rc != VEIL_OK) {
      return rc;
    }
    auto rows = client->client->LookupWords(absl::MakeConstSpan(indices, count));
    if (!rows.ok()) return Fail(rows.status());
    std::copy(rows->begin(), rows->end(), out);
    return VEIL_OK;
  });
}

int veil_lookup_in_ranges(veil_client* client, const uint64_t* indices,
                          const veil_row_range* ranges, size_t count, float* out, size_t out_len) {
  return LookupInRanges<float>(client, indices, ranges, count, out, out_len,
                               &veil::client::TableInfo::dim, "floats",
                               &veil::client::Client::LookupInRanges);
}

int veil_lookup_words_in_ranges(veil_client* client, const uint64_t* indices,
                                const veil_row_range* ranges, size_t count, uint32_t* out,
                                size_t out_len) {
  return LookupInRanges<uint32_t>(client, indices, ranges, count, out, out_len,
                                  &veil::client::TableInfo::row_words, "words",
                                  &veil::client::Client::LookupWordsInRanges);
}

int veil_layout_open(const char* path, veil_layout** out_layout) {
  return Guarded([&]() -> int {
    if (out_layout == nullptr)
      return Fail(absl::StatusCode::kInvalidArgument, "out_layout is NULL");
    *out_layout = nullptr;
    if (path == nullptr) return Fail(absl::StatusCode::kInvalidArgument, "path is NULL");
    auto layout = veil::embedding::Layout::ReadFile(path);
    if (!layout.ok()) return Fail(layout.status());
    *out_layout = Register(new veil_layout{*std::move(layout)});
    return VEIL_OK;
  });
}

void veil_layout_close(veil_layout* layout) { Close(layout); }

int veil_layout_get_info(const veil_layout* layout, veil_layout_info* out_info) {
  return Guarded([&]() -> int {
    if (!Resolve(layout) || out_info == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live layout and out_info are required");
    }
    out_info->rows = static_cast<uint32_t>(layout->layout.num_rows());
    out_info->row_values = static_cast<uint32_t>(layout->layout.params().row_words);
    out_info->keys = static_cast<uint32_t>(veil::batch::CostOf(layout->layout).keys);
    return VEIL_OK;
  });
}

int veil_lookup_layout(veil_client* client, const veil_layout* layout, const int32_t* rows,
                       size_t count, float* out, size_t out_len, uint8_t* missing,
                       size_t missing_len) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || !Resolve(layout) || rows == nullptr || out == nullptr ||
        missing == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client and layout, rows, out and missing are required");
    }
    const size_t row_values = static_cast<size_t>(layout->layout.params().row_words);
    if (int rc = CheckOut(out_len, count, row_values, "floats"); rc != VEIL_OK) return rc;
    if (int rc = CheckOut(missing_len, count, 1, "missing flags"); rc != VEIL_OK) return rc;
    auto looked_up = client->client->LookupLayout(layout->layout, absl::MakeConstSpan(rows, count));
    if (!looked_up.ok()) return Fail(looked_up.status());
    // Back in the caller's order: rows[i] is at its place among the distinct sorted rows.
    for (size_t i = 0; i < count; ++i) {
      const auto it = std::lower_bound(looked_up->rows.begin(), looked_up->rows.end(), rows[i]);
      const size_t index = static_cast<size_t>(it - looked_up->rows.begin());
      missing[i] = looked_up->missing[index];
      std::copy_n(looked_up->values.begin() + index * row_values, row_values, out + i * row_values);
    }
    return VEIL_OK;
  });
}

int veil_lookup_pooled(veil_client* client, const uint64_t* indices, size_t count,
                       const uint32_t* bag_sizes, size_t bag_count, const int32_t* weights,
                       int mode, float* out, size_t out_len) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || indices == nullptr || bag_sizes == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "a live client, indices, bag_sizes and out are required");
    }
    if (mode != VEIL_POOL_SUM && mode != VEIL_POOL_MEAN) {
      return Fail(absl::StatusCode::kInvalidArgument, absl::StrCat("unknown pooling mode ", mode));
    }
    if (int rc = CheckOut(out_len, bag_count, client->client->table().dim, "floats");
        rc != VEIL_OK) {
      return rc;
    }
    auto rows = client->client->LookupPooled(
        absl::MakeConstSpan(indices, count), absl::MakeConstSpan(bag_sizes, bag_count),
        weights == nullptr ? absl::Span<const int32_t>() : absl::MakeConstSpan(weights, count),
        mode == VEIL_POOL_SUM ? veil::client::PoolingMode::kSum : veil::client::PoolingMode::kMean);
    if (!rows.ok()) return Fail(rows.status());
    std::copy(rows->begin(), rows->end(), out);
    return VEIL_OK;
  });
}

int veil_last_call_stats(const veil_client* client, veil_call_stats* out_stats) {
  return LastCallStats(client, out_stats);
}

int veil_replica_stats(const veil_client* client, uint64_t* out_failovers, uint64_t* out_hedges) {
  return Guarded([&]() -> int {
    if (!Resolve(client)) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client is required");
    }
    veil::client::CallStats totals = client->client->totals();
    if (out_failovers != nullptr) *out_failovers = totals.failovers;
    if (out_hedges != nullptr) *out_hedges = totals.hedges;
    return VEIL_OK;
  });
}

const char* veil_last_error(void) { return last_error.c_str(); }

const char* veil_status_name(int code) {
  if (code > 0 || code < -16) return "UNKNOWN_CODE";
  // absl::StatusCodeToString returns a std::string; these are its names, with static storage.
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return kNames[-code];
}

}  // extern "C"
