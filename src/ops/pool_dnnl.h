// 2-D float MaxPool / AveragePool through oneDNN on channel-blocked tensors (ops/blocked_layout.h),
// so that a pool between convolutions keeps the chain blocked. Its input and output are both
// blocked (a pass-through node for the executor's layout choice); the primitive is kept in the
// node's state.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/graph.h"
#include "ops/op.h"
#include "ops/pool_kernels.h"

namespace kiln::ops {

enum class DnnlPoolKind { kMax, kAvgExcludePad, kAvgIncludePad };

// y = pool(x), both [N, C, H, W] in nChw16c; false when oneDNN is not built in or refuses.
bool DnnlPool2DBlocked(const Pool2DShape& s, int64_t N, DnnlPoolKind kind, const float* x,
                       float* y, int threads, std::unique_ptr<NodeState>* state);

// CanRunBlocked for MaxPool / AveragePool (float32 2-D, channels divisible by 16, no Indices, no
// dilation; an average counting pads only where the window grid stays inside them).
bool PoolCanRunBlocked(const ir::Node& node, const ir::Graph& g);

}  // namespace kiln::ops
