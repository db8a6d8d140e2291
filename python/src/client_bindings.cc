// veil.Client over veil::client::Client (mobile_client/client.h): private lookups through two
// dpf2 servers; over veil::client::LweClient (mobile_client/lwe_client.h) for one LWE server
// (lwe-simple, lwe-double, lwe-exppack-s, lwe-exppack-d, lwe-hybrid, lwe-double-pack); and over
// veil::client::BagClient (mobile_client/bag_client.h) for one bfv-bag server. Every network
// call releases the GIL; the C++ clients serialize concurrent calls.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dpf/params.h"
#include "embedding/layout.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "mobile_client/lwe_client.h"
#include "python/src/bindings.h"
#include "rpc/stats.h"

namespace veil::python {
namespace {

namespace py = pybind11;
using client::CallStats;
using client::Client;
using client::ClientOptions;

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
std::vector<T> ToVector(const Array<T>& array) {
  return std::vector<T>(array.data(), array.data() + array.size());
}

// A rows × width array of the values (copied: the vector dies with the call).
template <typename T>
py::array_t<T> Matrix(const std::vector<T>& values, size_t rows) {
  const size_t width = rows ? values.size() / rows : 0;
  py::array_t<T> out({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(width)});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::dict StatsDict(const rpc::StatsSnapshot& s) {
  py::dict d;
  d["calls"] = s.calls;
  d["keys"] = s.keys;
  d["passes"] = s.passes;
  d["mean_batch_keys"] = s.mean_batch_keys;
  d["max_batch_keys"] = s.max_batch_keys;
  d["latency_p50_ms"] = s.latency_p50_ms;
  d["latency_p90_ms"] = s.latency_p90_ms;
  d["latency_p99_ms"] = s.latency_p99_ms;
  d["queued_keys"] = s.queued_keys;
  d["errors"] = s.errors;
  d["connections"] = s.connections;
  d["uptime_s"] = s.uptime_s;
  return d;
}

// The client's timeout; INVALID_ARGUMENT unless positive.
absl::Duration Timeout(double seconds) {
  if (!(seconds > 0)) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive seconds, not ", seconds)));
  }
  return absl::Seconds(seconds);
}

// What every protocol's table description holds (client::TableInfo, client::LweTableInfo).
template <typename Info>
py::dict TableBase(const Info& t) {
  py::dict d;
  d["rows"] = t.rows;
  d["dim"] = t.dim;
  d["row_words"] = t.row_words;
  d["format"] = embedding::RowFormatName(t.format);
  d["frac_bits"] = t.frac_bits;
  d["epoch"] = t.epoch;
  d["digest"] = t.digest_hex;
  return d;
}

py::dict TableDict(const client::TableInfo& t) {
  py::dict d = TableBase(t);
  d["backends"] = py::make_tuple(t.backend[0], t.backend[1]);
  d["max_keys_per_call"] = t.max_keys_per_call;
  d["range_queries"] = t.range_queries;
  return d;
}

std::shared_ptr<Client> Connect(const std::string& server0, const std::string& server1,
                                const std::string& protocol, const std::string& tls_certs,
                                const std::string& tls_name0, const std::string& tls_name1,
                                double timeout_s, const std::string& prg, const std::string& output,
                                uint32_t pad_bags_to, bool allow_plaintext,
                                const std::string& row_key_file, uint64_t min_epoch,
                                const std::string& failure_latch_file) {
  if (protocol != "dpf2") {
    throw StatusError(absl::UnimplementedError(
        absl::StrCat("protocol \"", protocol,
                     "\": veil.Client speaks dpf2, bfv-bag, lwe-simple, lwe-double, "
                     "lwe-exppack-s, lwe-exppack-d, lwe-hybrid and lwe-double-pack")));
  }
  const absl::Duration timeout = Timeout(timeout_s);
  ClientOptions options;
  options.server0 = server0;
  options.server1 = server1;
  options.tls_trusted_certs = tls_certs;
  options.tls_server_name0 = tls_name0;
  options.tls_server_name1 = tls_name1;
  options.timeout = timeout;
  options.prg = ValueOrThrow(dpf::ParsePrg(prg));
  if (output == "xor") {
    options.output = dpf::OutputType::kXor;
  } else if (output != "additive") {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("output \"", output, "\": use \"additive\" or \"xor\"")));
  }
  options.pad_bags_to = pad_bags_to;
  options.allow_plaintext = allow_plaintext;
  options.row_key_file = row_key_file;
  options.min_epoch = min_epoch;
  options.failure_latch_file = failure_latch_file;
  py::gil_scoped_release release;
  return std::shared_ptr<Client>(ValueOrThrow(Client::Connect(options)));
}

