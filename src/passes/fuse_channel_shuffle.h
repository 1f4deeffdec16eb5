// Channel shuffle recognition: ShuffleNet's shuffle as exporters write it,
//   Reshape(x [N, C, d...]) -> [N, g, C/g, d...],  Transpose perm [0, 2, 1, 3, ...],
//   Reshape -> y of x's dims,
// becomes one com.kiln ChannelShuffle(x) {group = g} -> y (ops/shape_ops.cc; exact: the same
// element moves). The host then keeps x and y channels-last (ops/channels_last.h) instead of
// converting the tensor to NCHW and back around every shuffle.
// Needs: a verified model whose shapes are inferred. Guarantees: only where the two
// intermediate values have no other reader and are not graph outputs; the node takes the last
// Reshape's place and name. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseChannelShuffle(ir::Model& model);

}  // namespace kiln::passes
