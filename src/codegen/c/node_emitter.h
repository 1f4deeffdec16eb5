// The interface between the C backend and the per-family node emitters.
//
// For every node the backend writes one `static` function whose parameters are the node's inputs
// (`in0`, `in1`, ... as `const T *`) and outputs (`out0`, ... as `T *`); an emitter fills in its
// body, knowing every shape and attribute at compile time, and asks for the portable kernels
// (src/kernels/reference/*.c) it calls. An emitter that cannot handle a node (an attribute, dtype
// or shape it does not support) returns an error saying why; the backend reports it with the
// node's name.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/c/code_writer.h"
#include "ir/graph.h"
#include "support/status.h"

namespace kiln::codegen::c {

class NodeContext;
using NodeEmitFn = std::function<Status(NodeContext&)>;

// A subgraph (If branch, Loop/Scan body) as a generated C function returning int32_t. Call it as
// `function(leading_args, <body inputs...>, <body outputs...>)`: leading_args passes the
// workspace and the captured outer values; the emitter passes pointers for the body's inputs and
// outputs in graph order.
struct SubgraphCall {
  std::string function;
  std::string leading_args;
};

class NodeContext : public CodeWriter {
 public:
  NodeContext(const ir::Graph& graph, const ir::Node& node, int64_t opset)
      : graph_(graph), node_(node), opset_(opset) {}

  const ir::Graph& graph() const { return graph_; }
  const ir::Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool has_input(int i) const { return i >= 0 && i < num_inputs() && node_.inputs[i] >= 0; }
  bool has_output(int i) const { return i >= 0 && i < num_outputs() && node_.outputs[i] >= 0; }
  const ir::TypeInfo& input_type(int i) const { return graph_.values[node_.inputs[i]].type; }
  const ir::TypeInfo& output_type(int i) const { return graph_.values[node_.outputs[i]].type; }
  DType input_dtype(int i) const { return input_type(i).dtype; }
  const std::string& input_name(int i) const { return graph_.values[node_.inputs[i]].name; }
  DType output_dtype(int i) const { return output_type(i).dtype; }
  const Dims& input_dims(int i) const { return input_type(i).dims; }
  const Dims& output_dims(int i) const { return output_type(i).dims; }
  // The input's data when it is a compile-time constant; nullptr otherwise.
  const Tensor* input_constant(int i) const {
    return has_input(i) && graph_.values[node_.inputs[i]].constant
               ? &*graph_.values[node_.inputs[i]].constant
               : nullptr;
  }
  // CompileOptions::weight_storage.
  std::string weight_storage = "fp32";
  // The parameter names of the node function.
  static std::string in(int i) { return "in" + std::to_string(i); }
  static std::string out(int i) { return "out" + std::to_string(i); }

  // Appends a constant table placed before the function (`static const` data).
  void Table(const std::string& text) { tables_ += text; }
  // The function returns an int32_t error code (KILN_OK or a KILN_ERROR_*) instead of void.
  void SetCanFail() { can_fail_ = true; }
  // The function stays out of run() (noinline): a kernel inlined into it keeps the registers it
  // needs rather than sharing them with every node's code in one large function.
  void SetOutOfLine() { out_of_line_ = true; }
  // Asks for a portable kernel (and, through it, the kernels it needs).
  void UseKernel(const std::string& name) { kernels_.insert(name); }
  // A fresh local identifier for the function body (t0, t1, ...).
  std::string Temp() { return Fresh('t'); }
  // Set by the backend: a subgraph of this node as a function (see SubgraphCall), and scratch
  // memory private to this node (an expression of type uint8_t *, `bytes` long, 64-aligned).
  std::function<Expected<SubgraphCall>(const ir::Graph&)> subgraph;
  std::function<std::string(size_t bytes)> scratch;
  // Set by the backend: a constant the emitter made (weights rearranged for a kernel) as a
  // parameter array of NAME_params.c, named after `label`; returns its symbol.
  std::function<std::string(const std::string& label, Tensor data)> parameter;
  // The generated function's name, for naming the node's tables (`<function_name>_map`).
  std::string function_name;
  // The parameter name of the node's k-th implicit input (a value its subgraphs capture).
  static std::string capture(int k) { return "c" + std::to_string(k); }

  Status error(const std::string& msg) const { return Error(msg); }

  const std::string& tables() const { return tables_; }
  bool can_fail() const { return can_fail_; }
  bool out_of_line() const { return out_of_line_; }
  const std::set<std::string>& kernels() const { return kernels_; }

 private:
  const ir::Graph& graph_;
  const ir::Node& node_;
  int64_t opset_;
  std::string tables_;
  bool can_fail_ = false, out_of_line_ = false;
  std::set<std::string> kernels_;
};

class EmitterRegistry {
 public:
  static const EmitterRegistry& Global();
  void Register(const std::string& op_type, NodeEmitFn fn, const std::string& domain = "");
  const NodeEmitFn* Find(const std::string& domain, const std::string& op_type) const;
  // Every op it emits, as "op" or "domain.op" (kiln ops).
  std::vector<std::string> Names() const;

 private:
  std::map<std::pair<std::string, std::string>, NodeEmitFn> fns_;
};

// One registration function per family file.
void RegisterElementwiseEmitters(EmitterRegistry& r);
void RegisterShapeEmitters(EmitterRegistry& r);
void RegisterConvEmitters(EmitterRegistry& r);
void RegisterQConvEmitters(EmitterRegistry& r);
void RegisterMatMulEmitters(EmitterRegistry& r);
void RegisterNormalizationEmitters(EmitterRegistry& r);
void RegisterReduceEmitters(EmitterRegistry& r);
void RegisterIndexingEmitters(EmitterRegistry& r);
void RegisterControlFlowEmitters(EmitterRegistry& r);
void RegisterSequenceModelEmitters(EmitterRegistry& r);
void RegisterMiscEmitters(EmitterRegistry& r);  // after Shape: replaces its Trilu, ReverseSequence

// Helpers shared by emitters.
// "{1, 2, 3}" (an empty list is "{0}" so it stays a valid initializer).
std::string IntList(const std::vector<int64_t>& v);
// Row-major strides of dims.
std::vector<int64_t> Strides(const Dims& dims);
// A loop nest over dims: calls body with the index variables' names (i0, i1, ...) at the depth
// of the innermost loop, opening and closing braces around it.
void LoopNest(NodeContext& ctx, const Dims& dims,
              const std::function<void(const std::vector<std::string>& idx)>& body);

}  // namespace kiln::codegen::c