std::shared_ptr<client::LweClient> ConnectLwe(const std::string& server,
                                              const std::string& protocol,
                                              const std::string& tls_certs,
                                              const std::string& tls_name, double timeout_s,
                                              bool allow_plaintext, const std::string& row_key_file,
                                              const std::string& hint_cache_dir, uint64_t min_epoch,
                                              const std::string& failure_latch_file) {
  const absl::Duration timeout = Timeout(timeout_s);
  client::LweClientOptions options;
  options.server = server;
  options.protocol = protocol;
  options.tls_trusted_certs = tls_certs;
  options.tls_server_name = tls_name;
  options.timeout = timeout;
  options.allow_plaintext = allow_plaintext;
  options.row_key_file = row_key_file;
  options.hint_cache_dir = hint_cache_dir;
  options.min_epoch = min_epoch;
  options.failure_latch_file = failure_latch_file;
  py::gil_scoped_release release;
  return std::shared_ptr<client::LweClient>(ValueOrThrow(client::LweClient::Connect(options)));
}

std::shared_ptr<client::BagClient> ConnectBag(const std::string& server,
                                              const std::string& tls_certs,
                                              const std::string& tls_name, double timeout_s,
                                              bool allow_plaintext, const std::string& row_key_file,
                                              uint64_t min_epoch,
                                              const std::string& failure_latch_file, int threads) {
  client::BagClientOptions options;
  options.server = server;
  options.tls_trusted_certs = tls_certs;
  options.tls_server_name = tls_name;
  options.timeout = Timeout(timeout_s);
  options.allow_plaintext = allow_plaintext;
  options.row_key_file = row_key_file;
  options.min_epoch = min_epoch;
  options.failure_latch_file = failure_latch_file;
  options.threads = threads;
  py::gil_scoped_release release;
  return std::shared_ptr<client::BagClient>(ValueOrThrow(client::BagClient::Connect(options)));
}

py::dict BagTableDict(const client::BagTableInfo& t) {
  py::dict d;
  d["rows"] = t.rows;
  d["dim"] = t.dim;
  d["format"] = embedding::RowFormatName(embedding::RowFormat::kFixed32);
  d["frac_bits"] = t.frac_bits;
  d["epoch"] = t.epoch;
  d["digest"] = t.digest_hex;
  d["protocol"] = "bfv-bag";
  d["row_tag"] = embedding::RowTagName(t.row_tag);
  d["ring_degree"] = uint64_t{1} << t.log_n;
  d["query_blocks"] = t.query_blocks;
  d["query_bytes"] = t.query_bytes;
  d["answer_bytes"] = t.answer_bytes;
  d["key_bytes"] = t.galois_key_bytes;
  return d;
}

py::dict LweTableDict(const client::LweTableInfo& t) {
  py::dict d = TableBase(t);
  d["protocol"] = t.protocol;
  d["backend"] = t.backend;
  d["hint_bytes"] = t.hint_bytes;
  d["key_bytes"] = t.key_bytes;
  d["query_bytes"] = t.query_bytes;
  d["answer_bytes"] = t.answer_bytes;
  d["log2_failure"] = t.log2_failure;
  return d;
}

