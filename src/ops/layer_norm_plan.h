// LayerNormalization and RMSNormalization, read and checked once from the node and its input
// dims: statistics over the dims from `axis` on (rows of `cols` elements), then scale (and, for
// LayerNormalization, bias), each broadcast to those dims ("per column") or else to the whole
// input. Shape inference and the host kernel (ops/normalization.cc), the C emitters
// (codegen/c/emit_normalization.cc, emit_sequence_models.cc) and the CUDA emitter read it.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ops {

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

}  // namespace kiln::ops
