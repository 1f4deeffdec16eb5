// Transpose cancellation.
// Needs: a verified model whose shapes are inferred. Guarantees: Transpose(Transpose(x, p1), p2)
// where nothing else reads the inner result becomes one Transpose(x, p) with p[j] = p1[p2[j]]
// (the outer node keeps its name and output), and disappears when p is the identity: its readers
// read x (a main-graph output is kept as it is, or written by x's producer when x is a plain
// node result). Chains of any length collapse in one run; subgraphs too. A default perm (reversal)
// needs the input's rank. Then a Transpose that moves only axes of size 1 (the bytes stay in
// order) becomes a Reshape to its known output dims, which the host runs as a view (from opset
// 5). Results are bit-identical.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> CancelTransposes(ir::Model& model);

}  // namespace kiln::passes
