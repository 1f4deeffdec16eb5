// The registry of passes, in the order the action space lists them.
#include "passes/cancel_transposes.h"
#include "passes/eliminate_common_subexpressions.h"
#include "passes/eliminate_dead_nodes.h"
#include "passes/eliminate_identities.h"
#include "passes/fold_batchnorm.h"
#include "passes/fold_constants.h"
#include "passes/fuse_channel_shuffle.h"
#include "passes/fuse_conv_activation.h"
#include "passes/fuse_gelu.h"
#include "passes/fuse_groupnorm.h"
#include "passes/fuse_hardswish.h"
#include "passes/fuse_layernorm.h"
#include "passes/fuse_matmul_add.h"
#include "passes/fuse_qdq.h"
#include "passes/fuse_swish.h"
#include "passes/fuse_transpose_matmul.h"
#include "passes/pipeline.h"

namespace kiln::passes {

const std::vector<PassInfo>& RegisteredPasses() {
  static const std::vector<PassInfo> kPasses = {
      {"eliminate-dead-nodes", "remove nodes whose results nobody reads (random draws included)",
       EliminateDeadNodes},
      {"fold-constants", "evaluate nodes whose inputs are all constants; drop dead nodes",
       [](ir::Model& m) -> Expected<bool> {
         bool changed = false;
         KILN_RETURN_IF_ERROR(FoldConstants(m, 64 * 1024, &changed));
         return changed;
       }},
      {"eliminate-identities",
       "remove Identity, inference Dropout, same-type Cast, no-op reshapes, transposes, pads, "
       "slices",
       EliminateIdentities},
      {"eliminate-common-subexpressions",
       "merge nodes with the same op, attributes and inputs (equal constants count as the same)",
       EliminateCommonSubexpressions},
      {"cancel-transposes",
       "compose Transpose(Transpose(x)) into one, or none when it is the identity; a Transpose "
       "moving only axes of size 1 becomes a Reshape",
       CancelTransposes},
      {"fold-batchnorm",
       "fold an inference BatchNormalization, or a per-channel constant Mul/Add/Sub, into the "
       "Conv, "
       "ConvTranspose or normalization before it (float32)",
       FoldBatchNorm, /*exact=*/false},
      {"fuse-groupnorm",
       "turn GroupNorm's export (Reshape, InstanceNormalization, Reshape) into one "
       "GroupNormalization",
       FuseGroupNorm, /*exact=*/false},
      {"fuse-conv-activation",
       "fuse Conv + residual Add + Relu / LeakyRelu / Clip / SiLU into one FusedConv",
       FuseConvActivation, /*exact=*/false},
      {"fuse-channel-shuffle",
       "turn the Reshape -> Transpose -> Reshape of a channel shuffle into one com.kiln "
       "ChannelShuffle",
       FuseChannelShuffle},
      {"fuse-gelu",
       "turn the erf GELU exporters write (Div, Erf, Add, Mul, Mul) into one com.microsoft Gelu",
       FuseGelu, /*exact=*/false},
      {"fuse-hardswish",
       "turn x * Clip(x + 3, 0, 6) / 6 (or x * HardSigmoid(x) with alpha 1/6) into one HardSwish",
       FuseHardSwish, /*exact=*/false},
      {"fuse-swish", "turn x * Sigmoid(x) (SiLU as exporters write it) into one Swish", FuseSwish,
       /*exact=*/false},
      {"fuse-matmul-add",
       "turn MatMul(A, B) + bias with constant B and bias into Gemm (higher-rank A through "
       "Reshapes)",
       FuseMatMulAdd, /*exact=*/false},
      {"fuse-transpose-matmul",
       "turn MatMul of a Transpose that swaps the last two axes (attention's K^T) into an Einsum "
       "that reads the operand in place",
       FuseTransposeMatMul, /*exact=*/false},
      {"fuse-qdq",
       "turn QuantizeLinear(Conv / MatMul of DequantizeLinear inputs) with constant int8 weights "
       "into QLinearConv / QLinearMatMul, and of GlobalAveragePool and Add into integer ops",
       FuseQdq, /*exact=*/false},
      {"fuse-layernorm",
       "turn LayerNorm's decomposed export (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, "
       "Mul, Add over the last axis) into one LayerNormalization",
       FuseLayerNorm, /*exact=*/false},
  };
  return kPasses;
}

const PassInfo* FindPass(const std::string& name) {
  for (const auto& p : RegisteredPasses())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace kiln::passes
