// LayerNorm recognition: exporters before opset 17 (and TensorFlow's converters) write
// LayerNormalization over the last axis as
//   m = ReduceMean(x) -> d = Sub(x, m) -> Pow(d, 2) or Mul(d, d) -> ReduceMean -> Add(eps) ->
//   Sqrt -> Div(d, .) [-> Mul by gamma] [-> Add beta],
// nine element-wise passes over x. It becomes one LayerNormalization(x, gamma (or ones), beta)
// {axis = -1, epsilon}. Not exact: the statistics are summed in another order.
// RMSNorm likewise (LLaMA's and torch's exports before opset 23):
//   Pow(x, 2) or Mul(x, x) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, .) or Reciprocal ->
//   Mul(x, .) [-> Mul by gamma]
// becomes RMSNormalization(x, gamma (or ones)) {axis = -1, epsilon}, with the same guarantees.
// Needs: a verified model whose shapes are inferred. Guarantees: only float32 x with known dims,
// both ReduceMeans over the last axis alone keeping it (attribute axes, or a constant axes input
// from opset 18), every intermediate value read only by the next node of the chain (d by the
// square and the Div) and no graph output, eps a scalar constant, gamma and beta constant float32
// vectors of the last dim's size; the node takes the chain's last node's place and name.
// Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseLayerNorm(ir::Model& model);

}  // namespace kiln::passes
