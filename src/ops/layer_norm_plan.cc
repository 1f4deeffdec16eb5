#include "ops/layer_norm_plan.h"

#include "ops/common.h"

namespace kiln::ops {

Dims LayerNormPlan::StatDims(const Dims& x) const {
  Dims stat(x.begin(), x.begin() + axis);
  stat.resize(x.size(), 1);
  return stat;
}

bool BroadcastsTo(const Dims& from, const Dims& to) {
  Dims out;
  return from.size() <= to.size() && BroadcastDims(from, to, &out) && out == to;
}

std::string PlanLayerNorm(const ir::Node& node, const Dims& x, const Dims& scale, const Dims* bias,
                          LayerNormPlan* plan) {
  LayerNormPlan& p = *plan;
  p = LayerNormPlan();
  p.rms = node.op_type == "RMSNormalization";
  p.axis = node.attr_int("axis", -1);
  if (!NormalizeAxis(p.axis, static_cast<int64_t>(x.size())))
    return "axis " + std::to_string(node.attr_int("axis", -1)) + " is out of range for rank " +
           std::to_string(x.size());
  const Dims norm(x.begin() + p.axis, x.end());
  p.rows = NumElements(Dims(x.begin(), x.begin() + p.axis));
  p.cols = NumElements(norm);
  p.epsilon = node.attr_float("epsilon", 1e-5f);
  const DType stash = static_cast<DType>(node.attr_int("stash_type", 1));
  p.stash_type = IsFloatingDType(stash) ? stash : DType::kFloat32;
  auto affine = [&](const Dims& d, bool* per_column) -> std::string {
    *per_column = BroadcastsTo(d, norm);
    if (*per_column || BroadcastsTo(d, x)) return "";
    return "scale/bias of shape " + DimsToString(d) + " does not broadcast to " + DimsToString(x);
  };
  std::string err = affine(scale, &p.scale_per_column);
  if (err.empty() && bias && !p.rms) err = affine(*bias, &p.bias_per_column);
  return err;
}

}  // namespace kiln::ops
