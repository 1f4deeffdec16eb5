// QDQ fusion: a quantized model in the QDQ format (QuantizeLinear / DequantizeLinear pairs around
// float ops, as ONNX Runtime's quantizer and `kiln quantize` write it) runs its Conv, MatMul and
// GlobalAveragePool and Add on int8 arithmetic rather than dequantizing everything to float32.
// Needs: a verified model whose shapes are inferred, its weight DequantizeLinear nodes not yet
// folded into float constants. Guarantees:
//   Q(Conv(DQ(xq), DQ(wq), bias)) -> com.kiln QLinearConv(xq, wq, bias as int32)
//   Q(MatMul(DQ(xq), DQ(wq)))     -> com.kiln QLinearMatMul(xq, wq)
//   Q(Gemm(DQ(xq), DQ(wq), bias)) -> com.kiln QLinearMatMul(xq, wq or its transpose, bias as
//                                    int32: input 8) (alpha = beta = 1, transA = 0, xq 2-D)
//   Q(Add(MatMul(DQ(xq), DQ(wq)), bias))
//                                 -> com.kiln QLinearMatMul(xq, wq, bias as int32) (a dense
//                                    layer: bias [N], the MatMul's result read only by the Add)
//   Q(GlobalAveragePool(DQ(xq)))  -> com.kiln QLinearGlobalAveragePool(xq) (com.microsoft's
//                                    inputs, channels first; a plane of at most 2^23 values)
//   Q(Add(DQ(aq), DQ(bq)))        -> com.kiln QLinearAdd(aq, bq) (com.microsoft's inputs; aq and
//                                    bq of one shape; TFLite's integer Add,
//                                    kernels/reference/qadd.c)
// (ONNX's QLinearConv / QLinearMatMul inputs and attributes, requantized in fixed point as TFLite
// and CMSIS-NN do, kernels/reference/requant.c, on the host and in generated C alike)
// where xq and wq are int8 or uint8, x's scale and zero point are constant scalars, wq is a
// constant with constant scales per tensor or per output channel (Conv: axis 0 of [M, C, k..];
// MatMul: axis 1 of a 2-D [K, N]), the Q has constant scalar scale and zero point, and the float
// result is read only by the Q, or by a Relu or a Clip with constant bounds read only by the Q
// whose saturation does its work (Q(Clip(v)) == Q(v) for every v: a Relu needs the Q's zero point
// at its type's lowest value). A Conv, Gemm or dense bias is the int32 of a DQ whose scale is
// x_scale * w_scale, or a float constant quantized to that scale. Not exact: the float graph
// rounds the float sum where the integer ops round once, in fixed point, half away from zero
// (one step at most). DQ nodes left unread go. Subgraphs too.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseQdq(ir::Model& model);

}  // namespace kiln::passes
