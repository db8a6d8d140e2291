// The libtorch half of the extension (the only file that includes torch: ~20 s to compile):
// veil.PrivateEmbeddingBag's native module over veil::client::PrivateEmbeddingBag
// (mobile_client/private_embedding_bag.h), veil.PrivatePooledEmbeddingBag's over
// PrivatePooledEmbeddingBag (bfv-bag), and tables written straight from tensors
// (embedding/torch_table.h).
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "embedding/layout.h"
#include "embedding/row_format.h"
#include "embedding/torch_table.h"
#include "mobile_client/client.h"
#include "mobile_client/private_embedding_bag.h"
#include "python/src/bindings.h"

namespace veil::python {
namespace {

namespace py = pybind11;
using client::PrivateEmbeddingBagImpl;
using client::PrivateRows;

// Runs `f` turning torch's argument checks (c10::Error, from EmbeddingBag's pooling) into
// INVALID_ARGUMENT without the C++ backtrace that c10::Error::what() carries.
template <typename F>
auto TorchChecked(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw StatusError(absl::InvalidArgumentError(e.what_without_backtrace()));
  }
}

torch::nn::EmbeddingBagMode Mode(const std::string& mode) {
  if (mode == "sum") return torch::kSum;
  if (mode == "mean") return torch::kMean;
  if (mode == "max") return torch::kMax;
  throw StatusError(absl::InvalidArgumentError(
      absl::StrCat("mode \"", mode, "\": use \"sum\", \"mean\" or \"max\"")));
}

// f() under `mutex`, waited for without the GIL (a forward holding the mutex runs without it).
template <typename F>
auto Locked(std::mutex& mutex, F f) {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mutex);
  return f();
}

// The native module: the C++ PrivateEmbeddingBag and a lock. Fetches of one module are
// serialized (the client serializes them anyway) because the module records the last call.
struct NativeBag {
  std::shared_ptr<PrivateEmbeddingBagImpl> impl;
  PrivateEmbeddingBagImpl& bag;
  std::mutex mutex;

  NativeBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode,
            bool include_last_offset, std::shared_ptr<client::Client> client,
            std::shared_ptr<embedding::Layout> layout, std::optional<torch::Tensor> default_row)
      : impl(TorchChecked([&] {
          return std::make_shared<PrivateEmbeddingBagImpl>(
              client::PrivateEmbeddingBagOptions(num_embeddings, embedding_dim)
                  .mode(Mode(mode))
                  .include_last_offset(include_last_offset),
              std::move(client), std::move(layout), default_row.value_or(torch::Tensor()));
        })),
        bag(*impl) {}

  PrivateRows Fetch(const torch::Tensor& input) {
    auto flat = input.to(torch::kInt64).contiguous().reshape(-1);
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    return ValueOrThrow(bag.Fetch(
        absl::MakeConstSpan(flat.data_ptr<int64_t>(), static_cast<size_t>(flat.numel()))));
  }

  // Pooled bags and the missing mask of `input`, like forward.
  std::pair<torch::Tensor, torch::Tensor> Pool(const PrivateRows& fetched,
                                               const torch::Tensor& input,
                                               const std::optional<torch::Tensor>& offsets,
                                               const std::optional<torch::Tensor>& weights,
                                               const std::optional<std::string>& mode) {
    return TorchChecked([&] {
      std::optional<torch::nn::EmbeddingBagMode> pooling;
      if (mode) pooling = Mode(*mode);
      auto pooled = bag.Pool(
          fetched, input, offsets.value_or(torch::Tensor()), weights.value_or(torch::Tensor()),
          pooling ? c10::optional<torch::nn::EmbeddingBagMode>(*pooling) : c10::nullopt);
      return std::make_pair(pooled, bag.last_missing_mask());
    });
  }
};

// The native module of veil.PrivatePooledEmbeddingBag: the C++ PrivatePooledEmbeddingBag and a
// lock (the module records the last call).
struct NativePooledBag {
  std::shared_ptr<client::PrivatePooledEmbeddingBagImpl> impl;
  std::mutex mutex;

  NativePooledBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode,
                  bool include_last_offset, int weight_frac_bits,
                  std::shared_ptr<client::BagClient> client)
      : impl(TorchChecked([&] {
          return std::make_shared<client::PrivatePooledEmbeddingBagImpl>(
              client::PrivatePooledEmbeddingBagOptions(num_embeddings, embedding_dim)
                  .mode(Mode(mode))
                  .include_last_offset(include_last_offset)
                  .weight_frac_bits(weight_frac_bits),
              std::move(client));
        })) {}

  torch::Tensor Forward(const torch::Tensor& input, const std::optional<torch::Tensor>& offsets,
                        const std::optional<torch::Tensor>& weights) {
    absl::StatusOr<torch::Tensor> out = TorchChecked([&] {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      return impl->TryForward(input, offsets.value_or(torch::Tensor()),
                              weights.value_or(torch::Tensor()));
    });
    return ValueOrThrow(std::move(out));
  }
};

}  // namespace

void RegisterTorch(py::module_& m) {
  py::class_<PrivateRows>(m, "PrivateRows", R"doc(
The rows of one inference, fetched under one plan by PrivateEmbeddingBag.fetch: pool or embed
them as often as the model needs (one private request, whatever the model does with it).)doc")
      .def_readonly("rows", &PrivateRows::rows, "The wanted rows, sorted and distinct.")
      .def_readonly("weight", &PrivateRows::weight,
                    "[len(rows) + 1, dim]: each wanted row (the default row where missing), then "
                    "the default row.")
      .def_property_readonly(
          "missing_rows", [](const PrivateRows& r) { return r.missing_rows; },
          "The wanted rows the plan could not fetch (replaced by the default row).")
      .def_property_readonly(
          "call", [](const PrivateRows& r) { return CallDict(r.call); },
          "The fetch's cost: bytes on the sockets (both servers), keys sent to each server.")
      .def(
          "missing_mask",
          [](const PrivateRows& r, const torch::Tensor& input) {
            return TorchChecked([&] { return r.MissingMask(input); });
          },
          py::arg("input"), "Whether each element of `input` is a missing row (bool).");

  py::class_<NativeBag>(m, "NativeEmbeddingBag")
      .def(py::init<int64_t, int64_t, const std::string&, bool, std::shared_ptr<client::Client>,
                    std::shared_ptr<embedding::Layout>, std::optional<torch::Tensor>>(),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("mode"),
           py::arg("include_last_offset"), py::arg("client"), py::arg("layout"),
           py::arg("default_row"))
      .def("fetch", &NativeBag::Fetch, py::arg("rows"))
      .def("pool", &NativeBag::Pool, py::arg("fetched"), py::arg("input"), py::arg("offsets"),
           py::arg("per_sample_weights"), py::arg("mode"))
      .def(
          "embed",
          [](NativeBag& b, const PrivateRows& fetched, const torch::Tensor& input) {
            return TorchChecked([&] { return b.bag.Embed(fetched, input); });
          },
          py::arg("fetched"), py::arg("input"))
      .def_property_readonly("default_row", [](NativeBag& b) { return b.bag.default_row; })
      .def_property_readonly(
          "keys_per_inference",
          [](NativeBag& b) { return static_cast<int64_t>(batch::CostOf(b.bag.layout()).keys); })
      .def("last_call", [](NativeBag& b) {
        return CallDict(Locked(b.mutex, [&] { return b.bag.last_call(); }));
      });

  py::class_<NativePooledBag>(m, "NativePooledEmbeddingBag")
      .def(py::init<int64_t, int64_t, const std::string&, bool, int,
                    std::shared_ptr<client::BagClient>>(),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("mode"),
           py::arg("include_last_offset"), py::arg("weight_frac_bits"), py::arg("client"))
      .def("forward", &NativePooledBag::Forward, py::arg("input"), py::arg("offsets"),
           py::arg("per_sample_weights"))
      .def("last_call", [](NativePooledBag& b) {
        return CallDict(Locked(b.mutex, [&] { return b.impl->last_call(); }));
      });

  m.def(
      "write_table_from_tensor",
      [](const torch::Tensor& tensor, const std::string& path, const std::string& format,
         uint64_t epoch, int frac_bits) {
        const embedding::RowFormat row_format = ValueOrThrow(embedding::ParseRowFormat(format));
        ThrowIfError(TorchChecked([&] {
          return embedding::WriteTableFromTensor(tensor, path, row_format, {epoch, frac_bits});
        }));
      },
      py::arg("tensor"), py::arg("path"), py::arg("format"), py::arg("epoch"),
      py::arg("frac_bits"));
}

}  // namespace veil::python
