// Conv + residual Add + activation fusion into one com.microsoft FusedConv node (the contrib op
// ONNX Runtime defines: Y = activation(Conv(X, W, B) + Z), inputs X, W, B, Z, the Conv attributes
// plus `activation` and `activation_params`), which the host runs as one kernel (oneDNN post-ops)
// instead of two or three passes over the output. The same operations in the same order, but not
// exact: the host's oneDNN computes a SiLU's sigmoid its own way (a few ulp).
// Needs: a verified model whose shapes are inferred. Guarantees: a float32 Conv -> y whose only
// reader is an activation (Relu, LeakyRelu, Clip with constant bounds, HardSwish, or SiLU as
// exporters write it: Mul(y, Sigmoid(y)), then activation "Swish"; Swish and HardSwish are kiln's
// extensions of the op), or an Add(y, z)
// (or a two-input Sum)
// with z of y's shape and type (no broadcast; then optionally the activation), becomes one
// FusedConv that writes the last node's output, at the last node's place (so z may be computed
// after the Conv).
// Values read elsewhere or that are graph outputs are not fused through. Subgraphs too. The host
// executor runs the pass last by default; the C backend emits FusedConv as the Conv and one loop.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

inline constexpr char kFusedConvDomain[] = "com.microsoft";

// True iff it changed the model.
Expected<bool> FuseConvActivation(ir::Model& model);

}  // namespace kiln::passes
