// BatchNormalization folding into the preceding Conv (not exact: the weights are rounded again).
// Needs: a verified model whose shapes are inferred. Guarantees: Conv(X, W[, B]) -> y followed by
// an inference BatchNormalization(y, scale, bias, mean, var) -> z (one output, training_mode off,
// spatial), where W, B and the four parameters are float32 constants (per output channel), and
// nothing but the BN reads y, becomes one Conv(X, W', B') -> z that keeps the Conv's name:
//   s = scale / sqrt(var + epsilon),  W'[m] = W[m] * s[m],  B' = (B - mean) * s + bias
// computed in double. W' and B' are new constants (named after W and B, or the Conv's output,
// with "_bn"); the old tensors are never written, since their bytes may be shared. Other dtypes,
// ConvTranspose and a Conv output read elsewhere are left alone. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FoldBatchNorm(ir::Model& model);

}  // namespace kiln::passes
