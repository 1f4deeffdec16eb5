#include "passes/eliminate_identities.h"

#include <algorithm>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool SameKnownTensorType(const ir::TypeInfo& a, const ir::TypeInfo& b) {
  return a.kind == ir::TypeInfo::Kind::kTensor && b.kind == ir::TypeInfo::Kind::kTensor &&
         a.dtype != DType::kUndefined && a.dtype == b.dtype && a.shape_known() && b.shape_known() &&
         a.dims == b.dims;
}

// The integer values of input `i` when it is a constant the compiler may rely on.
bool ConstantInts(const ir::Graph& g, const ir::Node& n, size_t i, std::vector<int64_t>* out) {
  if (i >= n.inputs.size() || !IsFixedConstant(g, n.inputs[i])) return false;
  const Tensor& t = *g.values[n.inputs[i]].constant;
  if (t.kind() != Tensor::Kind::kTensor ||
      !(IsSignedIntDType(t.dtype()) || IsUnsignedIntDType(t.dtype())))
    return false;
  *out = t.ToInt64Vector();
  return true;
}

bool AllZero(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x != 0) return false;
  return true;
}

// True when value v is a fixed constant scalar (one element) equal to `value`.
bool IsScalarConstant(const ir::Graph& g, int v, double value) {
  if (!IsFixedConstant(g, v)) return false;
  const Tensor& t = *g.values[v].constant;
  return t.kind() == Tensor::Kind::kTensor && t.size() == 1 && t.GetDouble(0) == value;
}

// True when node n returns its first input unchanged as its first output.
bool IsIdentity(const ir::Graph& g, const ir::Node& n, int64_t opset, const std::vector<int>& reads,
                const std::vector<char>& is_output) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k) {  // e.g. Dropout's mask: must be unread
    int v = n.outputs[k];
    if (v >= 0 && (reads[v] > 0 || is_output[v])) return false;
  }
  const ir::TypeInfo& x = g.values[n.inputs[0]].type;
  const ir::TypeInfo& y = g.values[n.outputs[0]].type;
  const std::string& op = n.op_type;
  if (op == "Identity") return true;
  if (op == "Dropout") {
    if (opset < 12 || n.inputs.size() < 3 || n.inputs[2] < 0) return true;
    // A ratio of 0 keeps every element, in training mode too (torchvision's Swin exports
    // attention dropout so: training_mode true, ratio 0).
    if (n.inputs[1] >= 0 && IsScalarConstant(g, n.inputs[1], 0.0)) return true;
    return IsScalarConstant(g, n.inputs[2], 0.0);  // else training_mode could be true
  }
  if (x.kind != ir::TypeInfo::Kind::kTensor || x.dtype == DType::kUndefined) return false;
  if (op == "Cast") {
    const ir::Attribute* to = n.attr("to");
    return to && to->kind == ir::Attribute::Kind::kInt && y.dtype == x.dtype &&
           to->i == static_cast<int64_t>(x.dtype);
  }
  if (op == "CastLike")
    return n.inputs.size() > 1 && n.inputs[1] >= 0 && g.values[n.inputs[1]].type.dtype == x.dtype &&
           y.dtype == x.dtype;
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Expand")
    return SameKnownTensorType(x, y);
  if (op == "Transpose") {
    if (!x.has_shape || y.dtype != x.dtype) return false;
    const ir::Attribute* perm = n.attr("perm");
    if (!perm) return x.dims.size() <= 1;  // the default reverses the dims
    if (perm->kind != ir::Attribute::Kind::kInts || perm->ints.size() != x.dims.size())
      return false;
    for (size_t i = 0; i < perm->ints.size(); ++i)
      if (perm->ints[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
  if (op == "Pad") {
    if (!SameKnownTensorType(x, y)) return false;
    std::vector<int64_t> pads;
    if (opset < 11) {
      const ir::Attribute* a = n.attr(opset < 2 ? "paddings" : "pads");
      return a && a->kind == ir::Attribute::Kind::kInts && AllZero(a->ints);
    }
    return ConstantInts(g, n, 1, &pads) && AllZero(pads);
  }
  if (op == "Slice") {
    if (!SameKnownTensorType(x, y)) return false;
    if (opset < 10 || n.inputs.size() < 5 || n.inputs[4] < 0) return true;
    std::vector<int64_t> steps;
    if (!ConstantInts(g, n, 4, &steps)) return false;
    for (int64_t s : steps)
      if (s <= 0) return false;  // a reversal keeps the dims but not the order
    return true;
  }
  return false;
}

bool EliminateInGraph(ir::Graph& g, const ir::Model& m, bool main) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = EliminateInGraph(sg, m, false) || changed; });
  const std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  ValueRewirer rewire(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!IsIdentity(g, n, m.OpsetFor(n.domain), reads, is_output)) continue;
    int x = rewire.Find(n.inputs[0]), y = n.outputs[0];
    if (main && is_output[y]) {
      // The output's name is the interface: let x's producer write y, if x is a plain result.
      int p = g.values[x].producer;
      if (p < 0 || is_output[x]) continue;
      const auto& outs = g.nodes[p].outputs;
      int slot = static_cast<int>(std::find(outs.begin(), outs.end(), x) - outs.begin());
      KILN_CHECK(slot < static_cast<int>(outs.size()), "producer does not write its value");
      RetargetOutput(g, p, slot, y, rewire);
    } else {
      rewire.Merge(y, x);
    }
    keep[i] = 0;
    changed = true;
  }
  rewire.Apply(g, !main);
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> EliminateIdentities(ir::Model& model) {
  return VerifiedChange(*model.graph, EliminateInGraph(*model.graph, model, true));
}

}  // namespace kiln::passes