// lookup / lookup_words of either client: the rows' values or words, rows x width.
template <typename C, typename T, typename F>
py::array_t<T> Rows(C& c, const Array<uint64_t>& rows, F fetch) {
  const std::vector<uint64_t> indices = ToVector(rows);
  std::vector<T> values;
  {
    py::gil_scoped_release release;
    values = ValueOrThrow((c.*fetch)(absl::MakeConstSpan(indices)));
  }
  return Matrix(values, indices.size());
}

client::PoolingMode Pooling(const std::string& mode) {
  if (mode == "sum") return client::PoolingMode::kSum;
  if (mode == "mean") return client::PoolingMode::kMean;
  throw StatusError(
      absl::InvalidArgumentError(absl::StrCat("mode \"", mode, "\": use \"sum\" or \"mean\"")));
}

// lookup_pooled of either client (dpf2: int32 weights; bfv-bag: int64): bags x dim values.
template <typename C, typename Weight>
py::array_t<float> LookupPooled(C& c, const Array<uint64_t>& rows, const Array<uint32_t>& bag_sizes,
                                const std::optional<Array<Weight>>& weights,
                                const std::string& mode) {
  const std::vector<uint64_t> indices = ToVector(rows);
  const std::vector<uint32_t> sizes = ToVector(bag_sizes);
  const std::vector<Weight> w = weights ? ToVector(*weights) : std::vector<Weight>{};
  const client::PoolingMode pooling = Pooling(mode);
  std::vector<float> values;
  {
    py::gil_scoped_release release;
    values = ValueOrThrow(c.LookupPooled(indices, sizes, w, pooling));
  }
  return Matrix(values, sizes.size());
}

// stats of a single-server client (LweClient, BagClient).
template <typename C>
py::dict SingleServerStats(C& c) {
  rpc::StatsSnapshot stats;
  {
    py::gil_scoped_release release;
    stats = ValueOrThrow(c.ServerStats());
  }
  return StatsDict(stats);
}

py::tuple LookupLayout(Client& c, const embedding::Layout& layout, const Array<int32_t>& rows) {
  const std::vector<int32_t> wanted = ToVector(rows);
  client::LayoutLookup result;
  {
    py::gil_scoped_release release;
    result = ValueOrThrow(c.LookupLayout(layout, wanted));
  }
  py::array_t<int32_t> distinct(static_cast<py::ssize_t>(result.rows.size()));
  std::copy(result.rows.begin(), result.rows.end(), distinct.mutable_data());
  py::array_t<bool> missing(static_cast<py::ssize_t>(result.missing.size()));
  std::copy(result.missing.begin(), result.missing.end(), missing.mutable_data());
  return py::make_tuple(distinct, Matrix(result.values, result.rows.size()), missing,
                        CallDict(result.call));
}

}  // namespace

py::dict CallDict(const CallStats& c) {
  py::dict d;
  d["bytes_up"] = c.bytes_up;
  d["bytes_down"] = c.bytes_down;
  d["latency_ms"] = c.latency_ms;
  d["lookups"] = c.lookups;
  d["keys"] = c.keys;
  d["calls"] = c.calls;
  return d;
}

