#include "passes/fuse_conv_global_pool.h"

#include "ops/op.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool DefaultDomain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// "max" or "mean" when node p pools a rank-3 input over axis 2 alone; "" otherwise.
std::string PoolMode(const ir::Graph& g, const ir::Node& p) {
  if (!DefaultDomain(p) || p.inputs.empty() || p.inputs[0] < 0 || p.outputs.size() != 1 ||
      p.outputs[0] < 0)
    return "";
  const ir::TypeInfo& x = g.values[p.inputs[0]].type;
  if (!x.shape_known() || x.dims.size() != 3) return "";
  if (p.op_type == "GlobalMaxPool") return "max";
  if (p.op_type == "GlobalAveragePool") return "mean";
  if (p.op_type != "ReduceMax" && p.op_type != "ReduceMean") return "";
  std::vector<int64_t> axes = p.attr_ints("axes");
  if (p.inputs.size() > 1 && p.inputs[1] >= 0) {
    const ir::Value& a = g.values[p.inputs[1]];
    if (!a.constant) return "";
    axes = a.constant->ToInt64Vector();
  }
  if (axes.size() != 1 || (axes[0] != 2 && axes[0] != -1)) return "";
  return p.op_type == "ReduceMax" ? "max" : "mean";
}

// A pointwise convolution of a rank-3 input with a constant weight, one group, stride 1, no
// padding, and at most an activation ConvGlobalPool applies.
bool PointwiseConv(const ir::Graph& g, const ir::Node& c) {
  const bool fused = c.op_type == "FusedConv" && c.domain == "com.microsoft";
  if (!fused && !(c.op_type == "Conv" && DefaultDomain(c))) return false;
  if (c.inputs.size() < 2 || c.inputs[0] < 0 || c.inputs[1] < 0 || c.outputs.size() != 1 ||
      (c.inputs.size() > 3 && c.inputs[3] >= 0))
    return false;
  const ir::Value& w = g.values[c.inputs[1]];
  const ir::TypeInfo& x = g.values[c.inputs[0]].type;
  if (!w.constant || w.type.dtype != DType::kFloat32 || x.dtype != DType::kFloat32 ||
      !w.type.shape_known() || w.type.dims.size() != 3 || w.type.dims[2] != 1)
    return false;
  if (c.attr_int("group", 1) != 1) return false;
  const std::string pad = c.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;
  for (int64_t s : c.attr_ints("strides"))
    if (s != 1) return false;
  for (int64_t p : c.attr_ints("pads"))
    if (p != 0) return false;
  const std::string act = fused ? c.attr_string("activation", "") : "";
  return act.empty() || act == "Relu" || act == "LeakyRelu" || act == "Clip";
}

bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& pool = g.nodes[i];
  const std::string mode = PoolMode(g, pool);
  if (mode.empty()) return false;
  const int y = pool.inputs[0], c = g.values[y].producer;
  if (c < 0 || r.Sole(y) != i || !PointwiseConv(g, g.nodes[c]) || !ChainIsFree(keep, {c}, i))
    return false;
  const ir::Node& conv = g.nodes[c];
  ir::Node fused;
  fused.op_type = "ConvGlobalPool";
  fused.domain = ops::kKilnDomain;
  fused.inputs = {conv.inputs[0], conv.inputs[1]};
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) fused.inputs.push_back(conv.inputs[2]);
  fused.attrs["mode"] = ir::Attribute::String(mode);
  const bool global = pool.op_type.rfind("Global", 0) == 0;
  fused.attrs["keepdims"] = ir::Attribute::Int(global ? 1 : pool.attr_int("keepdims", 1));
  for (const char* a : {"activation", "activation_params"})
    if (const ir::Attribute* v = conv.attr(a)) fused.attrs[a] = *v;
  ReplaceChain(g, keep, {c, i}, i, std::move(fused));
  return true;
}

}  // namespace

Expected<bool> FuseConvGlobalPool(ir::Model& model) {
  bool changed = FuseEachNode(*model.graph, FuseAt);
  if (changed && !model.opsets.count(ops::kKilnDomain)) model.opsets[ops::kKilnDomain] = 1;
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
