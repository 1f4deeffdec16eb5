#include "passes/fuse_conv_activation.h"

#include <optional>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

struct Activation {
  std::string name;
  std::vector<float> params;
};

// The activation node `a` computes, or nothing when it is not one FusedConv takes.
std::optional<Activation> ActivationOf(const ir::Graph& g, const ir::Node& a, int64_t opset) {
  if (!IsDefaultDomain(a) || a.outputs.size() != 1 || a.inputs.empty() || a.inputs[0] < 0)
    return std::nullopt;
  if (a.op_type == "Relu" && a.inputs.size() == 1) return Activation{"Relu", {}};
  if (a.op_type == "HardSwish" && a.inputs.size() == 1) return Activation{"HardSwish", {}};
  if (a.op_type == "Swish" && a.inputs.size() == 1 && a.attr_float("alpha", 1.0f) == 1.0f)
    return Activation{"Swish", {}};
  if (a.op_type == "LeakyRelu" && a.inputs.size() == 1)
    return Activation{"LeakyRelu", {a.attr_float("alpha", 0.01f)}};
  float lo, hi;
  if (!ClipBounds(g, a, opset, &lo, &hi)) return std::nullopt;
  return Activation{"Clip", {lo, hi}};
}

bool FuseInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg, m) || changed; });
  const ValueReaders r(g);
  std::vector<char> keep(g.nodes.size(), 1);
  const int64_t opset = m.OpsetFor("");
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const ir::Node& conv = g.nodes[c];
    if (conv.op_type != "Conv" || !IsDefaultDomain(conv) || conv.outputs.size() != 1 ||
        conv.inputs.size() < 2 || conv.inputs[0] < 0 || conv.inputs[1] < 0)
      continue;
    const int y = conv.outputs[0];
    const ir::TypeInfo& yt = g.values[y < 0 ? 0 : y].type;
    if (y < 0 || yt.dtype != DType::kFloat32 || !yt.shape_known()) continue;
    int last = -1, z = -1;
    std::optional<Activation> act;
    int next = r.Sole(y);
    // Add (from opset 7: no legacy broadcast attributes) or a two-input Sum (older exports).
    if (next >= 0 && keep[next] &&
        ((g.nodes[next].op_type == "Add" && opset >= 7) || g.nodes[next].op_type == "Sum") &&
        IsDefaultDomain(g.nodes[next]) && g.nodes[next].inputs.size() == 2 &&
        g.nodes[next].outputs.size() == 1 && g.nodes[next].outputs[0] >= 0) {
      const ir::Node& add = g.nodes[next];
      const int other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
      const ir::TypeInfo& ot = g.values[other < 0 ? 0 : other].type;
      if (other >= 0 && other != y && ot.dtype == DType::kFloat32 && ot.shape_known() &&
          ot.dims == yt.dims && g.values[add.outputs[0]].type.dims == yt.dims) {
        z = other;
        last = next;
        next = r.Sole(add.outputs[0]);
      } else {
        next = -1;
      }
    }
    const int cur = last >= 0 ? g.nodes[last].outputs[0] : y;
    std::vector<int> gone;  // nodes besides the Conv that the fused node replaces
    if (next >= 0 && keep[next] && g.nodes[next].inputs[0] == cur) {
      act = ActivationOf(g, g.nodes[next], opset);
      if (act) {
        if (last >= 0) gone.push_back(last);
        last = next;
      }
    }
    if (!act) {
      const int mul = SwishMul(g, cur, r);
      if (mul >= 0 && keep[mul]) {
        act = Activation{"Swish", {}};
        if (last >= 0) gone.push_back(last);
        for (int n : r.nodes[cur])
          if (n != mul) gone.push_back(n);  // the Sigmoid
        last = mul;
      }
    }
    if (last < 0) continue;
    // Every node that goes must not be the place of another fusion already made.
    bool free = true;
    for (int n : gone) free = free && keep[n];
    if (!free) continue;
    ir::Node fused = conv;
    fused.op_type = "FusedConv";
    fused.domain = kFusedConvDomain;
    fused.inputs.resize(3, -1);
    if (z >= 0) fused.inputs.push_back(z);
    if (act) {
      fused.attrs["activation"] = ir::Attribute::String(act->name);
      if (!act->params.empty())
        fused.attrs["activation_params"] = ir::Attribute::Floats(act->params);
    }
    const int out = g.nodes[last].outputs[0];
    fused.outputs = {out};
    // The fused node takes the last node's place: every input it reads is computed by then.
    for (int n : gone) {
      keep[n] = 0;
      for (int v : g.nodes[n].outputs)
        if (v >= 0) g.values[v].producer = -1;
    }
    keep[c] = 0;
    g.values[y].producer = -1;
    g.nodes[last] = std::move(fused);
    g.values[out].producer = last;
    changed = true;
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseConvActivation(ir::Model& model) {
  bool changed = FuseInGraph(*model.graph, model);
  if (changed && !model.opsets.count(kFusedConvDomain)) model.opsets[kFusedConvDomain] = 1;
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
