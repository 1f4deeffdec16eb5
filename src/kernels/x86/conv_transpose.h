// ConvTranspose kernels: the depthwise transposed convolution, and the stride-2 scatter-add of
// the GEMM + col2im path.
#pragma once

#include <cstdint>

#include "kernels/x86/conv_depthwise.h"

namespace kiln::ops {

// The transposed convolution (ConvTranspose with group == C): x [N, C, H, W] is the input grid,
// y [N, M, OH, OW] the output image, w [C, M / C, KH, KW] (output channel m reads input channel
// m / (M / C)); pads are the image's leading ones. y = bias + every tap that reaches it.
template <class T>
void DepthwiseConvTranspose2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
                              int threads, Isa isa = Isa::kAuto);

// dst[2 j] += src[j] for j < n (dst[2 j + 1] untouched): col2im's rows at column stride 2,
// `rows` of them, row i from src + i * src_ld into dst + i * dst_ld (one call per kernel tap,
// not per row: the rows of small grids are a few elements long).
template <class T>
void AddToEveryOther(T* dst, const T* src, int64_t n, int64_t rows = 1, int64_t dst_ld = 0,
                     int64_t src_ld = 0);

extern template void DepthwiseConvTranspose2D<float>(const DepthwiseShape&, const float*,
                                                     const float*, const float*, float*, int, Isa);
extern template void DepthwiseConvTranspose2D<double>(const DepthwiseShape&, const double*,
                                                      const double*, const double*, double*, int,
                                                      Isa);

extern template void AddToEveryOther<float>(float*, const float*, int64_t, int64_t, int64_t,
                                            int64_t);
extern template void AddToEveryOther<double>(double*, const double*, int64_t, int64_t, int64_t,
                                             int64_t);

}  // namespace kiln::ops
