// veil._veil: the native half of the `veil` Python package (python/veil/). Each Register* lives in
// its own file so that only torch_bindings.cc pays libtorch's compile time.
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"

namespace veil::python {

void RegisterStatusTranslator() {
  pybind11::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const StatusError& e) {
      // veil._errors builds the exception: the subclass for the code, with `.code` set.
      pybind11::object exception = pybind11::module_::import("veil._errors")
                                       .attr("make_error")(static_cast<int>(e.code()), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    }
  });
}

}  // namespace veil::python

PYBIND11_MODULE(_veil, m) {
  m.doc() =
      "Native half of the veil package: bindings of veil's C++ libraries (use `import veil`).";
  veil::python::RegisterStatusTranslator();
  veil::python::RegisterTable(m);
  veil::python::RegisterClient(m);
  veil::python::RegisterCodesign(m);
  veil::python::RegisterTorch(m);
}