void RegisterClient(py::module_& m) {
  py::class_<Client, std::shared_ptr<Client>>(m, "Client")
      .def(py::init(&Connect), py::arg("server0"), py::arg("server1"), py::arg("protocol"),
           py::arg("tls_certs"), py::arg("tls_name0"), py::arg("tls_name1"), py::arg("timeout_s"),
           py::arg("prg"), py::arg("output"), py::arg("pad_bags_to"), py::arg("allow_plaintext"),
           py::arg("row_key_file"), py::arg("min_epoch"), py::arg("failure_latch_file"))
      .def("table", [](const Client& c) { return TableDict(c.table()); })
      .def("lookup",
           [](Client& c, const Array<uint64_t>& rows) {
             return Rows<Client, float>(c, rows, &Client::Lookup);
           })
      .def("lookup_words",
           [](Client& c, const Array<uint64_t>& rows) {
             return Rows<Client, uint32_t>(c, rows, &Client::LookupWords);
           })
      .def("lookup_pooled", &LookupPooled<Client, int32_t>)
      .def("lookup_layout", &LookupLayout)
      .def("stats",
           [](Client& c, int party) {
             rpc::StatsSnapshot stats;
             {
               py::gil_scoped_release release;
               stats = ValueOrThrow(c.ServerStats(party));
             }
             return StatsDict(stats);
           })
      .def("last_call", [](const Client& c) { return CallDict(c.last_call()); })
      .def("totals", [](const Client& c) { return CallDict(c.totals()); });

  using client::LweClient;
  py::class_<LweClient, std::shared_ptr<LweClient>>(m, "LweClient")
      .def(py::init(&ConnectLwe), py::arg("server"), py::arg("protocol"), py::arg("tls_certs"),
           py::arg("tls_name"), py::arg("timeout_s"), py::arg("allow_plaintext"),
           py::arg("row_key_file"), py::arg("hint_cache_dir"), py::arg("min_epoch"),
           py::arg("failure_latch_file"))
      .def("table", [](const LweClient& c) { return LweTableDict(c.table()); })
      .def("hint_from_cache", &LweClient::hint_from_cache)
      .def("lookup",
           [](LweClient& c, const Array<uint64_t>& rows) {
             return Rows<LweClient, float>(c, rows, &LweClient::Lookup);
           })
      .def("lookup_words",
           [](LweClient& c, const Array<uint64_t>& rows) {
             return Rows<LweClient, uint32_t>(c, rows, &LweClient::LookupWords);
           })
      .def("stats", &SingleServerStats<LweClient>)
      .def("prepare_queries",
           [](LweClient& c, uint32_t count) {
             {
               py::gil_scoped_release release;
               ThrowIfError(c.PrepareQueries(count));
             }
             return c.prepared_queries();
           })
      .def("last_call", [](const LweClient& c) { return CallDict(c.last_call()); })
      .def("totals", [](const LweClient& c) { return CallDict(c.totals()); });

  using client::BagClient;
  py::class_<BagClient, std::shared_ptr<BagClient>>(m, "BagClient")
      .def(py::init(&ConnectBag), py::arg("server"), py::arg("tls_certs"), py::arg("tls_name"),
           py::arg("timeout_s"), py::arg("allow_plaintext"), py::arg("row_key_file"),
           py::arg("min_epoch"), py::arg("failure_latch_file"), py::arg("threads"))
      .def("table", [](const BagClient& c) { return BagTableDict(c.table()); })
      .def("lookup_pooled", &LookupPooled<BagClient, int64_t>)
      .def("lookup_pooled_sums",
           [](BagClient& c, const Array<uint64_t>& rows, const Array<uint32_t>& bag_sizes,
              const std::optional<Array<int64_t>>& weights) {
             const std::vector<uint64_t> indices = ToVector(rows);
             const std::vector<uint32_t> sizes = ToVector(bag_sizes);
             const std::vector<int64_t> w = weights ? ToVector(*weights) : std::vector<int64_t>{};
             std::vector<int64_t> sums;
             {
               py::gil_scoped_release release;
               sums = ValueOrThrow(c.LookupPooledSums(indices, sizes, w));
             }
             return Matrix(sums, sizes.size());
           })
      .def("stats", &SingleServerStats<BagClient>)
      .def("key_uploads", &BagClient::key_uploads)
      .def("last_call", [](const BagClient& c) { return CallDict(c.last_call()); })
      .def("totals", [](const BagClient& c) { return CallDict(c.totals()); });
}

}  // namespace veil::python
