#include "passes/fuse_layernorm.h"

#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// A default-domain ReduceMean of v over its last axis alone, keeping it (keepdims 1).
bool IsLastAxisMean(const ir::Graph& g, const ir::Node& n, int v) {
  if (n.op_type != "ReduceMean" || !IsDefaultDomain(n) || n.inputs.empty() || n.inputs[0] != v ||
      n.outputs.size() != 1 || n.outputs[0] < 0 || n.attr_int("keepdims", 1) != 1)
    return false;
  const ir::TypeInfo& t = g.values[v].type;
  if (!t.shape_known() || t.dims.empty()) return false;
  const int64_t rank = static_cast<int64_t>(t.dims.size());
  std::vector<int64_t> axes;
  if (const ir::Attribute* a = n.attr("axes")) {
    if (a->kind != ir::Attribute::Kind::kInts) return false;
    axes = a->ints;
  } else if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    if (!IsFixedConstant(g, n.inputs[1])) return false;
    const Tensor& c = *g.values[n.inputs[1]].constant;
    if (c.kind() != Tensor::Kind::kTensor || c.dtype() != DType::kInt64) return false;
    for (int64_t i = 0; i < c.size(); ++i) axes.push_back(c.data<int64_t>()[i]);
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// The sole reader of v's value when it is `op` in the default domain with two inputs, else -1.
int SoleBinaryReader(const ir::Graph& g, const ValueReaders& r, int v, const char* op) {
  const int n = r.Sole(v);
  return n >= 0 && IsOnnxBinary(g.nodes[n], op) ? n : -1;
}

// The chain from the first ReduceMean at node i, as LayerNormalization in the place of its last
// node. False if the pattern does not match.
bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& mean = g.nodes[i];
  if (mean.inputs.empty() || mean.inputs[0] < 0) return false;
  const int x = mean.inputs[0];
  const ir::TypeInfo& xt = g.values[x].type;
  if (xt.dtype != DType::kFloat32 || !IsLastAxisMean(g, mean, x)) return false;
  const int64_t width = xt.dims.back();
  // d = x - mean, read by the square and the Div alone.
  const int sub = SoleBinaryReader(g, r, mean.outputs[0], "Sub");
  if (sub < 0 || g.nodes[sub].inputs[0] != x || g.nodes[sub].inputs[1] != mean.outputs[0])
    return false;
  const int d = g.nodes[sub].outputs[0];
  if (r.is_output[d] || r.nodes[d].size() != 2) return false;
  int square = -1, div = -1;
  for (int n : r.nodes[d]) {
    const ir::Node& node = g.nodes[n];
    if (IsOnnxBinary(node, "Div") && node.inputs[0] == d && node.inputs[1] != d) div = n;
    if (IsOnnxBinary(node, "Mul") && node.inputs[0] == d && node.inputs[1] == d) square = n;
    if (IsOnnxBinary(node, "Pow") && node.inputs[0] == d &&
        Near(ScalarFloatConstant(g, node.inputs[1]), 2.0))
      square = n;
  }
  // Every read of d is one of those two (a subgraph capture would be another).
  if (square < 0 || div < 0 || r.reads[d] != (g.nodes[square].op_type == "Mul" ? 3 : 2))
    return false;
  const int var = r.Sole(g.nodes[square].outputs[0]);
  if (var < 0 || !IsLastAxisMean(g, g.nodes[var], g.nodes[square].outputs[0])) return false;
  const int add = SoleBinaryReader(g, r, g.nodes[var].outputs[0], "Add");
  if (add < 0) return false;
  const std::optional<float> eps =
      ScalarFloatConstant(g, OtherOperand(g.nodes[add], g.nodes[var].outputs[0]));
  if (!eps || *eps < 0) return false;
  const int sqrt = r.Sole(g.nodes[add].outputs[0]);
  if (sqrt < 0 || g.nodes[sqrt].op_type != "Sqrt" || !IsDefaultDomain(g.nodes[sqrt]) ||
      g.nodes[sqrt].outputs.size() != 1 || r.Sole(g.nodes[sqrt].outputs[0]) != div ||
      g.nodes[div].inputs[1] != g.nodes[sqrt].outputs[0])
    return false;
  std::vector<int> gone = {i, sub, square, var, add, sqrt, div};
  // The optional affine tail: Mul by gamma, then Add beta (constants of the last dim's size).
  const Tensor *gamma = nullptr, *beta = nullptr;
  int last = div;
  if (const int mul = SoleBinaryReader(g, r, g.nodes[div].outputs[0], "Mul"); mul >= 0) {
    const int k = g.nodes[mul].inputs[0] == g.nodes[div].outputs[0] ? 1 : 0;
    if ((gamma = VectorFloatInput(g, g.nodes[mul], k, width))) last = mul, gone.push_back(mul);
  }
  if (const int plus = SoleBinaryReader(g, r, g.nodes[last].outputs[0], "Add"); plus >= 0) {
    const int k = g.nodes[plus].inputs[0] == g.nodes[last].outputs[0] ? 1 : 0;
    if ((beta = VectorFloatInput(g, g.nodes[plus], k, width))) last = plus, gone.push_back(plus);
  }
  const int out = g.nodes[last].outputs[0];
  if (g.values[out].type.dims != xt.dims) return false;  // the affine tail broadcast wider
  if (!ChainIsFree(keep, gone, last)) return false;
  // Both copied before AddConstant grows g.values (gamma and beta point into it).
  Tensor scale(DType::kFloat32, {width});
  for (int64_t j = 0; j < width; ++j) scale.data<float>()[j] = gamma ? gamma->data<float>()[j] : 1;
  std::optional<Tensor> bias;
  if (beta) bias = *beta;
  const std::string base = g.values[out].name;
  ir::Node fused;
  fused.op_type = "LayerNormalization";
  fused.inputs = {x, AddConstant(g, base + "_scale", std::move(scale))};
  if (bias) fused.inputs.push_back(AddConstant(g, base + "_bias", std::move(*bias)));
  fused.attrs["axis"] = ir::Attribute::Int(-1);
  fused.attrs["epsilon"] = ir::Attribute::Float(*eps);
  ReplaceChain(g, keep, gone, last, std::move(fused));
  return true;
}

