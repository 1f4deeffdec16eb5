// Winograd F(2x2, 3x3) convolution of one channels-last image (ops/channels_last.h) for CPUs
// where oneDNN has no Winograd kernel (it ships them for AVX-512 only): 4 x 4 input tiles
// overlapping by 2 are transformed (B^T d B) into 16 matrices [tiles x C], each multiplied by
// the matching transformed weights [C x M] (G g G^T, made once) with the packed GEMM
// (kernels/x86/gemm_kernels.h), and each 4 x 4 result is transformed back (A^T m A) into a 2 x 2
// block of outputs, with the bias, a residual and the activation applied there. 16 products of C x
// M per 4 output pixels instead of 36: 2.25 times fewer multiply-adds. Tiles go in blocks small
// enough for the transformed block to stay in the core's L2 cache. Sums round differently from
// a direct convolution: about 1e-6 relative L2 from it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/x86/conv_params.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

// Whether WinogradChannelsLast takes p with these layouts: a 3x3, stride-1, undilated, ungrouped
// convolution of one image, X, Y (and Z) channels-last.
bool WinogradFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post);

// Whether it beats oneDNN here, measured at one thread on Zen 3: with
// AVX2 but not AVX-512 (where oneDNN's own Winograd runs), on at least 32 input and output
// channels and 12 x 12 outputs: 0.6-0.8 of oneDNN's direct time on 64-256 channels over 14 x 14
// to 112 x 112 maps; slower on 7 x 7 (1.2-1.3: the tiles pad 7 to 8 and the GEMMs are 16 rows)
// and on 16 input channels (1.1-1.3). With T > 1 threads only where there are 2T blocks of
// tiles or more: each thread takes whole blocks (at 2 threads resnet18's 3x3 convs 0.6-0.8 of
// the direct kernel's time, kernels/x86/conv_direct.h); split inside each block, the 16 small GEMMs
// lost (resnet18 at 2 threads: 1.73x ORT's time).
bool WinogradPays(const Conv2DParams& p, int threads);

// The transformed weights of one node, made from w [M, C, 3, 3] on first use and kept.
struct WinogradState : NodeState {
  const float* w = nullptr;  // the weights u was made from (constant ones are not remade)
  int64_t C = 0, M = 0;
  std::vector<PackedB<float>> u;  // the 16 transformed [C x M], packed for the GEMM
  std::string Kernel() const override { return "kiln winograd F(2x2,3x3)"; }
  bool HoldsConstant(int i) const override { return i == 1 && w != nullptr; }
};

// y (pixels y_channels or M floats apart) = act(conv(x, w) + b + z) for p as WinogradFits says.
// `state` keeps the transformed weights between calls (`w_constant`: w never changes).
void WinogradChannelsLast(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                          const float* b, float* y, const ConvLayouts& l, const PostOps& post,
                          int threads, std::unique_ptr<NodeState>* state);

}  // namespace kiln::ops
