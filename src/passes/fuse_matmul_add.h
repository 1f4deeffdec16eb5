// MatMul + Add fusion into Gemm (not exact: Gemm may add the bias in another order).
// Needs: a verified model whose shapes are inferred. Guarantees: MatMul(A, B) -> y and
// Add(y, bias) (either operand order) -> z, where A is [M, K], B a [K, N] constant, bias a constant
// of shape [], [1], [N], [1, N], [M, 1] or [M, N] (what Gemm's C broadcasts from), float32 or
// float64, z is [M, N] and nothing but the Add reads y, becomes Gemm(A, B, bias) -> z with the
// MatMul's name. A of rank other than 2 is left alone (a Reshape around the Gemm would not save
// anything on the host), and so is the legacy Add before opset 7 (its axis broadcasting).
// Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseMatMulAdd(ir::Model& model);

}  // namespace kiln::passes
