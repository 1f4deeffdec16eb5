// 2-D float convolution through oneDNN (Debian's libdnnl), where the build has it: its brgemm /
// JIT direct convolutions run ResNet-style 3x3 convs at 110-130 GFLOP/s on one Zen 4 core where
// im2col + our packed GEMM reaches about 60. X, Z and Y are NCHW
// or channels-last (ops/channels_last.h), as the executor laid them out; an NCHW side is
// reordered to and from the primitive's layout through a per-thread scratch buffer. The
// primitive and, for constant weights, the reordered weights are prepared once per node and
// kept in its NodeState. A 3x3 stride-1 convolution large enough takes oneDNN's Winograd kernels
// (F(2x2, 3x3) or F(4x4, 3x3), in their blocked layout): 0.4-0.9 of the direct time where
// conv_dnnl.cc's WinogradWins says (measured), at about 1e-6 relative L2 from the direct result.
//
// Threads: kiln's pool (kernels/x86/thread_pool.h) runs the call; oneDNN never starts threads of
// its own. With T > 1 threads the output splits into T parts, one primitive each, prepared once:
// the images of a batch of at least T, else the output rows of the one image, computed
// channels-last (each part's rows are one block of memory; NCHW sides are converted by kiln
// around it), with each part's pads those of the image edges it touches; a Winograd convolution
// on a small map (under 8 output rows a thread) splits its output channels instead. One copy of
// the packed weights serves all row parts where their layouts agree. Every part sums in the order
// of its kernel, which may differ from the one-thread kernel's: results may differ in the last bits
// between thread counts, never between runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/x86/conv_params.h"
#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

// y[N, M, OH, OW] = conv(x[N, C, H, W], w[M, C / group, KH, KW]) + b[M] (b may be null), or
// false (nothing written) when oneDNN is not built in or does not take the shape. `state` (may
// be null: prepared per call) keeps the primitive between calls; `w_constant` says the weights'
// bytes at this address never change while `state` lives, so they are reordered only once.
// The state's Kernel() names oneDNN's implementation ("onednn jit_fp32_wino_2x3:avx512_core x2").
// Winograd only where its scratchpad and the growth of the weights fit `scratch_budget` bytes
// (ComputeContext::scratch_budget; 0: any).
bool DnnlConv2D(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, int threads, std::unique_ptr<NodeState>* state,
                const PostOps& post = {}, ConvLayouts layouts = {}, int64_t scratch_budget = 0);

}  // namespace kiln::ops
