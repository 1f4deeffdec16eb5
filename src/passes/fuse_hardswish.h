// HardSwish recognition: x * relu6(x + 3) / 6 as exporters write it before opset 14 (paddle2onnx,
// older torch and TF converters),
//   Add(x, 3) -> Clip(0, 6) -> then Mul by x and Div by 6 (or Mul by 1/6) in either order, or
//   Mul(x, HardSigmoid(x) {alpha = 1/6, beta = 0.5}),
// every Add and Mul in either operand order, becomes one HardSwish(x): one vector pass over the
// tensor instead of four, and an activation fuse-conv-activation can fold into the Conv before
// it. Not exact: the fused arithmetic rounds differently (an ulp).
// Needs: a verified model whose shapes are inferred. Guarantees: only float32 chains whose
// intermediate values have no other reader and are not graph outputs, with constants within
// 1e-5 of 3, 0, 6 (or 1/6, 0.5); the node takes the last node's place and name. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseHardSwish(ir::Model& model);

}  // namespace kiln::passes
