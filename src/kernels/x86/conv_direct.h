// Dense and grouped 2-D convolutions computed directly on channels-last memory (an implicit GEMM:
// output pixels x output channels, summed over kernel taps x input channels) for AVX2 CPUs
// without AVX-512, where oneDNN 2.6's `jit:avx2` runs ResNet's 3x3 convs on 7 x 7 maps and the
// strided ones at 50-55 GFLOP/s on one Zen 3 core and ONNX Runtime's NCHWc kernels at 72-81.
// A register tile of 4 pixels x 24 channels (or 6 x 16, 8 x 8; a tile's panels are of one group
// and read only its run of input channels)
// accumulates fused multiply-adds over each tap's run of input channels, read where they lie in
// the input (one pointer per pixel and tap; taps in the padding read a zero row); the weights are
// packed once per node into 8-channel panels in the order the tile reads them, in chunks of
// input channels small enough for a block of panels to stay in L1 while a block of pixels passes
// over it. Bias, a residual and the activation are applied in registers before the last store.
// Inputs with few channels (a network's first layer) or in NCHW are first copied channels-last
// with their padding made explicit (ungrouped ones), so that a whole kernel row of taps is one
// contiguous run.
//
// Sums: for each output, (z + b) then every chunk's products in (tap, channel) order, with
// fused multiply-adds; threads split pixel blocks or output-channel panels, never a sum, so the
// result does not depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/x86/conv_params.h"
#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"
#include "kernels/x86/scratch.h"

namespace kiln::ops {

// Whether DirectConv takes p with these layouts: a 2-D convolution (grouped too), Y NCHW or
// channels-last (dense or a slice of a wider tensor; an NCHW Y is made channels-last a block of
// pixels at a time and transposed there), Z (if any) channels-last like Y, on a CPU with AVX2
// but not AVX-512.
bool DirectConvFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post);

// Whether it beats oneDNN for p with these layouts, measured on Zen 3 at one and two threads on
// the convolutions of the issue-7 models: kernels larger than 1x1 over
// at least 64 input channels (0.65-0.95 of `jit:avx2`'s time in the models), and 1x1 kernels over
// at most 64 channels that write a slice of a Concat (0.66-0.85 of `jit_1x1:avx2` and its copy
// into the slice). First layers' few channels (1.05-1.6) lose: the tile's fixed costs weigh on
// short sums there. Other 1x1 kernels between channels-last tensors win on maps up to 56 x 56
// against oneDNN's matmul (Zen 1: 30-35 GFLOP/s against 17-20 on MobileNetV3's expansions to 672
// and 960 channels on 14 x 14 and 7 x 7; the models 0.95-0.97 of their time), not on larger ones.
// Grouped convolutions with kernels larger than 1x1 between channels-last tensors (Zen 1, groups
// of 4 to 64 channels on 7 x 7 to 56 x 56 maps: 0.43-0.97 of `jit:avx2`'s time, RegNet's groups
// of 8 at 20-22 GFLOP/s against 14-18); from or to NCHW the copies cost more than they gain.
bool DirectConvPays(const Conv2DParams& p, const ConvLayouts& l);

// One node's packed weights, made on first use and kept.
struct DirectConvState : NodeState {
  const float* w = nullptr;  // the weights the panels were made from (constant ones: not remade)
  int64_t C = 0, M = 0, KH = 0, KW = 0, group = 0, chunks = 0;
  LargeBuffer
      panels;  // [group][ceil(M / group / 8)][chunks][KH][KW][chunk's channels][8], zero padded
  std::vector<float> zeros;  // KW x C zeros for taps in the padding and rows past the last
  std::string Kernel() const override { return "kiln direct conv avx2"; }
  bool HoldsConstant(int i) const override { return i == 1 && w != nullptr; }
};

// y = act(conv(x, w) + b + z) for p as DirectConvFits says (b and post.z may be null; z may be
// y's own bytes). `state` (may be null) keeps the packed weights between calls (`w_constant`:
// w never changes while it lives).
void DirectConv(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, const ConvLayouts& l, const PostOps& post, int threads,
                std::unique_ptr<NodeState>* state);

}  // namespace kiln::ops
