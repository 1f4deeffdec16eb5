// The normalizations' plans, read and checked once from the node and its input dims: shape
// inference and the host kernels (ops/normalization.cc), the C emitters
// (codegen/c/emit_normalization.cc, emit_sequence_models.cc) and the CUDA emitter read them.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ops {

// LayerNormalization and RMSNormalization: statistics over the dims from `axis` on (rows of `cols`
// elements), then scale (and, for LayerNormalization, bias), each broadcast to those dims ("per
// column") or else to the whole input.
struct LayerNormPlan {
  bool rms = false;  // RMSNormalization: no mean, no bias
  int64_t axis = 0, rows = 1, cols = 1;
  double epsilon = 1e-5;
  DType stash_type = DType::kFloat32;  // of the Mean and InvStdDev outputs
  bool scale_per_column = true, bias_per_column = true;
  // The dims of the Mean and InvStdDev outputs: X's up to `axis`, then ones.
  Dims StatDims(const Dims& x) const;
};

// `from` broadcasts to `to` without growing it (numpy-style, from the right).
bool BroadcastsTo(const Dims& from, const Dims& to);

// The plan of a LayerNormalization or RMSNormalization node whose X, Scale and B (or null) have
// these dims: "" or what is malformed.
std::string PlanLayerNorm(const ir::Node& node, const Dims& x, const Dims& scale, const Dims* bias,
                          LayerNormPlan* plan);

// GroupNormalization: statistics per (image, group) over channels_per_group channels and the
// spatial dims (`inner` elements each); scale and bias per group (opset 18) or per channel (opset
// 21), as their size tells.
struct GroupNormPlan {
  int64_t batch = 0, channels = 0, groups = 1, channels_per_group = 1, inner = 1;
  double epsilon = 1e-5;
  bool scale_per_group = false, bias_per_group = false;
};

// The plan of a GroupNormalization node whose X, scale and bias have these dims: "" or what is
// malformed.
std::string PlanGroupNorm(const ir::Node& node, const Dims& x, const Dims& scale, const Dims& bias,
                          GroupNormPlan* plan);

}  // namespace kiln::ops
