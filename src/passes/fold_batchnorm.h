// Folds per-channel affine nodes into the preceding Conv or ConvTranspose (not exact: the weights
// are rounded again). Needs: a verified model whose shapes are inferred. Guarantees:
// Conv(X, W[, B]) -> y (or ConvTranspose, whose W keeps the output channels on its second axis)
// followed by one node that maps y per output channel, z = y * s + t:
//   - an inference BatchNormalization(y, scale, bias, mean, var) (one output, training_mode off,
//     spatial): s = scale / sqrt(var + epsilon), t = bias - mean * s;
//   - Mul(y, c) / Add(y, c) (either operand order) / Sub(y, c), c a float32 constant that is a
//     scalar or has dims 1 except the channel axis (older exports write BatchNorm's scale and
//     shift this way, after it),
// where W, B and the parameters are float32 constants, nothing but that node reads y, and z has
// y's shape, becomes one Conv(X, W', B') -> z that keeps the Conv's name:
//   W'[m] = W[m] * s[m],  B' = B * s + t   computed in double.
// The same maps after an inference BatchNormalization, an InstanceNormalization or a
// GroupNormalization with constant scale and bias, one per channel, fold into it (scale' =
// scale * s, bias' = bias * s + t; DenseNet's pre-activation BatchNorm -> Mul -> Add after a
// Concat becomes one node, as does GroupNorm's gamma and beta after fuse-groupnorm). Chains fold
// one after another in one sweep. W' and B' are new constants (named after W and B, or the Conv's
// output, with "_bn" or "_affine"); the old tensors are never written, since their bytes may be
// shared. Other dtypes and a Conv output read elsewhere are left alone. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FoldBatchNorm(ir::Model& model);

}  // namespace kiln::passes
