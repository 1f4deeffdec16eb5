#include "passes/fuse_hardswish.h"

#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Div(v, 6) or Mul(v, 1/6) (either order): n scales v by a sixth.
bool IsSixthOf(const ir::Graph& g, const ir::Node& n, int v) {
  if (IsOnnxBinary(n, "Div"))
    return n.inputs[0] == v && Near(ScalarFloatConstant(g, n.inputs[1]), 6.0);
  return IsOnnxBinary(n, "Mul") && OtherOperand(n, v) >= 0 &&
         Near(ScalarFloatConstant(g, OtherOperand(n, v)), 1.0 / 6.0);
}

// Mul(x, v) or Mul(v, x).
bool IsProductWith(const ir::Node& n, int v, int x) {
  return IsOnnxBinary(n, "Mul") && OtherOperand(n, v) == x;
}

// For `gate` = relu6(x + 3) (or x's HardSigmoid, already divided by 6): the nodes between it and
// the product with x, then the last node, in `gone` (the last one last); false if none match.
bool FinishChain(const ir::Graph& g, const ValueReaders& u, int gate, int x, bool divided,
                 std::vector<int>* gone) {
  const int m = u.Sole(gate);
  if (m < 0) return false;
  const ir::Node& mn = g.nodes[m];
  if (divided) {  // HardSigmoid: x * gate
    if (!IsProductWith(mn, gate, x)) return false;
    gone->push_back(m);
    return true;
  }
  if (IsProductWith(mn, gate, x)) {  // (x * gate) / 6
    const int d = u.Sole(mn.outputs[0]);
    if (d < 0 || !IsSixthOf(g, g.nodes[d], mn.outputs[0])) return false;
    gone->push_back(m);
    gone->push_back(d);
    return true;
  }
  if (IsSixthOf(g, mn, gate)) {  // x * (gate / 6)
    const int h = u.Sole(mn.outputs[0]);
    if (h < 0 || !IsProductWith(g.nodes[h], mn.outputs[0], x)) return false;
    gone->push_back(m);
    gone->push_back(h);
    return true;
  }
  return false;
}

// One HardSwish for the chain whose gate (Clip or HardSigmoid) is node c.
bool FuseAt(ir::Graph& g, const ValueReaders& u, std::vector<char>& keep, int c, int64_t opset) {
  const ir::Node& gate = g.nodes[c];
  if (gate.outputs.size() != 1 || gate.outputs[0] < 0 || gate.inputs.empty() ||
      gate.inputs[0] < 0 || (!gate.domain.empty() && gate.domain != "ai.onnx"))
    return false;
  std::vector<int> gone;
  int x = -1;
  bool divided = false;
  float lo, hi;
  if (gate.op_type == "HardSigmoid" && gate.inputs.size() == 1) {
    x = gate.inputs[0];
    divided = true;
    if (!Near(gate.attr_float("alpha", 0.2f), 1.0 / 6.0) ||
        !Near(gate.attr_float("beta", 0.5f), 0.5))
      return false;
    gone.push_back(c);
  } else if (ClipBounds(g, gate, opset, &lo, &hi) && lo == 0.0f && Near(hi, 6.0)) {
    const int shifted = gate.inputs[0];  // x + 3
    const int a = g.values[shifted].producer;
    if (a < 0 || u.Sole(shifted) != c || !IsOnnxBinary(g.nodes[a], "Add")) return false;
    for (int k = 0; k < 2; ++k)
      if (Near(ScalarFloatConstant(g, g.nodes[a].inputs[1 - k]), 3.0)) x = g.nodes[a].inputs[k];
    gone = {a, c};
  } else {
    return false;
  }
  const ir::TypeInfo* xt = x >= 0 ? &g.values[x].type : nullptr;
  if (!xt || xt->dtype != DType::kFloat32 || !xt->shape_known() ||
      !FinishChain(g, u, gate.outputs[0], x, divided, &gone))
    return false;
  const int last = gone.back();
  return g.values[g.nodes[last].outputs[0]].type.dims == xt->dims &&
         ReplaceChainWithUnary(g, keep, gone, last, x, "HardSwish", "");
}

}  // namespace

Expected<bool> FuseHardSwish(ir::Model& model) {
  const int64_t opset = model.OpsetFor("");
  bool changed = FuseEachNode(
      *model.graph, [opset](ir::Graph& g, const ValueReaders& u, std::vector<char>& keep, int c) {
        return FuseAt(g, u, keep, c, opset);
      });
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
