// Identity elimination.
// Needs: a verified model whose shapes are inferred. Guarantees: every node that returns its first
// input unchanged is removed and its readers read that input instead: Identity; Dropout in
// inference (before opset 12, or with no training_mode input, or a constant false one; its mask
// unread); Cast / CastLike to the input's own dtype; Reshape, Flatten, Squeeze, Unsqueeze and
// Expand whose output dims equal the input dims (both fully known); Transpose with the identity
// perm; Pad whose pads are all zero (attribute, or a constant input); Slice whose output dims
// equal the input dims with every step positive. When the node's output is a main-graph output
// (its name is the model's interface), the input's producer writes that output itself where the
// input is a node result that is not an output too; otherwise the node stays. Subgraphs are
// handled the same way (their outputs are positional, so they may take the input directly).
// Results are bit-identical.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> EliminateIdentities(ir::Model& model);

}  // namespace kiln::passes
