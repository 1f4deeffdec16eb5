// Integer convolutions (and, below, matmuls of a few rows) with int8 weights of zero point 0 (what
// `kiln quantize` writes and fuse-qdq runs as com.kiln QLinearConv), in the model's channels-first
// layout: no layout changes and no per-call primitive set-up, which cost a small quantized network
// more than its arithmetic. The sums are exact int32:
//  - depthwise (one input and one output channel per group): sixteen channels at a time, one a
//    lane, on a padded plane of x - x_zp; each tap a multiply-add of lanes;
//  - the rest: the windows of a group packed four values per 32-bit lane (x's stored bytes as
//    unsigned, int8 shifted by 128, the padding x's zero point) times the weights on AVX-512 VNNI
//    (vpdpbusd), x's zero point folded into the bias; where the CPU has AVX2 but no VNNI, x less
//    its zero point as pairs of int16 (vpmaddwd).
// Either may requantize as it goes (QConvOutput). Loops compiled for the best ISA
// (kernels/x86/cpu_isa.h); not under the reference kernel set.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/x86/cpu_isa.h"
#include "ops/common.h"
#include "ops/quantize_gemm.h"

namespace kiln::ops {

// Where QConvDirect puts its results [n, m, pixels]: the int32 sums, or (y set) their
// fixed-point requantization into 8-bit y (kernels/reference/requant.c's kiln_requant_right with
// output channel m's mult[m] and shift[m], every shift <= -2; zero point zp, range [lo, hi]).
struct QConvOutput {
  int32_t* sums = nullptr;
  uint8_t* y = nullptr;  // int8's two's complement bytes, or uint8
  const int32_t *mult = nullptr, *shift = nullptr;
  int32_t zp = 0, lo = 0, hi = 0;
};

// The sums bias[m] + the sum over m's window of w * (x - x_zp) into `out`; x int8 or uint8, w
// int8 of the geometry's [M, C / group, kh, kw] (1-D or 2-D), bias int32 or null. `w_constant`:
// w's bytes do not change between calls, so that `state` keeps them rearranged. False (nothing
// written) where the convolution is not of that form, a requantization shift is over -2, or the
// CPU has no fast path for it. `isa`: kAvx2 takes the AVX2 paths on a CPU with VNNI too (tests);
// kAuto the best.
bool QConvDirect(const ConvGeom& g, const Tensor& x, int32_t x_zp, const Tensor& w, bool w_constant,
                 const Tensor* bias, int threads, std::unique_ptr<NodeState>* state,
                 const QConvOutput& out, Isa isa = Isa::kAuto);

// The matmuls of a few rows (up to kMatMulDirectRows), a one-row dense layer's above all:
// sums [rows, N] = (x - x_zp) [rows, K] times w [K, N], int8 weights of zero point 0 held in
// blocks of columns (`state`, as above), a row at a time against every column on AVX-512 VNNI
// or AVX2. False where the product is not of that form or the CPU has neither.
constexpr int64_t kMatMulDirectRows = 4;
bool QMatMulDirect(const Tensor& x, int32_t x_zp, const Tensor& w, bool w_constant,
                   std::unique_ptr<NodeState>* state, int32_t* sums, Isa isa = Isa::kAuto);

}  // namespace kiln::ops
