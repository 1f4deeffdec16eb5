#include "passes/fuse_groupnorm.h"

#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsReshape(const ir::Node& n) {
  return n.op_type == "Reshape" && IsDefaultDomain(n) && !n.inputs.empty() && n.inputs[0] >= 0 &&
         n.outputs.size() == 1 && n.outputs[0] >= 0;
}

// Tensor p of G groups as one value per channel of `channels`.
Tensor PerChannel(const Tensor& p, int64_t channels) {
  const int64_t per_group = channels / p.size();
  Tensor t(DType::kFloat32, {channels});
  for (int64_t c = 0; c < channels; ++c) t.data<float>()[c] = p.data<float>()[c / per_group];
  return t;
}

// The GroupNorm export around InstanceNormalization node i, as GroupNormalization in the place
// of its second Reshape. False if the pattern does not match.
bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& norm = g.nodes[i];
  if (norm.op_type != "InstanceNormalization" || !IsDefaultDomain(norm) ||
      norm.inputs.size() != 3 || norm.inputs[0] < 0 || norm.outputs.size() != 1 ||
      norm.outputs[0] < 0)
    return false;
  const int grouped = norm.inputs[0], first = g.values[grouped].producer;
  const int back = r.Sole(norm.outputs[0]);
  if (first < 0 || back < 0 || r.Sole(grouped) != i || !IsReshape(g.nodes[first]) ||
      !IsReshape(g.nodes[back]) || !keep[first] || !keep[back] ||
      g.nodes[back].inputs[0] != norm.outputs[0])
    return false;
  const int x = g.nodes[first].inputs[0], out = g.nodes[back].outputs[0];
  const ir::TypeInfo &xt = g.values[x].type, &gt = g.values[grouped].type;
  if (xt.dtype != DType::kFloat32 || !xt.shape_known() || xt.dims.size() < 3 || !gt.shape_known() ||
      gt.dims.size() != 3 || gt.dims[0] != xt.dims[0] || g.values[out].type.dims != xt.dims)
    return false;
  const int64_t channels = xt.dims[1], groups = gt.dims[1];
  if (groups <= 0 || channels % groups != 0) return false;
  const Tensor* scale = VectorFloatInput(g, norm, 1, groups);
  const Tensor* bias = VectorFloatInput(g, norm, 2, groups);
  if (!scale || !bias) return false;
  ir::Node fused;
  fused.name = g.nodes[back].name;
  fused.op_type = "GroupNormalization";
  // Both made before AddConstant grows g.values (scale and bias point into it).
  Tensor channel_scale = PerChannel(*scale, channels), channel_bias = PerChannel(*bias, channels);
  const std::string base = g.values[out].name;
  const int sv = AddConstant(g, base + "_scale", std::move(channel_scale));
  fused.inputs = {x, sv, AddConstant(g, base + "_bias", std::move(channel_bias))};
  fused.outputs = {out};
  fused.attrs["num_groups"] = ir::Attribute::Int(groups);
  fused.attrs["epsilon"] = ir::Attribute::Float(norm.attr_float("epsilon", 1e-5f));
  keep[first] = 0;
  keep[i] = 0;
  g.values[grouped].producer = -1;
  g.values[g.nodes[i].outputs[0]].producer = -1;
  g.nodes[back] = std::move(fused);
  return true;
}

}  // namespace

Expected<bool> FuseGroupNorm(ir::Model& model) {
  return VerifiedChange(*model.graph, FuseEachNode(*model.graph, FuseAt));
}

}  // namespace kiln::passes
