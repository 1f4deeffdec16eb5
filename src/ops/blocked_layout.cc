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

bool IsOnnx(const ir::Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

// Mul(x, s) (either order) with x [N, C, H, W] of the output's dims and s [1 or N, C, 1, 1]: the
// per-channel scale of a squeeze-and-excitation block. Returns x's input index, or -1.
int ChannelScaleInput(const ir::Node& node, const ir::Graph& g) {
  if (!IsOnnx(node) || node.op_type != "Mul" || node.inputs.size() != 2 ||
      node.outputs.size() != 1 || node.outputs[0] < 0 || node.inputs[0] < 0 || node.inputs[1] < 0)
    return -1;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (!BlockableNchw(y)) return -1;
  for (int big = 0; big < 2; ++big) {
    const ir::TypeInfo& x = g.values[node.inputs[big]].type;
    const ir::TypeInfo& s = g.values[node.inputs[1 - big]].type;
    if (x.dtype == DType::kFloat32 && x.dims == y.dims && s.dtype == DType::kFloat32 &&
        s.shape_known() && s.dims == Dims{1, y.dims[1], 1, 1})
      return big;
  }
  return -1;
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
  if (onnx && node.op_type == "Mul") {
    const int big = ChannelScaleInput(node, g);
    return big >= 0 && (input == big || input == kBlockedOutput);
  }
  if (onnx && node.op_type == "GlobalAveragePool") {  // reads blocked, writes [N, C, 1, 1]
    if (input != 0 || node.inputs.empty() || node.inputs[0] < 0) return false;
    const ir::TypeInfo& x = g.values[node.inputs[0]].type;
    return x.dtype == DType::kFloat32 && x.shape_known() && x.dims.size() == 4 &&
           x.dims[1] % kChannelBlock == 0;
  }
  return ConvCanRunBlocked(node, g, input);
}

bool BlockedLinked(const ir::Node& node, const ir::Graph& g, int input) {
  if (!IsOnnx(node)) return false;
  if (node.op_type == "Concat") return true;
  if (node.op_type == "MaxPool" || node.op_type == "AveragePool") return input == 0;
  if (node.op_type == "Mul") return input == ChannelScaleInput(node, g);
  return false;
}

void BlockedChannelScale(const float* x, const float* s, float* y, int64_t N, int64_t C,
                         int64_t HW) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < C / kChannelBlock; ++cb) {
      const float* sc = s + cb * kChannelBlock;  // s is [1, C, 1, 1]
      const int64_t base = (n * C + cb * kChannelBlock) * HW;
      for (int64_t i = 0; i < HW; ++i)
        for (int l = 0; l < kChannelBlock; ++l)
          y[base + i * kChannelBlock + l] = x[base + i * kChannelBlock + l] * sc[l];
    }
}

void BlockedGlobalAverage(const float* x, float* y, int64_t N, int64_t C, int64_t HW) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < C / kChannelBlock; ++cb) {
      float acc[kChannelBlock] = {};
      const float* xb = x + (n * C + cb * kChannelBlock) * HW;
      for (int64_t i = 0; i < HW; ++i)
        for (int l = 0; l < kChannelBlock; ++l) acc[l] += xb[i * kChannelBlock + l];
      for (int l = 0; l < kChannelBlock; ++l)
        y[n * C + cb * kChannelBlock + l] = acc[l] / static_cast<float>(HW);
    }
}

}  // namespace kiln::ops
