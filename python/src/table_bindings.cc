// veil.table (build, inspect, verify, read) and veil.Layout over embedding/: table files, row
// formats, layouts and the physical table a layout implies.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "embedding/layout.h"
#include "embedding/layout_table.h"
#include "embedding/row_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "pir/batch/planner.h"
#include "python/src/bindings.h"

namespace veil::python {
namespace {

namespace py = pybind11;
using embedding::Layout;

using FloatRows = py::array_t<float, py::array::c_style | py::array::forcecast>;

// Rows × dim floats of a 2-D array. Throws StatusError (INVALID_ARGUMENT) for another shape.
absl::Span<const float> Rows2d(const FloatRows& values, uint32_t* dim) {
  if (values.ndim() != 2 || values.shape(0) == 0 || values.shape(1) == 0) {
    std::string shape;
    for (py::ssize_t i = 0; i < values.ndim(); ++i)
      absl::StrAppend(&shape, i ? ", " : "", values.shape(i));
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "a table needs a 2-D array of rows x dim values (both nonzero), not shape (", shape, ")")));
  }
  *dim = static_cast<uint32_t>(values.shape(1));
  return absl::MakeConstSpan(values.data(), static_cast<size_t>(values.size()));
}

embedding::RowFormat Format(const std::string& name) {
  return ValueOrThrow(embedding::ParseRowFormat(name));
}

// The header of a table file as a dict, and its first `preview` rows dequantized.
py::dict Inspect(const std::string& path, uint64_t preview) {
  auto table = ValueOrThrow(embedding::Table::Open(path));
  py::dict info;
  info["rows"] = table->rows();
  info["dim"] = table->dim();
  info["row_words"] = table->row_words();
  info["stride_words"] = table->stride_words();
  info["format"] = embedding::RowFormatName(table->format());
  info["frac_bits"] = table->frac_bits();
  info["epoch"] = table->epoch();
  info["digest"] = table->DigestHex();
  const uint64_t n = std::min<uint64_t>(preview, table->rows());
  py::array_t<float> head({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(table->dim())});
  float* out = head.mutable_data();
  for (uint64_t i = 0; i < n; ++i) {
    ThrowIfError(table->DecodeRow(i, absl::MakeSpan(out + i * table->dim(), table->dim())));
  }
  info["head"] = head;
  return info;
}

// Every row of a table file, dequantized: rows × dim floats.
py::array_t<float> ReadRows(const std::string& path) {
  auto table = ValueOrThrow(embedding::Table::Open(path));
  py::array_t<float> rows(
      {static_cast<py::ssize_t>(table->rows()), static_cast<py::ssize_t>(table->dim())});
  float* out = rows.mutable_data();
  for (uint64_t i = 0; i < table->rows(); ++i) {
    ThrowIfError(table->DecodeRow(i, absl::MakeSpan(out + i * table->dim(), table->dim())));
  }
  return rows;
}

py::dict ShapeDict(const embedding::TableShape& shape) {
  py::dict d;
  d["bins"] = shape.bins;
  d["rounds"] = shape.rounds;
  return d;
}

