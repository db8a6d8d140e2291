// What the files of the veil extension share: absl::Status → Python exception (every failed call
// raises veil.Error, python/veil/_errors.py, or its subclass for the code, carrying the absl code
// as `.code`), the dicts of cost structs, and each file's registration function.
#ifndef VEIL_PYTHON_SRC_BINDINGS_H_
#define VEIL_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace veil::client {
struct CallStats;
}  // namespace veil::client
namespace veil::batch {
struct PlanCost;
}  // namespace veil::batch

namespace veil::python {

// A failed absl::Status on its way to Python; translated by RegisterStatusTranslator.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const absl::Status& status)
      : std::runtime_error(std::string(status.message())), code_(status.code()) {}
  absl::StatusCode code() const { return code_; }

 private:
  absl::StatusCode code_;
};

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(*value);
}

// Installs the translator of StatusError into the exception veil._errors.make_error builds.
void RegisterStatusTranslator();

// One call's cost (client_bindings.cc): bytes_up, bytes_down, latency_ms, lookups, keys, calls.
pybind11::dict CallDict(const client::CallStats& call);
// One inference's cost under a layout (table_bindings.cc): keys, words_scanned, upload_bytes,
// download_bytes, bytes_per_inference.
pybind11::dict CostDict(const batch::PlanCost& cost);

// Each part of the module registers its classes and functions here (module.cc calls them in
// dependency order: the layout class before the functions that take one).
void RegisterTable(pybind11::module_& m);
void RegisterClient(pybind11::module_& m);
void RegisterCodesign(pybind11::module_& m);
void RegisterTorch(pybind11::module_& m);

}  // namespace veil::python

#endif  // VEIL_PYTHON_SRC_BINDINGS_H_
