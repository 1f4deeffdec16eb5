// kiln._kiln: the extension module behind the Python package `kiln` (python/kiln/__init__.py).
#include "binding.h"
#include "cli/common.h"
#include "frontend/onnx_import.h"
#include "support/file_io.h"

namespace kiln::python {

ir::Model LoadModelArg(const py::object& model, const std::string& weights) {
  if (py::isinstance<py::bytes>(model)) {
    const std::string bytes = model.cast<std::string>();
    py::gil_scoped_release nogil;
    return Check(frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "the model"));
  }
  const std::string path = model.cast<std::string>();
  py::gil_scoped_release nogil;
  return Check(cli::LoadAnyModel(path, weights));
}

std::string ModelBytesArg(const py::object& model) {
  if (py::isinstance<py::bytes>(model)) return model.cast<std::string>();
  return Check(ReadFile(model.cast<std::string>()));
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  namespace kp = kiln::python;
  m.doc() = "kiln's C++ core: sessions, the optimization environment, the tuner and the verbs";
  pybind11::register_exception<kp::KilnError>(m, "KilnError", PyExc_RuntimeError);
  m.attr("__version__") = kiln::cli::kKilnVersion;
  kp::BindSession(m);
  kp::BindGym(m);
  kp::BindTune(m);
  kp::BindVerbs(m);
}
