// kiln.InferenceSession's core: a model on the host executor, NumPy arrays in and out.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "binding.h"
#include "cli/common.h"
#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "runtime/model_runner.h"

namespace kiln::python {
namespace {

// The NumPy types of kiln's element types (those NumPy has).
const std::vector<std::pair<DType, const char*>>& NumpyTypes() {
  static const std::vector<std::pair<DType, const char*>> kTypes = {
      {DType::kFloat32, "float32"},     {DType::kFloat64, "float64"},
      {DType::kFloat16, "float16"},     {DType::kInt8, "int8"},
      {DType::kUInt8, "uint8"},         {DType::kInt16, "int16"},
      {DType::kUInt16, "uint16"},       {DType::kInt32, "int32"},
      {DType::kUInt32, "uint32"},       {DType::kInt64, "int64"},
      {DType::kUInt64, "uint64"},       {DType::kBool, "bool"},
      {DType::kComplex64, "complex64"}, {DType::kComplex128, "complex128"}};
  return kTypes;
}

py::dtype NumpyType(DType t) {
  if (IsSubByteIntDType(t)) t = SubByteStorage(t);  // held a byte each (ir/subbyte.h)
  for (const auto& [d, name] : NumpyTypes())
    if (d == t) return py::dtype(name);
  throw KilnError("element type " + std::string(DTypeName(t)) + " has no NumPy equivalent");
}

// ONNX's name of an element type, as ONNX Runtime's NodeArg.type gives it: "tensor(float)".
std::string OnnxTypeString(const ir::TypeInfo& t) {
  static const char* const kNames[] = {
      "undefined",      "float",    "uint8",        "int8",           "uint16",
      "int16",          "int32",    "int64",        "string",         "bool",
      "float16",        "double",   "uint32",       "uint64",         "complex64",
      "complex128",     "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
      "float8e5m2fnuz", "uint4",    "int4",         "float4e2m1",     "float8e8m0",
      "uint2",          "int2"};
  if (t.kind == ir::TypeInfo::Kind::kSequence && t.elem)
    return "seq(" + OnnxTypeString(*t.elem) + ")";
  if (t.kind == ir::TypeInfo::Kind::kOptional && t.elem)
    return "optional(" + OnnxTypeString(*t.elem) + ")";
  const auto i = static_cast<size_t>(t.dtype);
  return std::string("tensor(") + (i < std::size(kNames) ? kNames[i] : "unknown") + ")";
}

// An input or output as ONNX Runtime describes it: name, shape (a dim's number, its symbol, or
// None) and type.
struct NodeArg {
  std::string name;
  py::list shape;
  std::string type;
};

NodeArg ArgOf(const std::string& name, const ir::TypeInfo& t) {
  NodeArg a{name, py::list(), OnnxTypeString(t)};
  for (size_t d = 0; t.has_shape && d < t.dims.size(); ++d) {
    if (t.dims[d] >= 0)
      a.shape.append(t.dims[d]);
    else if (d < t.symbols.size() && !t.symbols[d].empty())
      a.shape.append(t.symbols[d]);
    else
      a.shape.append(py::none());
  }
  return a;
}

// A string tensor as NumPy's object array of str, as ONNX Runtime gives it (bytes that are not
// UTF-8 decode as U+FFFD).
py::object StringsToNumpy(const Tensor& t) {
  py::list items;
  for (int64_t i = 0; i < t.size(); ++i) {
    const std::string& s = t.strings()[i];
    items.append(py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace")));
  }
  py::object array = py::module_::import("numpy").attr("array")(items, py::arg("dtype") = "object");
  return array.attr("reshape")(py::tuple(py::cast(t.dims())));
}

// A NumPy array of str, bytes or objects holding them as a string tensor (str as UTF-8).
Tensor StringsFromNumpy(const py::array& a, const std::string& name) {
  const char kind = a.dtype().kind();
  if (kind != 'U' && kind != 'S' && kind != 'O')
    throw KilnError("input '" + name + "': expected str, bytes or object elements, got " +
                    std::string(py::str(a.dtype())));
  Tensor t(DType::kString, Dims(a.shape(), a.shape() + a.ndim()));
  py::list flat = a.attr("ravel")().attr("tolist")();
  for (int64_t i = 0; i < t.size(); ++i) {
    py::handle item = flat[static_cast<size_t>(i)];
    if (py::isinstance<py::bytes>(item))
      t.strings()[i] = item.cast<std::string>();
    else if (py::isinstance<py::str>(item))
      t.strings()[i] = item.cast<std::string>();
    else
      throw KilnError("input '" + name + "': element " + std::to_string(i) +
                      " is not a str or bytes");
  }
  return t;
}

// A result as NumPy: the array keeps the tensor's bytes alive (no copy unless the tensor was a
// view of the executor's arena).
py::object ToNumpy(Tensor t) {
  if (t.is_none()) return py::none();
  if (IsSmallFloatDType(t.dtype())) t = SmallFloatToFloat32(t);  // no NumPy type: float32 values
  if (t.is_sequence()) {
    py::list items;
    for (const Tensor& item : t.items()) items.append(ToNumpy(item));
    return items;
  }
  if (t.is_string()) return StringsToNumpy(t);
  py::dtype dtype = NumpyType(t.dtype());
  if (!t.owns_or_keeps_alive()) t = t.Clone();
  auto* held = new Tensor(std::move(t));
  py::capsule owner(held, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, held->dims(), {}, held->raw(), owner);
}

// A runtime input or an output: its name and declared type.
struct Io {
  std::string name;
  ir::TypeInfo type;
};

class Session {
 public:
  Session(const py::object& model_arg, std::optional<int> threads,
          std::optional<std::map<std::string, std::vector<int64_t>>> shapes,
          std::optional<std::string> pipeline_file, std::optional<std::string> pipeline_json,
          const std::string& kernels, const std::string& weights) {
    ir::Model model = LoadModelArg(model_arg, weights);
    const ir::Graph& g = *model.graph;
    for (int v : g.RuntimeInputs()) inputs_.push_back({g.values[v].name, g.values[v].type});
    for (int v : g.outputs) outputs_.push_back({g.values[v].name, g.values[v].type});
    for (const auto& [name, dims] : shapes ? *shapes : passes::ShapeOverrides{}) {
      InputIndex(name, "shapes");
      shapes_[name] = dims;
    }
    passes::Pipeline pipeline;
    if (pipeline_json)
      pipeline = Check(passes::ParsePipeline(*pipeline_json, "pipeline"));
    else
      pipeline = Check(cli::ResolvePipeline(pipeline_file.value_or(""), "default", false));
    cli::AddPipelineShapes(pipeline, &shapes_);
    options_ = cli::ExecutorOptionsOf(pipeline, shapes_);
    const int t = threads.value_or(1);
    if (t < 1 || t > cli::kMaxThreads)
      throw KilnError("threads: " + std::to_string(t) +
                      " is not allowed; give an integer from 1 to " +
                      std::to_string(cli::kMaxThreads));
    options_.threads = t;
    if (kernels != "fast" && kernels != "reference")
      throw KilnError("kernels: '" + kernels + "' is not allowed; give fast or reference");
    options_.kernels = kernels == "fast" ? ops::KernelSet::kFast : ops::KernelSet::kReference;
    // With every input's dims known the model compiles now (its errors surface here) and the
    // executor takes it; otherwise it is kept to compile for each run's dims.
    std::vector<Dims> dims;
    for (const Io& in : inputs_) {
      auto s = shapes_.find(in.name);
      if (s != shapes_.end())
        dims.push_back(s->second);
      else if (in.type.shape_known())
        dims.push_back(in.type.dims);
    }
    if (dims.size() == inputs_.size()) {
      py::gil_scoped_release nogil;
      Prepare(std::move(model), shapes_, dims);
    } else {
      model_ = std::move(model);
    }
  }

  std::vector<NodeArg> Inputs() const {
    std::vector<NodeArg> out;
    for (const Io& in : inputs_) {
      ir::TypeInfo type = in.type;
      auto fixed = shapes_.find(in.name);  // dims the session fixed (shapes=, the pipeline)
      if (fixed != shapes_.end()) type = ir::TypeInfo::Tensor(type.dtype, fixed->second);
      out.push_back(ArgOf(in.name, type));
    }
    return out;
  }
  std::vector<NodeArg> Outputs() const {
    std::vector<NodeArg> out;
    for (const Io& o : outputs_) out.push_back(ArgOf(o.name, o.type));
    return out;
  }

  py::list Run(const std::optional<std::vector<std::string>>& output_names, const py::dict& feeds) {
    std::vector<py::array> given(inputs_.size());
    for (const auto& [key, value] : feeds) {
      const std::string name = py::str(key);
      py::array& a = given[InputIndex(name, "run")];
      a = py::array::ensure(value, py::array::c_style);
      if (!a) throw KilnError("input '" + name + "' is not an array");
    }
    std::vector<Tensor> inputs;
    std::vector<Dims> dims;
    passes::ShapeOverrides shapes = shapes_;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Io& in = inputs_[i];
      const py::array& a = given[i];
      if (!a) throw KilnError("input '" + in.name + "' is not given");
      if (in.type.dtype == DType::kString) {
        Tensor t = StringsFromNumpy(a, in.name);
        dims.push_back(t.dims());
        cli::AddShapeFromData(in.name, in.type, t.dims(), &shapes);
        inputs.push_back(std::move(t));
        continue;
      }
      if (IsSmallFloatDType(in.type.dtype)) {  // float32 values, rounded as Cast does
        if (!a.dtype().is(py::dtype("float32")))
          throw KilnError("input '" + in.name + "' (" + std::string(DTypeName(in.type.dtype)) +
                          "): give float32 values, got " + std::string(py::str(a.dtype())));
        Tensor t(in.type.dtype, Dims(a.shape(), a.shape() + a.ndim()));
        const float* src = static_cast<const float*>(a.data());
        for (int64_t k = 0; k < t.size(); ++k)
          t.data<uint8_t>()[k] = FloatToSmallFloat(in.type.dtype, src[k], true);
        dims.push_back(t.dims());
        cli::AddShapeFromData(in.name, in.type, t.dims(), &shapes);
        inputs.push_back(std::move(t));
        continue;
      }
      if (!a.dtype().is(NumpyType(in.type.dtype)))
        throw KilnError("input '" + in.name + "': expected " +
                        std::string(py::str(NumpyType(in.type.dtype))) + ", got " +
                        std::string(py::str(a.dtype())));
      Dims d(a.shape(), a.shape() + a.ndim());
      cli::AddShapeFromData(in.name, in.type, d, &shapes);  // as `kiln run --input` does
      if (IsSubByteIntDType(in.type.dtype)) {
        int64_t lo, hi;
        SubByteIntRange(in.type.dtype, &lo, &hi);
        const Tensor held =
            Tensor::View(SubByteStorage(in.type.dtype), d, const_cast<void*>(a.data()));
        for (int64_t k = 0; k < held.size(); ++k)
          if (held.GetInt(k) < lo || held.GetInt(k) > hi)
            throw KilnError("input '" + in.name + "' (" + std::string(DTypeName(in.type.dtype)) +
                            "): value " + std::to_string(held.GetInt(k)) + " is outside [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      // A view of the caller's array: the executor reads its inputs and never writes them.
      inputs.push_back(Tensor::View(in.type.dtype, d, const_cast<void*>(a.data())));
      dims.push_back(std::move(d));
    }
    std::vector<int> picked;
    for (const std::string& name : output_names.value_or(std::vector<std::string>{})) {
      int k = -1;
      for (size_t j = 0; j < outputs_.size(); ++j)
        if (outputs_[j].name == name) k = static_cast<int>(j);
      if (k < 0) throw KilnError("'" + name + "' is not an output of the model");
      picked.push_back(k);
    }
    if (!output_names)
      for (size_t k = 0; k < outputs_.size(); ++k) picked.push_back(static_cast<int>(k));
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // one run at a time; runs from threads queue
      if (model_ && (!runner_ || dims != runner_dims_))
        Prepare(ir::CloneModel(*model_), shapes, dims);
      Check(runner_->Run(inputs, &outputs));
    }
    py::list result;
    for (int k : picked) result.append(ToNumpy(outputs[k]));
    return result;
  }

 private:
  // The index of input `name`, or an error for `what` that lists the inputs.
  size_t InputIndex(const std::string& name, const std::string& what) const {
    std::string names;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].name == name) return i;
      names += (i ? ", " : "") + inputs_[i].name;
    }
    throw KilnError(what + ": '" + name + "' is not an input of the model (its inputs: " + names +
                    ")");
  }

