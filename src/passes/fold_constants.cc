#include "passes/fold_constants.h"

#include "ops/op.h"
#include "ops/op_traits.h"
#include "passes/eliminate_dead_nodes.h"

namespace kiln::passes {

bool IsFoldable(const ir::Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return false;
  static const char* kNonDeterministic[] = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Multinomial",  "Bernoulli",     "Dropout"};
  for (const char* op : kNonDeterministic)
    if (n.op_type == op) return false;
  return true;
}

namespace {

size_t Bytes(const ir::TypeInfo& t) {
  return t.shape_known() ? static_cast<size_t>(NumElements(t.dims)) * DTypeSize(t.dtype) : 0;
}

// Evaluates node n when it can be; true when its outputs are now constants.
bool TryFold(ir::Graph& g, const ir::Node& n, int64_t opset, size_t max_bytes) {
  if (!IsFoldable(n) || n.outputs.empty()) return false;
  const ops::OpSchema* schema = ops::OpRegistry::Global().Find(n.domain, n.op_type);
  if (!schema) return false;
  bool dims_only = ops::ReadsDimsOnly(n.domain, n.op_type);
  size_t in_bytes = 0, out_bytes = 0;
  for (int v : n.inputs) {
    if (v < 0) continue;
    const ir::Value& val = g.values[v];
    if (val.type.kind != ir::TypeInfo::Kind::kTensor) return false;
    if (!val.constant && !(dims_only && val.type.shape_known())) return false;
    in_bytes += val.constant ? val.constant->nbytes() : 0;
  }
  for (int v : n.outputs) {
    if (v < 0) continue;
    const ir::TypeInfo& t = g.values[v].type;
    if (t.kind != ir::TypeInfo::Kind::kTensor || !t.shape_known() || DTypeSize(t.dtype) == 0)
      return false;
    out_bytes += Bytes(t);
  }
  if (out_bytes > std::max(max_bytes, in_bytes)) return false;
  // The kernels trust the output dims they are given: fold only where the op's own inference
  // agrees with the value types (a subgraph's declared types are not always checked; found by
  // fuzz_passes).
  ops::InferContext ic(n, g, opset);
  for (int v : n.inputs) {
    ic.input_types_.push_back(v < 0 ? nullptr : &g.values[v].type);
    ic.input_values_.push_back(v < 0 || !g.values[v].constant ? nullptr : &*g.values[v].constant);
  }
  ic.outputs_.assign(n.outputs.size() + ops::kScratchOutputs, ir::TypeInfo{});
  if (!ops::CheckRequiredInputs(*schema, n, g).ok() || !schema->infer(ic).ok()) return false;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    int v = n.outputs[i];
    if (v < 0) continue;
    const ir::TypeInfo& want = g.values[v].type;
    if (!ic.outputs_[i].shape_known() || ic.outputs_[i].dtype != want.dtype ||
        ic.outputs_[i].dims != want.dims)
      return false;
  }
  ops::ComputeContext cc(n, g, opset);
  std::vector<Tensor> stand_ins(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    int v = n.inputs[i];
    if (v < 0) {
      cc.inputs_.push_back(nullptr);
    } else if (g.values[v].constant) {
      cc.inputs_.push_back(&*g.values[v].constant);
    } else {  // Shape / Size read only the dims
      stand_ins[i] = Tensor::View(g.values[v].type.dtype, g.values[v].type.dims, nullptr);
      cc.inputs_.push_back(&stand_ins[i]);
    }
  }
  std::vector<Tensor> outs(n.outputs.size() + ops::kScratchOutputs);
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0)
      outs[i] = Tensor(g.values[n.outputs[i]].type.dtype, g.values[n.outputs[i]].type.dims);
  for (auto& t : outs) cc.outputs_.push_back(&t);
  try {
    if (!schema->compute(cc).ok()) return false;  // left to the backend, which reports it
  } catch (const std::exception&) {
    return false;
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    int v = n.outputs[i];
    if (v < 0) continue;
    if (outs[i].dtype() != g.values[v].type.dtype || outs[i].dims() != g.values[v].type.dims)
      return false;
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    int v = n.outputs[i];
    if (v < 0) continue;
    g.values[v].constant = std::move(outs[i]);
    g.values[v].producer = -1;
  }
  return true;
}

// True when it folded or removed a node of g or of a subgraph.
bool FoldGraph(ir::Graph& g, const ir::Model& m, size_t max_bytes) {
  bool changed = false;
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    for (auto& [k, a] : n.attrs) {
      if (a.g) changed = FoldGraph(*a.g, m, max_bytes) || changed;
      for (auto& sg : a.graphs) changed = FoldGraph(*sg, m, max_bytes) || changed;
    }
    if (TryFold(g, n, m.OpsetFor(n.domain), max_bytes)) keep[i] = 0;
  }
  // Folded nodes go, and with them whatever is dead once they are gone.
  return SweepDeadNodes(g, std::move(keep)) > 0 || changed;
}

}  // namespace

Status FoldConstants(ir::Model& model, size_t max_bytes, bool* changed) {
  bool c = FoldGraph(*model.graph, model, max_bytes);
  if (changed) *changed = c;
  return ir::Verify(*model.graph);
}

}  // namespace kiln::passes
