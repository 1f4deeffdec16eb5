// 2-D float MaxPool / AveragePool through oneDNN on channels-last tensors (ops/channels_last.h),
// so that a pool between convolutions keeps the chain channels-last. Its input and output are
// both channels-last (linked for the executor's layout choice); the primitive is kept in the
// node's state. With T > 1 threads it splits as convolutions do (ops/conv_dnnl.h): the images,
// else the output rows, one primitive per part on kiln's pool.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/graph.h"
#include "ops/op.h"
#include "ops/pool_kernels.h"

namespace kiln::ops {

enum class DnnlPoolKind { kMax, kAvgExcludePad, kAvgIncludePad };

// y = pool(x), both [N, C, H, W] channels-last; false when oneDNN is not built in or refuses.
bool DnnlPool2DChannelsLast(const Pool2DShape& s, int64_t N, DnnlPoolKind kind, const float* x,
                       float* y, int threads, std::unique_ptr<NodeState>* state);

// CanRunChannelsLast for MaxPool / AveragePool (float32 2-D, no Indices, no
// dilation; an average counting pads only where the window grid stays inside them).
bool PoolCanRunChannelsLast(const ir::Node& node, const ir::Graph& g);

}  // namespace kiln::ops
