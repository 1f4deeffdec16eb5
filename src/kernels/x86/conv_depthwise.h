// Depthwise 2-D convolution (group == input channels: MobileNet, EfficientNet, DS-CNN), computed
// directly instead of im2col + an M = 1 GEMM: each input plane is copied into a zero-padded
// per-thread scratch plane, split by stride phase, so that every kernel tap is one contiguous
// vectorized multiply-add over the whole (flattened) output plane with no bounds checks.
// Every output is bias + the taps in (kh, kw) order, whatever the thread count (threads split
// the (n, m) planes).
#pragma once

#include <cstdint>

#include "kernels/x86/gemm_kernels.h"

namespace kiln::ops {

struct DepthwiseShape {
  int64_t N, C, M;  // M = C * multiplier; output channel m reads input channel m / (M / C)
  int64_t H, W, OH, OW, KH, KW;
  int64_t sh, sw, ph, pw, dh, dw;  // strides, leading pads, dilations
};

// x [N, C, H, W], w [M, 1, KH, KW], b [M] or null, y [N, M, OH, OW]. `isa` other than kAuto
// forces the vector width of the loops (tests).
template <class T>
void DepthwiseConv2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y, int threads,
                     Isa isa = Isa::kAuto);

extern template void DepthwiseConv2D<float>(const DepthwiseShape&, const float*, const float*,
                                            const float*, float*, int, Isa);
extern template void DepthwiseConv2D<double>(const DepthwiseShape&, const double*, const double*,
                                             const double*, double*, int, Isa);

}  // namespace kiln::ops
