// 3-D float convolution (NCDHW in and out) through oneDNN's convolution, where the build has
// it: its JIT kernels compute in a blocked layout (nCdhw8c / 16c), reordered from and to NCDHW
// around each call, the weights once for constant ones. im2col and kiln's GEMM ran R3D-18's
// 3x3x3 convs at 24 GFLOP/s on a Zen 1 core, ONNX Runtime at 30.
//
// Threads: the output splits into parts, one primitive each, run on kiln's pool with oneDNN at one
// thread (as in conv_dnnl.h): the images of a batch of at least T, else the output depth slices
// of each image, each part reading its input depths in place (a strided view of NCDHW) with the
// depth pads of the edges it touches. Parts share one copy of the reordered weights where their
// layouts agree.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

struct Conv3DParams {
  int64_t N, C, M, group;
  // Per spatial dim (depth, height, width): input, kernel, stride, dilation, leading and
  // trailing pads, output.
  int64_t in[3], k[3], s[3], d[3], p[3], pe[3], out[3];
};

// y[N, M, out...] = conv(x[N, C, in...], w[M, C / group, k...]) + b[M] (b may be null), then
// post (post.z added first, then the activation; Swish over the result). False (nothing written)
// when oneDNN is not built in or does not take the shape. `state` keeps the primitives between
// calls; `w_constant` says w's bytes at this address never change while it lives. The state's
// Kernel() names oneDNN's implementation.
bool DnnlConv3D(const Conv3DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, const PostOps& post, int threads,
                std::unique_ptr<NodeState>* state);

}  // namespace kiln::ops
