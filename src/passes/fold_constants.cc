#include "passes/fold_constants.h"

#include "ops/op.h"

namespace kiln::passes {

bool IsFoldable(const ir::Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return false;
  static const char* kNonDeterministic[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Multinomial", "Bernoulli",
                                            "Dropout"};
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
  bool dims_only = n.op_type == "Shape" || n.op_type == "Size";
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
    if (n.outputs[i] >= 0) outs[i] = Tensor(g.values[n.outputs[i]].type.dtype, g.values[n.outputs[i]].type.dims);
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

// How many times each value is read by nodes (directly or through subgraph captures) or by the
// graph's outputs.
std::vector<int> ReadCounts(const ir::Graph& g) {
  std::vector<int> reads(g.values.size(), 0);
  for (int v : g.outputs) ++reads[v];
  for (const auto& n : g.nodes) {
    for (int v : n.inputs)
      if (v >= 0) ++reads[v];
    for (int v : n.implicit_inputs)
      if (v >= 0) ++reads[v];
  }
  return reads;
}

void FoldGraph(ir::Graph& g, const ir::Model& m, size_t max_bytes) {
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    for (auto& [k, a] : n.attrs) {
      if (a.g) FoldGraph(*a.g, m, max_bytes);
      for (auto& sg : a.graphs) FoldGraph(*sg, m, max_bytes);
    }
    if (TryFold(g, n, m.OpsetFor(n.domain), max_bytes)) keep[i] = 0;
  }
  // Dead nodes, last to first so that whole dead chains go in one sweep.
  std::vector<int> reads = ReadCounts(g);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    if (keep[i]) {
      bool used = false;
      for (int v : n.outputs) used = used || (v >= 0 && reads[v] > 0);
      bool pure = IsFoldable(n) || n.op_type == "Dropout" || n.op_type.rfind("Random", 0) == 0;
      if (used || !pure) continue;
      keep[i] = 0;
    }
    for (int v : n.inputs)
      if (v >= 0) --reads[v];
    for (int v : n.implicit_inputs)
      if (v >= 0) --reads[v];
  }
  std::vector<ir::Node> nodes;
  for (auto& v : g.values) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    for (int v : g.nodes[i].outputs)
      if (v >= 0) g.values[v].producer = static_cast<int>(nodes.size());
    nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
}

}  // namespace

Status FoldConstants(ir::Model& model, size_t max_bytes) {
  FoldGraph(*model.graph, model, max_bytes);
  return ir::Verify(*model.graph);
}

}  // namespace kiln::passes
