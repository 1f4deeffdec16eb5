// Helpers shared by the node emitters: element loads and stores (16-bit floats are computed in
// float), math function names per type, broadcast loop nests, reading constant inputs.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/c/node_emitter.h"
#include "ops/conv_geometry.h"
#include "ops/sym_expr.h"

namespace kiln::codegen::c {

// The initializer of a Conv node's kiln_conv_shape (kernels/reference/reference_kernels.h): the
// geometry the host's reference kernels run with.
Expected<std::string> ConvShapeInit(NodeContext& ctx, const ops::ConvShape& s, bool transpose);

// The fixed-point requantization (kernels/reference/requant.c) of x_scale * w_scale[c] / y_scale
// for `channels` channels (inputs xs and ys scalars, ws 1 or `channels` values; all constant), as
// the C declarations of `static const int32_t mult[channels]` and `static const int8_t
// shift[channels]`.
// *right_shifts, where given, says whether every shift is <= -2 (requant.c's kiln_requant_right).
// FixedPointValues gives the two lists of values alone ("1073741824, ...").
Expected<std::pair<std::string, std::string>> FixedPointValues(NodeContext& ctx, int xs, int ws,
                                                               int ys, int64_t channels,
                                                               bool* right_shifts = nullptr);
Expected<std::pair<std::string, std::string>> FixedPointTables(NodeContext& ctx, int xs, int ws,
                                                               int ys, int64_t channels,
                                                               bool* right_shifts = nullptr);

// The type element values are computed in: float for float16/bfloat16, else the type itself.
DType ComputeType(DType t);
// The C math function `fn` ("exp") for a compute type: "expf" for float, "exp" for double.
std::string MathName(DType t, const std::string& fn);
// An element read (`expr` of the storage type) as the compute type, and back.
std::string Load(NodeContext& ctx, DType t, const std::string& expr);
std::string Store(NodeContext& ctx, DType t, const std::string& expr);
// Store of an `expr` whose C type is that of `from`: no cast where float or double arithmetic
// already has the storage type.
std::string Store(NodeContext& ctx, DType t, const std::string& expr, DType from);

// Emits `out0[o] = f(args)` for every element of `out_dims`, where args[k] reads input
// inputs[k] (of dims in_dims[k], broadcast numpy-style) at the matching element. Adjacent axes
// that every operand walks the same way are merged, so the nest is as shallow as it can be.
void EmitBroadcast(NodeContext& ctx, const std::vector<int>& inputs,
                   const std::vector<Dims>& in_dims, const Dims& out_dims,
                   const std::function<std::string(const std::vector<std::string>&)>& f,
                   const std::string& out = "out0");

// "i0 * s0 + i1 * s1 ..." (zero strides left out, "0" when nothing is left), plus `base`.
std::string IndexExpr(const std::vector<std::string>& idx, const std::vector<int64_t>& strides,
                      int64_t base = 0);

// Element i of a constant tensor of any numeric dtype.
double ElementAsDouble(const Tensor& t, int64_t i);
// A constant integer input as int64 values; an error when it is not a compile-time constant.
Expected<std::vector<int64_t>> ConstantInts(NodeContext& ctx, int input);
// A C expression for the byte size of n elements of t ("1024").
std::string ByteCount(DType t, int64_t n);

// A formula (ops/unary_ops.h run over SymExpr) as a C expression in compute type t.
std::string FormulaC(const ops::SymExpr& e, DType t);
// The C expression of the node's unary element-wise op (Relu, Sigmoid, Gelu, Erf, ...) applied to
// x of compute type t, as the host computes it; an error for other ops. The CUDA backend uses
// the same spellings (emit_elementwise.cc).
Expected<std::string> UnaryExpr(NodeContext& ctx, DType t, const std::string& x);

}  // namespace kiln::codegen::c
