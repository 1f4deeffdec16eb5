// A pointwise 1-D convolution pooled over all its positions, as PointNet and 1-D classifiers
// write it:
//   Conv or FusedConv (Relu, LeakyRelu or Clip; no Z) of x [N, C, P] with a constant w [M, C, 1],
//   strides 1, no padding, one group -> y [N, M, P],
//   ReduceMax / ReduceMean over axis 2 (keepdims either way), or GlobalMaxPool /
//   GlobalAveragePool,
// becomes one com.kiln ConvGlobalPool (ops/conv_global_pool.cc), which never stores y.
// Needs: a verified model whose shapes are inferred. Guarantees: only where y has no other reader
// and is not a graph output; the node takes the pool's place and name. Subgraphs too. A host
// fusion (compiler/compile.cc runs it after the others): the C and CUDA backends do not take the
// op.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FuseConvGlobalPool(ir::Model& model);

}  // namespace kiln::passes
