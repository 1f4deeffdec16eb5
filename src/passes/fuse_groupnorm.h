// GroupNorm recognition: torch exports nn.GroupNorm (before opset 18's GroupNormalization) as
//   Reshape(x, [N, G, -1]) -> InstanceNormalization(scale [G], bias [G]) -> Reshape(back to x's
//   shape) [-> Mul by gamma -> Add beta, per channel],
// which runs as two copies around a normalization of G long rows. It becomes one
// GroupNormalization(x, scale', bias') {num_groups = G, epsilon}, its scale and bias one value
// per channel (channel c takes its group's); fold-batchnorm then folds the Mul and Add after it
// into them. Not exact: the statistics are summed in another order.
// Needs: a verified model whose shapes are inferred. Guarantees: only float32 x of rank 3 or more
// with known dims, G dividing x's channels, the Reshapes and the InstanceNormalization each the
// sole reader of the value before them and that value no graph output, the second Reshape giving
// back x's dims, constant float32 scale and bias of G elements; the node takes the second
// Reshape's place and name. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseGroupNorm(ir::Model& model);

}  // namespace kiln::passes
