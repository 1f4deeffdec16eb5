#include "ops/normalization_plan.h"

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

std::string PlanGroupNorm(const ir::Node& node, const Dims& x, const Dims& scale, const Dims& bias,
                          GroupNormPlan* plan) {
  GroupNormPlan& p = *plan;
  p = GroupNormPlan();
  if (x.size() < 2) return "GroupNormalization needs rank >= 2";
  p.batch = x[0];
  p.channels = x[1];
  p.groups = node.attr_int("num_groups", 0);
  if (p.groups <= 0 || p.channels % p.groups != 0)
    return "num_groups " + std::to_string(p.groups) +
           " must be positive and divide C = " + std::to_string(p.channels);
  p.channels_per_group = p.channels / p.groups;
  p.inner = NumElements(Dims(x.begin() + 2, x.end()));
  p.epsilon = node.attr_float("epsilon", 1e-5f);
  for (const Dims* d : {&scale, &bias}) {
    const int64_t n = NumElements(*d);
    if (n != p.channels && n != p.groups)
      return "GroupNormalization scale/bias must have C or num_groups elements, got " +
             DimsToString(*d);
    (d == &scale ? p.scale_per_group : p.bias_per_group) = n != p.channels;
  }
  return "";
}

}  // namespace kiln::ops