// x's square (Pow(x, 2) or Mul(x, x)) when node n is one, else -1.
int SquaredValue(const ir::Graph& g, const ir::Node& n) {
  if (IsOnnxBinary(n, "Mul") && n.inputs[0] == n.inputs[1]) return n.inputs[0];
  if (IsOnnxBinary(n, "Pow") && Near(ScalarFloatConstant(g, n.inputs[1]), 2.0)) return n.inputs[0];
  return -1;
}

// The RMSNorm chain from its square at node i (torch's and LLaMA's exports):
//   Pow(x, 2) or Mul(x, x) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, .) or
//   Reciprocal -> Mul(x, .) [-> Mul by gamma],
// as RMSNormalization in the place of its last node. False if the pattern does not match.
bool FuseRmsAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& square = g.nodes[i];
  const int x = SquaredValue(g, square);
  if (x < 0 || square.outputs.size() != 1) return false;
  const ir::TypeInfo& xt = g.values[x].type;
  const int mean = r.Sole(square.outputs[0]);
  if (xt.dtype != DType::kFloat32 || mean < 0 ||
      !IsLastAxisMean(g, g.nodes[mean], square.outputs[0]))
    return false;
  const int64_t width = xt.dims.back();
  const int add = SoleBinaryReader(g, r, g.nodes[mean].outputs[0], "Add");
  if (add < 0) return false;
  const std::optional<float> eps =
      ScalarFloatConstant(g, OtherOperand(g.nodes[add], g.nodes[mean].outputs[0]));
  const int sqrt = r.Sole(g.nodes[add].outputs[0]);
  if (!eps || *eps < 0 || sqrt < 0 || g.nodes[sqrt].op_type != "Sqrt" ||
      !IsDefaultDomain(g.nodes[sqrt]) || g.nodes[sqrt].outputs.size() != 1)
    return false;
  std::vector<int> gone = {i, mean, add, sqrt};
  const int sd = g.nodes[sqrt].outputs[0];
  int last = r.Sole(sd);
  if (last < 0) return false;
  if (g.nodes[last].op_type == "Reciprocal" && IsDefaultDomain(g.nodes[last])) {
    gone.push_back(last);
    const int inv = g.nodes[last].outputs[0];
    last = SoleBinaryReader(g, r, inv, "Mul");
    if (last < 0 || OtherOperand(g.nodes[last], inv) != x) return false;
  } else if (!IsOnnxBinary(g.nodes[last], "Div") || g.nodes[last].inputs[0] != x ||
             g.nodes[last].inputs[1] != sd) {
    return false;
  }
  gone.push_back(last);
  const Tensor* gamma = nullptr;
  if (const int mul = SoleBinaryReader(g, r, g.nodes[last].outputs[0], "Mul"); mul >= 0) {
    const int k = g.nodes[mul].inputs[0] == g.nodes[last].outputs[0] ? 1 : 0;
    if ((gamma = VectorFloatInput(g, g.nodes[mul], k, width))) last = mul, gone.push_back(mul);
  }
  const int out = g.nodes[last].outputs[0];
  if (g.values[out].type.dims != xt.dims || !ChainIsFree(keep, gone, last)) return false;
  // Copied before AddConstant grows g.values (gamma points into it).
  Tensor scale(DType::kFloat32, {width});
  for (int64_t j = 0; j < width; ++j) scale.data<float>()[j] = gamma ? gamma->data<float>()[j] : 1;
  ir::Node fused;
  fused.op_type = "RMSNormalization";
  fused.inputs = {x, AddConstant(g, g.values[out].name + "_scale", std::move(scale))};
  fused.attrs["axis"] = ir::Attribute::Int(-1);
  fused.attrs["epsilon"] = ir::Attribute::Float(*eps);
  ReplaceChain(g, keep, gone, last, std::move(fused));
  return true;
}

}  // namespace

Expected<bool> FuseLayerNorm(ir::Model& model) {
  return VerifiedChange(*model.graph,
                        FuseEachNode(*model.graph, [](ir::Graph& g, const ValueReaders& r,
                                                      std::vector<char>& keep, int i) {
                          return FuseAt(g, r, keep, i) || FuseRmsAt(g, r, keep, i);
                        }));
}

}  // namespace kiln::passes
