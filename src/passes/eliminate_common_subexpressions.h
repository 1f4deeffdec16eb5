// Common-subexpression elimination.
// Needs: a verified model. Guarantees: of two nodes with the same domain, op_type, attributes
// (compared exactly: floats by their bits, tensors by dtype, dims and bytes), the same inputs and
// the same outputs present, the later one is removed and its readers read the earlier one's
// results. Inputs count as the same when they are the same value, constants with equal dtype,
// dims and bytes (initializers a caller may override excepted), or captures of the same outer
// value. Nodes with subgraphs, random ops, Dropout and ops outside the ONNX domains are left
// alone, and so is a node that writes a main-graph output (output names are the interface).
// Works from the first node on, so chains of duplicates go in one run; subgraphs too.
// Results are bit-identical.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> EliminateCommonSubexpressions(ir::Model& model);

}  // namespace kiln::passes
