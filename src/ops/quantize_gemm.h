// The integer matmul / conv ops (ops/quantize_integer.cc) on oneDNN's int8 GEMM: exact int32
// sums of 8-bit products (kernels/dnnl/gemm_dnnl.h: only on CPUs with VNNI or AMX), with the zero
// points applied after the product as row and column terms (kernels/x86/quantize_kernels.h) rather
// than subtracted from every element before it. uint8 weights become int8 less 128 (their zero
// point too), laid out once per node for constant weights.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/common.h"

namespace kiln::ops {

// A convolution's geometry as the integer conv ops read it.
struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Dims in, kernel, out, strides, dilations, pads_begin;
};

// fuse-qdq's QLinearConv in one pass: IntConvByGemm's sums requantized into out.y as QConvDirect
// (ops/qconv_direct.h) does it; false (nothing written) where that path does not take the
// convolution, for the caller to take the sums and requantize them itself.
struct QConvOutput;
bool IntConvRequantized(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t x_zp,
                        const Tensor& w, const Tensor* w_zp, const Tensor* bias, int w_input,
                        const QConvOutput& out);

// The fixed-point multipliers and shifts (kernels/reference/requant.c) of
// x_scale * w_scale[c] / y_scale for `channels` output channels (w_scale: 1 or `channels`
// values; x_scale and y_scale scalars), taken once per node and kept in its state while the
// scales' bytes stay the same.
struct FixedMultipliers {
  std::vector<int32_t> mult, shift;
};
FixedMultipliers NodeMultipliers(ComputeContext& ctx, const Tensor& xs, const Tensor& ws,
                                 const Tensor& ys, int64_t channels);

// A 1-D or 2-D ConvGeom's plane (a 1-D one as one row).
struct ConvPlane {
  int64_t h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow;
};
ConvPlane PlaneOf(const ConvGeom& g);

// out [rows, n] = (A - a_zp) (B - b_zp) in int32: A [rows, k] 8-bit row-major (a_zp: 1 value or
// one per row of a [m, k] matrix repeated over rows), B [k, n] 8-bit input `b_input` (b_zp: 1 or
// n values). False (nothing written) where this path does not apply.
bool IntMatMulByGemm(ComputeContext& ctx, const Tensor& a, const Tensor* a_zp, int64_t m,
                     const Tensor& b, const Tensor* b_zp, int b_input, int32_t* out);

// out [N, M, spatial] = the convolution of (x - x_zp) with (w - w_zp) plus bias (int32, M
// values, or null), w the 8-bit input `w_input` (w_zp: 1 or M values). 1-D and 2-D; false
// (nothing written) where this path does not apply.
bool IntConvByGemm(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t x_zp,
                   const Tensor& w, const Tensor* w_zp, const Tensor* bias, int w_input,
                   int32_t* out);

}  // namespace kiln::ops
