// GELU recognition: the exact (erf) GELU as exporters write it before opset 20,
//   0.5 * x * (1 + Erf(x / sqrt(2)))   (Div by sqrt 2 or Mul by 1 / sqrt 2; the 0.5 applied to
//   x, to the sum, or to the product; every Mul and Add (or two-input Sum) in either operand
//   order),
// becomes one com.microsoft Gelu(x) (ONNX Runtime's contrib op; the host runs it as one vector
// kernel instead of five passes over the tensor); its tanh approximation,
//   0.5 * x * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))   (x^3 as Pow(x, 3) or two Muls),
// becomes the same node with approximate = "tanh" (ONNX Gelu-20's attribute, which kiln's host,
// C and CUDA Gelu read in either domain). Not exact: the fused arithmetic rounds differently (a
// few ulp).
// Needs: a verified model whose shapes are inferred. Guarantees: only float32 chains whose
// intermediate values have no other reader and are not graph outputs, with constants within
// 1e-5 of sqrt 2 (or its inverse), sqrt(2 / pi), 0.044715, 3, 1 and 0.5; the node takes the last
// Mul's place and name.
// Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

inline constexpr char kGeluDomain[] = "com.microsoft";

// True iff it changed the model.
Expected<bool> FuseGelu(ir::Model& model);

}  // namespace kiln::passes
