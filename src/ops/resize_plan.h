// The interpolation plan of a Resize / Upsample node: output dims and, per resized axis, the
// (input index, weight) taps of every output position. The host kernel applies it; the C backend
// computes it at compile time and emits it as tables, so both share one definition.
#pragma once

#include <vector>

#include "ops/op.h"

namespace kiln::ops {

// One output position's taps along an axis: out = sum_k w[k] * in[idx[k]], or the
// extrapolation value when `extrapolate` (tf_crop_and_resize outside the roi).
struct ResizeTaps {
  std::vector<int64_t> idx;
  std::vector<double> w;
  bool extrapolate = false;
};

struct ResizePlan {
  Dims out;
  // Per input axis: the taps of each output position, or empty when the axis is unchanged
  // (and when the input or the output is empty). The kernel applies the axes last first, each
  // summing `dst += w * src` from zero, in double precision.
  std::vector<std::vector<ResizeTaps>> axes;
  double extrapolation = 0;
};

// Plans ctx's Resize / Upsample node for input dims `in`, reading roi / scales / sizes from ctx's
// inputs (input 0 is not read).
Status PlanResize(const ComputeContext& ctx, const Dims& in, ResizePlan* plan);

// True when the host executor may run `node` (a Resize / Upsample, inferred shapes) with its
// input 0 and output channels-last (ops/channels_last.h): float32, N = 1, the channels kept, any
// mode but tf_crop_and_resize (a gather of whole pixels, or separable interpolation over N, H, W,
// C).
bool ResizeCanRunChannelsLast(const ir::Node& node, const ir::Graph& g);

}  // namespace kiln::ops
