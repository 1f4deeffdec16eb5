#include "passes/fuse_gelu.h"

#include <cmath>
#include <optional>
#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Mul(v, 0.5) or Mul(0.5, v).
bool IsHalfOf(const ir::Graph& g, const ir::Node& n, int v) {
  return IsOnnxBinary(n, "Mul") && OtherOperand(n, v) >= 0 &&
         Near(ScalarFloatConstant(g, OtherOperand(n, v)), 0.5);
}

bool IsOnnx(const ir::Node& n, const char* op) {
  return (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == op && n.inputs.size() == 1 &&
         n.inputs[0] >= 0 && n.outputs.size() == 1 && n.outputs[0] >= 0;
}

// The nodes before the non-linearity: returns x (or -1) and adds the nodes to `gone`.
// Erf form: x / sqrt(2) or x * (1 / sqrt(2)).
int ErfFront(const ir::Graph& g, const ValueReaders& u, int e, std::vector<int>* gone) {
  const int scaled = g.nodes[e].inputs[0];
  const int s = g.values[scaled].producer;
  if (s < 0 || u.Sole(scaled) != e) return -1;
  const ir::Node& scale = g.nodes[s];
  int x = -1;
  if (IsOnnxBinary(scale, "Div") && Near(ScalarFloatConstant(g, scale.inputs[1]), std::sqrt(2.0)))
    x = scale.inputs[0];
  else if (IsOnnxBinary(scale, "Mul"))
    for (int k = 0; k < 2; ++k)
      if (Near(ScalarFloatConstant(g, scale.inputs[1 - k]), std::sqrt(0.5))) x = scale.inputs[k];
  if (x >= 0) gone->push_back(s);
  return x;
}

// The producer of v when v has no other reader, else -1.
int SoleProducer(const ir::Graph& g, const ValueReaders& u, int v, int reader) {
  const int p = v >= 0 ? g.values[v].producer : -1;
  return p >= 0 && u.Sole(v) == reader ? p : -1;
}

// Tanh form: sqrt(2 / pi) * (x + 0.044715 * x^3), x^3 as Pow(x, 3), (x * x) * x or x * (x * x);
// every Mul and Add in either operand order.
int TanhFront(const ir::Graph& g, const ValueReaders& u, int t, std::vector<int>* gone) {
  const int m1 = SoleProducer(g, u, g.nodes[t].inputs[0], t);  // sqrt(2 / pi) * inner
  if (m1 < 0 || !IsOnnxBinary(g.nodes[m1], "Mul")) return -1;
  int inner = -1;
  for (int k = 0; k < 2; ++k)
    if (Near(ScalarFloatConstant(g, g.nodes[m1].inputs[1 - k]), std::sqrt(2.0 / M_PI)))
      inner = g.nodes[m1].inputs[k];
  const int add = SoleProducer(g, u, inner, m1);  // x + 0.044715 * cube
  if (add < 0 || !IsOnnxBinary(g.nodes[add], "Add")) return -1;
  for (int k = 0; k < 2; ++k) {
    const int x = g.nodes[add].inputs[k];
    const int m2 = SoleProducer(g, u, g.nodes[add].inputs[1 - k], add);
    if (m2 < 0 || !IsOnnxBinary(g.nodes[m2], "Mul")) continue;
    int cube = -1;
    for (int j = 0; j < 2; ++j)
      if (Near(ScalarFloatConstant(g, g.nodes[m2].inputs[1 - j]), 0.044715))
        cube = g.nodes[m2].inputs[j];
    const int c = SoleProducer(g, u, cube, m2);
    if (c < 0) continue;
    const ir::Node& cn = g.nodes[c];
    std::vector<int> nodes = {m1, add, m2, c};
    bool is_cube = IsOnnxBinary(cn, "Pow") && cn.inputs[0] == x &&
                   Near(ScalarFloatConstant(g, cn.inputs[1]), 3.0);
    if (!is_cube && IsOnnxBinary(cn, "Mul")) {  // (x * x) * x or x * (x * x)
      for (int j = 0; j < 2 && !is_cube; ++j) {
        const int sq = SoleProducer(g, u, cn.inputs[1 - j], c);
        if (cn.inputs[j] == x && sq >= 0 && IsOnnxBinary(g.nodes[sq], "Mul") &&
            g.nodes[sq].inputs[0] == x && g.nodes[sq].inputs[1] == x) {
          is_cube = true;
          nodes.push_back(sq);
        }
      }
    }
    if (!is_cube) continue;
    gone->insert(gone->end(), nodes.begin(), nodes.end());
    return x;
  }
  return -1;
}

// The tail after the non-linearity f: 0.5 * x * (1 + f), the product with x and the 0.5 in one of
// three orders. Returns the last node (or -1) and adds the others to `gone`.
int GeluTail(const ir::Graph& g, const ValueReaders& u, int f, int x, std::vector<int>* gone) {
  // 1 + f (Add, or a two-input Sum as ONNX's own expansion of Gelu writes it).
  const int add = u.Sole(g.nodes[f].outputs[0]);
  if (add < 0 || !(IsOnnxBinary(g.nodes[add], "Add") || IsOnnxBinary(g.nodes[add], "Sum")) ||
      !Near(ScalarFloatConstant(g, OtherOperand(g.nodes[add], g.nodes[f].outputs[0])), 1.0))
    return -1;
  gone->push_back(add);
  const int sum = g.nodes[add].outputs[0];
  const int m = u.Sole(sum);
  if (m < 0 || !IsOnnxBinary(g.nodes[m], "Mul")) return -1;
  const int other = OtherOperand(g.nodes[m], sum);
  const int p = other >= 0 ? g.values[other].producer : -1;
  if (other == x) {  // (x * sum) * 0.5
    const int h = u.Sole(g.nodes[m].outputs[0]);
    if (h < 0 || !IsHalfOf(g, g.nodes[h], g.nodes[m].outputs[0])) return -1;
    gone->push_back(m);
    return h;
  }
  if (p >= 0 && u.Sole(other) == m && IsHalfOf(g, g.nodes[p], x)) {  // (x * 0.5) * sum
    gone->push_back(p);
    return m;
  }
  if (IsHalfOf(g, g.nodes[m], sum)) {  // x * (sum * 0.5)
    const int h = u.Sole(g.nodes[m].outputs[0]);
    if (h < 0 || !IsOnnxBinary(g.nodes[h], "Mul") ||
        OtherOperand(g.nodes[h], g.nodes[m].outputs[0]) != x)
      return -1;
    gone->push_back(m);
    return h;
  }
  return -1;
}

// One Gelu for the chain around the Erf or Tanh at node e.
bool FuseAt(ir::Graph& g, const ValueReaders& u, std::vector<char>& keep, int e) {
  const ir::Node& f = g.nodes[e];
  const bool erf = IsOnnx(f, "Erf"), tanh = IsOnnx(f, "Tanh");
  if (!erf && !tanh) return false;
  std::vector<int> gone;
  const int x = erf ? ErfFront(g, u, e, &gone) : TanhFront(g, u, e, &gone);
  const ir::TypeInfo* xt = x >= 0 ? &g.values[x].type : nullptr;
  if (!xt || xt->dtype != DType::kFloat32 || !xt->shape_known()) return false;
  gone.push_back(e);
  const int last = GeluTail(g, u, e, x, &gone);
  if (last < 0 || g.values[g.nodes[last].outputs[0]].type.dims != xt->dims) return false;
  if (!ReplaceChainWithUnary(g, keep, gone, last, x, "Gelu", kGeluDomain)) return false;
  if (tanh) {
    g.nodes[last].attrs["approximate"] = ir::Attribute::String("tanh");
  }
  return true;
}

}  // namespace

Expected<bool> FuseGelu(ir::Model& model) {
  bool changed = FuseEachNode(*model.graph, FuseAt);
  if (changed && !model.opsets.count(kGeluDomain)) model.opsets[kGeluDomain] = 1;
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
