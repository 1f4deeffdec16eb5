// kiln's channel-blocked activation layout: between convolutions the host executor may keep a
// float32 [N, C, H, W] tensor as [N, C / 16, H, W, 16] (oneDNN's nChw16c), the layout its
// convolutions compute in, so that a chain of convs pays no NCHW round trip per node. Only
// values with C % 16 == 0 (then both layouts take the same bytes: the memory plan holds), made
// and read only by nodes that say they can, and never graph outputs or values a subgraph reads:
// every other kernel sees ONNX layouts. The executor decides (runtime/executor.cc); a kernel
// asks ComputeContext::input_blocked / output_blocked.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kiln::ops {

inline constexpr int64_t kChannelBlock = 16;

// `input` of CanRunBlocked that asks about writing output 0.
inline constexpr int kBlockedOutput = -1;

// True when `node` (inferred shapes) can read its input `input` (or write its output 0, input
// kBlockedOutput) in the blocked layout: a float32 2-D Conv or FusedConv (input 0 = X or 3 = Z)
// that oneDNN runs, where the tensor's channels are multiples of kChannelBlock (a first layer's
// 3-channel input stays NCHW while its output is blocked); a channel Concat of such tensors with
// N = 1 (then each input's blocks are a contiguous run of the output's, at the same byte offset
// as in NCHW, so the Concat kernel and Concat-in-place work on either layout unchanged); a 2-D
// MaxPool / AveragePool oneDNN runs (ops/pool_dnnl.h); a channel-scale Mul and the input of a
// GlobalAveragePool (BlockedChannelScale / BlockedGlobalAverage).
bool CanRunBlocked(const ir::Node& node, const ir::Graph& g, int input);

// True when `node`'s input `input` must be blocked exactly when its output 0 is (Concat copies
// bytes without knowing the layout; a pool and a channel scale compute in one layout).
bool BlockedLinked(const ir::Node& node, const ir::Graph& g, int input);

// The blocked kernels of the element-wise nodes CanRunBlocked takes, x and y [N, C, H, W]
// blocked (HW = H * W): y = x * s with s [1, C, 1, 1] (a squeeze-and-excitation scale: Mul), and
// y [N, C] = the mean of each channel (GlobalAveragePool, whose output is not blocked).
void BlockedChannelScale(const float* x, const float* s, float* y, int64_t N, int64_t C,
                         int64_t HW);
void BlockedGlobalAverage(const float* x, float* y, int64_t N, int64_t C, int64_t HW);

}  // namespace kiln::ops
