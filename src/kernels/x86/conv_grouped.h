// Grouped pointwise convolutions (ShuffleNet's 1x1 convs over groups of 6-136 channels) with a
// channels-last side, on CPUs without AVX-512 (where oneDNN 2.6 runs them at 15-21 GFLOP/s on
// one Zen 3 core inside ShuffleNet). With X and Y channels-last
// (and Z, if any, too) on AVX2, a direct kernel: 6 pixels x 16 output channels of a group in
// registers, the weights packed once into 8-channel panels, the input read where it lies, and
// bias, residual and activation applied before the one store. Any other layout mix: one packed
// GEMM per group (kernels/x86/gemm_kernels.h) over the strided channel slices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/x86/conv_params.h"
#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

// Whether GroupedPointwise takes p with these layouts: a grouped (not depthwise) 1x1, stride-1,
// unpadded convolution, without AVX-512, Y channels-last or dense.
bool GroupedPointwiseFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post);

// The weights of one node in the direct kernel's panels, made on first use and kept.
struct GroupedPointwiseState : NodeState {
  const float* w = nullptr;   // the weights the panels were made from (constant ones: not remade)
  std::vector<float> panels;  // [group][ceil(M / group / 8)][C / group][8], zero padded
  bool direct = false;
  std::string Kernel() const override {
    return direct ? "kiln grouped 1x1 avx2" : "kiln packed gemm per group";
  }
  bool HoldsConstant(int i) const override { return i == 1 && direct && w != nullptr; }
};

// y = act(conv(x, w) + b + z) for p as GroupedPointwiseFits says (b and post.z may be null; z
// may be y's own bytes). `state` (may be null) keeps the packed weights between calls
// (`w_constant`: w never changes while it lives).
void GroupedPointwise(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                      const float* b, float* y, const ConvLayouts& l, const PostOps& post,
                      int threads, std::unique_ptr<NodeState>* state);

}  // namespace kiln::ops