  // A runner for these input dims (the last one is kept; other dims compile again).
  void Prepare(ir::Model model, const passes::ShapeOverrides& shapes,
               const std::vector<Dims>& dims) {
    runtime::ExecutorOptions eo = options_;
    eo.shapes = shapes;
    runner_.reset();
    runner_ = Check(runtime::ModelRunner::Create(std::move(model), eo, dims));
    runner_dims_ = dims;
  }

  std::vector<Io> inputs_, outputs_;
  std::optional<ir::Model> model_;  // only where runs' dims may differ
  passes::ShapeOverrides shapes_;
  runtime::ExecutorOptions options_;
  std::mutex mu_;
  std::unique_ptr<runtime::ModelRunner> runner_;
  std::vector<Dims> runner_dims_;
};

}  // namespace

void BindSession(py::module_& m) {
  py::class_<NodeArg>(m, "NodeArg", "an input or output: name, shape and type, as ONNX Runtime's")
      .def_readonly("name", &NodeArg::name)
      .def_readonly("shape", &NodeArg::shape)
      .def_readonly("type", &NodeArg::type)
      .def("__repr__", [](const NodeArg& a) {
        return "NodeArg(name='" + a.name + "', type='" + a.type +
               "', shape=" + std::string(py::repr(a.shape)) + ")";
      });
  py::class_<Session>(m, "Session")
      .def(py::init<const py::object&, std::optional<int>,
                    std::optional<std::map<std::string, std::vector<int64_t>>>,
                    std::optional<std::string>, std::optional<std::string>, const std::string&,
                    const std::string&>(),
           py::arg("model"), py::arg("threads") = py::none(), py::arg("shapes") = py::none(),
           py::arg("pipeline_file") = py::none(), py::arg("pipeline_json") = py::none(),
           py::arg("kernels") = "fast", py::arg("weights") = "")
      .def("get_inputs", &Session::Inputs)
      .def("get_outputs", &Session::Outputs)
      .def("run", &Session::Run, py::arg("output_names"), py::arg("feeds"));
}

}  // namespace kiln::python
