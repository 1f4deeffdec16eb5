// MatMul + Add fusion into Gemm (not exact: Gemm may add the bias in another order).
// Needs: a verified model whose shapes are inferred. Guarantees: MatMul(A, B) -> y and
// Add(y, bias) (either operand order) -> z, where B is a [K, N] constant, bias a constant, float32
// or float64, z has A's dims with K replaced by N and nothing but the Add reads y:
//   - A [M, K], bias of shape [], [1], [N], [1, N], [M, 1] or [M, N] (what Gemm's C broadcasts
//     from): Gemm(A, B, bias) -> z with the MatMul's name;
//   - A [.., M, K] of higher rank (a transformer's activations), bias one value per column
//     (dims 1 but the last, 1 or N): Reshape(A) -> [rows, K], Gemm(., B, bias as [N] or [1]),
//     Reshape -> z (the Reshapes are views on the host, so the bias costs no pass of its own).
// The legacy Add before opset 7 (its axis broadcasting) is left alone. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseMatMulAdd(ir::Model& model);

}  // namespace kiln::passes
