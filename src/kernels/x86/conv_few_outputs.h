// Convolutions with few output channels and large kernels or maps (a network's last layer: style
// transfer's 9x9 conv to 3 channels on the image, ESPCN's 3x3 conv to 9 sub-pixel channels) on
// AVX2, where oneDNN's `jit:avx2` and ONNX Runtime's NCHWc kernels both round the output channels
// up to a vector of 8 and ran them at 8-20 GFLOP/s on a Zen 1 core. Here the vectors run along
// output rows instead: a tile of 3 output channels x 32 pixels of a row in registers, each
// (input channel, tap) one broadcast weight per channel times four loaded runs of the input row,
// read from an NCHW copy of the input with its padding made explicit. Bias, a residual and the
// activation are applied in registers before the one store.
//
// Sums: for each output, every (input channel, tap) product in order from zero, then the bias, z
// and the activation; threads split output rows, so the result does not depend on their count.
#pragma once

#include "kernels/x86/conv_params.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

// Whether FewOutputsConv takes p with these layouts: ungrouped, stride 1 along rows, Y (and Z)
// NCHW, X either, at most 12 output channels, on a CPU with AVX2.
bool FewOutputsConvFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post);

// Whether it beats the other kernels there, measured on Zen 1 at one and two threads: kernels of
// 5x5 and larger to at most 9 output channels (9x9 32 -> 3 on 192 x 192: 21 / 16 ms against
// oneDNN's 182 / 91 by its GEMM; 7x7 16 -> 2 on 256 x 256 12 / 9 against 36 / 18; 5x5 32 -> 3 on
// 224 x 224 14 / 11 against 30 / 15). On 3x3 kernels the direct kernels and oneDNN keep up to
// 0.6x of its time.
bool FewOutputsConvPays(const Conv2DParams& p);

// y = act(conv(x, w) + b + z) for p as FewOutputsConvFits says (b and post.z may be null).
void FewOutputsConv(const Conv2DParams& p, const float* x, const float* w, const float* b, float* y,
                    const ConvLayouts& l, const PostOps& post, int threads);

}  // namespace kiln::ops
