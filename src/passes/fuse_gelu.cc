#include "passes/fuse_gelu.h"

#include <cmath>
#include <optional>
#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Mul(v, 0.5) or Mul(0.5, v).
bool IsHalfOf(const ir::Graph& g, const ir::Node& n, int v) {
  return IsOnnxBinary(n, "Mul") && OtherOperand(n, v) >= 0 && Near(ScalarFloatConstant(g, OtherOperand(n, v)), 0.5);
}

bool FuseInGraph(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes) ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg) || changed; });
  const ValueReaders u(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t e = 0; e < g.nodes.size(); ++e) {
    const ir::Node& erf = g.nodes[e];
    if ((!erf.domain.empty() && erf.domain != "ai.onnx") || erf.op_type != "Erf" ||
        erf.inputs.size() != 1 || erf.inputs[0] < 0 || erf.outputs.size() != 1 || erf.outputs[0] < 0)
      continue;
    // x / sqrt(2) or x * (1 / sqrt(2)).
    const int scaled = erf.inputs[0];
    const int s = g.values[scaled].producer;
    if (s < 0 || u.Sole(scaled) != static_cast<int>(e)) continue;
    const ir::Node& scale = g.nodes[s];
    int x = -1;
    if (IsOnnxBinary(scale, "Div") && Near(ScalarFloatConstant(g, scale.inputs[1]), std::sqrt(2.0)))
      x = scale.inputs[0];
    else if (IsOnnxBinary(scale, "Mul"))
      for (int k = 0; k < 2; ++k)
        if (Near(ScalarFloatConstant(g, scale.inputs[1 - k]), std::sqrt(0.5))) x = scale.inputs[k];
    const ir::TypeInfo* xt = x >= 0 ? &g.values[x].type : nullptr;
    if (!xt || xt->dtype != DType::kFloat32 || !xt->shape_known()) continue;
    // 1 + erf (Add, or a two-input Sum as ONNX's own expansion of Gelu writes it).
    const int add = u.Sole(erf.outputs[0]);
    if (add < 0 || !(IsOnnxBinary(g.nodes[add], "Add") || IsOnnxBinary(g.nodes[add], "Sum")) ||
        !Near(ScalarFloatConstant(g, OtherOperand(g.nodes[add], erf.outputs[0])), 1.0))
      continue;
    const int sum = g.nodes[add].outputs[0];
    // The product with x and the 0.5, in one of three orders.
    std::vector<int> gone = {s, static_cast<int>(e), add};
    int last = -1;
    const int m = u.Sole(sum);
    if (m >= 0 && IsOnnxBinary(g.nodes[m], "Mul")) {
      const int other = OtherOperand(g.nodes[m], sum);
      const int p = other >= 0 ? g.values[other].producer : -1;
      if (other == x) {  // (x * sum) * 0.5
        const int h = u.Sole(g.nodes[m].outputs[0]);
        if (h >= 0 && IsHalfOf(g, g.nodes[h], g.nodes[m].outputs[0])) {
          gone.push_back(m);
          last = h;
        }
      } else if (p >= 0 && u.Sole(other) == m && IsHalfOf(g, g.nodes[p], x)) {  // (x * 0.5) * sum
        gone.push_back(p);
        last = m;
      } else if (IsHalfOf(g, g.nodes[m], sum)) {  // x * (sum * 0.5)
        const int h = u.Sole(g.nodes[m].outputs[0]);
        if (h >= 0 && IsOnnxBinary(g.nodes[h], "Mul") && OtherOperand(g.nodes[h], g.nodes[m].outputs[0]) == x) {
          gone.push_back(m);
          last = h;
        }
      }
    }
    if (last >= 0 && g.values[g.nodes[last].outputs[0]].type.dims == xt->dims &&
        ReplaceChainWithUnary(g, keep, gone, last, x, "Gelu", kGeluDomain))
      changed = true;
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseGelu(ir::Model& model) {
  bool changed = FuseInGraph(*model.graph);
  if (changed && !model.opsets.count(kGeluDomain)) model.opsets[kGeluDomain] = 1;
  KILN_RETURN_IF_ERROR(ir::Verify(*model.graph));
  return changed;
}

}  // namespace kiln::passes
