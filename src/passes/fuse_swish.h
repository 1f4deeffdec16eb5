// Swish (SiLU) recognition: x * Sigmoid(x) as exporters write it (torch's nn.SiLU before opset
// 24), Sigmoid(x) -> s and Mul(x, s) in either operand order, becomes one Swish(x): one vector
// pass over the tensor instead of two and a tensor less, wherever it stands (after a
// normalization, an Add; fuse-conv-activation folds one right after a Conv either way). Not
// exact: the fused arithmetic rounds differently (an ulp).
// Needs: a verified model whose shapes are inferred. Guarantees: only float32 values whose only
// readers are the Sigmoid and the Mul, the sigmoid read by the Mul alone and not a graph output;
// the node takes the Mul's place and name. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseSwish(ir::Model& model);

}  // namespace kiln::passes
