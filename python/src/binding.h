// Shared by the extension module's files: kiln's errors as Python exceptions, and models given as
// a path or as bytes.
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::python {

namespace py = pybind11;

// Raised as kiln.KilnError (a RuntimeError) with kiln's one-line message.
class KilnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void Check(const Status& s) {
  if (!s.ok()) throw KilnError(s.message());
}
template <class T>
T Check(Expected<T> e) {
  if (!e.ok()) throw KilnError(e.status().message());
  return std::move(*e);
}

// A model given as bytes (ONNX) or as a path (anything `kiln run` reads: .onnx, .kiln, .bpte,
// .json with `weights`).
ir::Model LoadModelArg(const py::object& model, const std::string& weights = "");
// The ONNX bytes of a model given as bytes or as the path of an .onnx file.
std::string ModelBytesArg(const py::object& model);

void BindSession(py::module_& m);
void BindGym(py::module_& m);
void BindTune(py::module_& m);
void BindVerbs(py::module_& m);

}  // namespace kiln::python
