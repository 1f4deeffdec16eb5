#include "ops/blocked_layout.h"

#include "ops/conv_dnnl.h"
#include "ops/cpu_isa.h"
#include "ops/pool_dnnl.h"

namespace kiln::ops {
namespace {

bool BlockableNchw(const ir::TypeInfo& t) {
  return t.dtype == DType::kFloat32 && t.shape_known() && t.dims.size() == 4 && t.dims[0] == 1 &&
         t.dims[1] % kChannelBlock == 0;
}

bool ConcatCanRunBlocked(const ir::Node& node, const ir::Graph& g) {
  if (node.outputs.size() != 1 || node.outputs[0] < 0 || node.inputs.empty()) return false;
  const int64_t axis = node.attr_int("axis", 0);
  if (axis != 1 && axis != -3) return false;
  for (int v : node.inputs)
    if (v < 0 || !BlockableNchw(g.values[v].type)) return false;
  return BlockableNchw(g.values[node.outputs[0]].type);
}

}  // namespace

bool CanRunBlocked(const ir::Node& node, const ir::Graph& g, int input) {
  // Nothing would make or read blocked tensors without oneDNN, and its nChw16c kernels are the
  // AVX-512 ones (on AVX2 they would be its reference loops).
  if (!DnnlAvailable() || BestIsa() != Isa::kAvx512) return false;
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  if (onnx && node.op_type == "Concat") return ConcatCanRunBlocked(node, g);
  if (onnx && (node.op_type == "MaxPool" || node.op_type == "AveragePool"))
    return (input == 0 || input == kBlockedOutput) && PoolCanRunBlocked(node, g);
  return ConvCanRunBlocked(node, g, input);
}

bool BlockedPassThrough(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") &&
         (node.op_type == "Concat" || node.op_type == "MaxPool" || node.op_type == "AveragePool");
}

}  // namespace kiln::ops
