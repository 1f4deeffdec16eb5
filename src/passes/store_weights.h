// Float weights stored narrow: each float32 constant that a MatMul or Gemm reads as B, or a Conv
// as its filter, becomes DequantizeLinear(codes, scale) of FLOAT8E4M3FN or FLOAT4E2M1 codes with
// one scale per output channel (the largest magnitude of a channel maps to the format's largest
// value). A `.kiln` program then holds a byte per weight; the host executor's constant folding
// turns the codes back into floats once, at load. Lossy, so not one of the pipeline's passes:
// `kiln compile --target program --precision fp8|fp4` runs it.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// The float32 tensor w as `kind` codes (held one per byte) and float32 scales, one per index of
// `axis` (-1: one for the whole tensor), each mapping its slice's largest magnitude to the
// format's largest finite value: w ~ codes' values * scales.
void EncodeNarrow(const Tensor& w, int axis, DType kind, Tensor* codes, Tensor* scales);

// `kind` is kFloat8E4M3FN or kFloat4E2M1; the number of weight tensors stored goes to *stored.
Status StoreWeightsNarrow(ir::Model& model, DType kind, int* stored = nullptr);

}  // namespace kiln::passes
