// A 2-D integer convolution on oneDNN's int8 convolution kernels: no im2col columns and no
// zero-point terms after the product (the kernel takes x's zero point itself), where the GEMM
// path (ops/quantize_gemm.cc) spends half its time. Exact int32 sums, so only where the CPU sums
// 8-bit products exactly (VNNI, AMX); int8 weights with no zero point.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/x86/node_state.h"

namespace kiln::ops {

// A convolution of n images; 1-D as height 1. All int64_t, so that shapes compare as bytes.
struct Int8ConvShape {
  int64_t n = 1;  // grouped convolutions (split over threads by rows) take one image
  int64_t c = 0, m = 0, group = 1;
  int64_t h = 0, w = 0, kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t oh = 0, ow = 0;
  int64_t x_signed = 0, has_bias = 0;
  int64_t w_unsigned = 0;     // w is uint8: the kernel reads w - 128 (the zero points less 128)
  int64_t w_zero_points = 0;  // w_zp is given: less the sums of each window times them
};

// out [N, M, OH * OW] (channels first) = the convolution of (x - x_zp) with
// (w - w_zp), plus bias (M values, if has_bias): x channels-last ([N, H, W, C], uint8 or
// int8 as x_signed), w 8-bit [M, C / group, KH, KW] as ONNX holds it, w_zp M values less the
// 128 of uint8 weights (if w_zero_points). The zero points of w cost a second convolution, of
// one output channel per group. With T > 1 threads, parts of the output channels run on kiln's
// pool, one primitive each. `w_constant`: w's bytes at this address never change while `state`
// lives (they are reordered once, and not read again). False (nothing written) when oneDNN is
// not built in or has no exact kernel for it.
bool DnnlConvInt8(const Int8ConvShape& s, const void* x, int32_t x_zp, const void* w,
                  bool w_constant, const int32_t* w_zp, const int32_t* bias, int32_t* out,
                  int threads, std::unique_ptr<NodeState>* state);

// How oneDNN's int8 kernels sum 8-bit products here: kVnni with VNNI's exact dot products, kAmx
// on AMX tiles; kInexact without either (they pair products in saturating int16), and where
// oneDNN is not to be used (DnnlAvailable).
enum class DnnlInt8 { kInexact, kVnni, kAmx };
DnnlInt8 DnnlInt8Kernels();

}  // namespace kiln::ops
