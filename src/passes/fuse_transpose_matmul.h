// Transpose-into-MatMul fusion: attention's Q K^T as exporters write it reads K where it is.
// Needs: a verified model whose shapes are inferred (opset 12 or later, for Einsum). Guarantees:
// MatMul(A', B') -> y where A' or B' (or both) is Transpose(X) with a perm that swaps the last
// two axes and keeps the others, float32 or float64, read by nothing else and not a graph output,
// becomes Einsum(A, B) -> y with equation "...mk,...nk->...mn" (and its transposed-A forms),
// whose kernel runs the product as strided GEMMs on the untransposed operand: no copy of K
// (a 16 MB copy per step of a decoder's attention). Not exact: the same products, which the
// Einsum kernel may sum in another order than the MatMul's.
// The Transpose nodes go. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseTransposeMatMul(ir::Model& model);

}  // namespace kiln::passes