void RegisterLayout(py::module_& m) {
  py::class_<Layout, std::shared_ptr<Layout>>(m, "Layout", R"doc(
A public batch-PIR layout (embedding/layout.h): the hot table, the bins of each table, the rows
co-located with each row, and the keys (rounds) a client sends to every bin per inference.
Servers and clients load the same layout file. Make one with veil.codesign.layout, or read one
written by `veil-codesign layout` with Layout.read.)doc")
      .def_static(
          "read",
          [](const std::string& path) {
            return std::make_shared<Layout>(ValueOrThrow(Layout::ReadFile(path)));
          },
          py::arg("path"),
          "Reads a layout file. Raises NotFoundError if it cannot be opened, InvalidArgumentError "
          "for a malformed file (magic, version, sizes, digest).")
      .def_static(
          "from_bytes",
          [](py::bytes bytes) {
            const std::string data = bytes;
            return std::make_shared<Layout>(ValueOrThrow(Layout::Parse(
                absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data.data()), data.size()))));
          },
          py::arg("data"), "Parses a serialized layout (what to_bytes and layout files hold).")
      .def(
          "to_bytes",
          [](const Layout& layout) {
            const std::vector<uint8_t> bytes = layout.Serialize();
            return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          },
          "The versioned serialized layout (the file's contents).")
      .def(
          "write",
          [](const Layout& layout, const std::string& path) {
            ThrowIfError(layout.WriteFile(path));
          },
          py::arg("path"), "Writes the layout file.")
      .def_property_readonly("num_rows", &Layout::num_rows, "Rows of the embedding table.")
      .def_property_readonly(
          "row_words", [](const Layout& l) { return l.params().row_words; },
          "32-bit words (fp32 values) per row.")
      .def_property_readonly(
          "colocation", [](const Layout& l) { return l.params().colocation; },
          "Companion rows stored with each row (c).")
      .def_property_readonly("entry_words", &Layout::entry_words,
                             "Words of one slot's entry: (1 + c) × row_words.")
      .def_property_readonly("hot_rows", &Layout::hot_rows, "The rows of the hot table, sorted.")
      .def_property_readonly(
          "hot", [](const Layout& l) { return ShapeDict(l.shape(embedding::kHotTable)); },
          "The hot table's bins and rounds.")
      .def_property_readonly(
          "cold", [](const Layout& l) { return ShapeDict(l.shape(embedding::kColdTable)); },
          "The cold table's bins and rounds.")
      .def_property_readonly("physical_rows", &embedding::PhysicalRows,
                             "Rows of the table the servers serve (veil.table.build(layout=...)).")
      .def(
          "cost", [](const Layout& l) { return CostDict(batch::CostOf(l)); },
          "Keys, words scanned per server and bytes of one inference: the same for every "
          "request.")
      .def("__repr__", [](const Layout& l) {
        return absl::StrCat("veil.Layout(num_rows=", l.num_rows(),
                            ", row_words=", l.params().row_words,
                            ", colocation=", l.params().colocation,
                            ", hot_rows=", l.hot_rows().size(), ", hot=", l.params().hot.bins, "x",
                            l.params().hot.rounds, ", cold=", l.params().cold.bins, "x",
                            l.params().cold.rounds, ", keys=", batch::CostOf(l).keys, ")");
      });
}

}  // namespace

py::dict CostDict(const batch::PlanCost& cost) {
  py::dict d;
  d["keys"] = cost.keys;
  d["words_scanned"] = cost.words_scanned;
  d["upload_bytes"] = cost.upload_bytes;
  d["download_bytes"] = cost.download_bytes;
  d["bytes_per_inference"] = cost.upload_bytes + cost.download_bytes;
  return d;
}

void RegisterTable(py::module_& m) {
  RegisterLayout(m);
  m.def(
      "write_table",
      [](const std::string& path, const FloatRows& values, const std::string& format,
         uint64_t epoch, int frac_bits) {
        uint32_t dim = 0;
        const absl::Span<const float> rows = Rows2d(values, &dim);
        const embedding::RowFormat row_format = Format(format);
        py::gil_scoped_release release;
        ThrowIfError(embedding::WriteTable(path, row_format, dim, rows, {epoch, frac_bits}));
      },
      py::arg("path"), py::arg("values"), py::arg("format"), py::arg("epoch"),
      py::arg("frac_bits"));
  m.def(
      "write_table_from_file",
      [](const std::string& source, const std::string& path, bool csv, uint32_t dim,
         const std::string& format, uint64_t epoch, int frac_bits) {
        const embedding::RowFormat row_format = Format(format);
        py::gil_scoped_release release;
        ThrowIfError(
            csv ? embedding::WriteTableFromCsv(source, path, row_format, dim, {epoch, frac_bits})
                : embedding::WriteTableFromF32File(source, path, row_format, dim,
                                                   {epoch, frac_bits}));
      },
      py::arg("source"), py::arg("path"), py::arg("csv"), py::arg("dim"), py::arg("format"),
      py::arg("epoch"), py::arg("frac_bits"));
  m.def(
      "arrange_rows",
      [](const Layout& layout, const FloatRows& values) {
        uint32_t dim = 0;
        const absl::Span<const float> rows = Rows2d(values, &dim);
        std::vector<float> physical = ValueOrThrow(embedding::ArrangeRows(layout, rows));
        py::array_t<float> out({static_cast<py::ssize_t>(embedding::PhysicalRows(layout)),
                                static_cast<py::ssize_t>(layout.entry_words())});
        std::copy(physical.begin(), physical.end(), out.mutable_data());
        return out;
      },
      py::arg("layout"), py::arg("values"));
  m.def("inspect_table", &Inspect, py::arg("path"), py::arg("preview"));
  m.def("read_table", &ReadRows, py::arg("path"));
  m.def(
      "verify_table",
      [](const std::string& path) {
        auto table = ValueOrThrow(embedding::Table::Open(path));
        {
          py::gil_scoped_release release;
          ThrowIfError(table->Verify());
        }
        return table->DigestHex();
      },
      py::arg("path"));
}

}  // namespace veil::python
