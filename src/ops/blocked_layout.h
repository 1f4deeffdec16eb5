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

// True when `node` (inferred shapes) can read its input `input` and write its output 0 in the
// blocked layout: a float32 2-D Conv or FusedConv (input 0 = X or 3 = Z) that oneDNN runs, with
// input and output channels multiples of kChannelBlock.
bool CanRunBlocked(const ir::Node& node, const ir::Graph& g, int input);

}  // namespace kiln::ops
