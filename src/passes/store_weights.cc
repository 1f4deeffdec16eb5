#include "passes/store_weights.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "ir/small_float.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Fewer elements than this stay float: a scale per channel would cost as much as it saves.
constexpr int64_t kMinWeights = 64;

// The axis of w's output channels for a weight read as input 1 of n, or -1 when n reads none.
int ChannelAxis(const ir::Node& n, const Tensor& w) {
  if (!IsDefaultDomain(n) || n.inputs.size() < 2 || w.rank() < 2) return -1;
  if (n.op_type == "Conv") return 0;
  if (n.op_type == "Gemm" && w.rank() == 2) return n.attr_int("transB", 0) ? 0 : 1;
  if (n.op_type == "MatMul") return w.rank() - 1;
  return -1;
}

}  // namespace

void EncodeNarrow(const Tensor& w, int axis, DType kind, Tensor* codes, Tensor* scales) {
  const int64_t channels = axis < 0 ? 1 : w.dim(axis);
  int64_t inner = axis < 0 ? w.size() : 1;
  for (int d = axis + 1; axis >= 0 && d < w.rank(); ++d) inner *= w.dim(d);
  const float* x = w.data<float>();
  *scales = Tensor(DType::kFloat32, {channels});
  float* s = scales->data<float>();
  std::fill(s, s + channels, 0.0f);
  for (int64_t i = 0; i < w.size(); ++i) {
    float& m = s[(i / inner) % channels];
    m = std::max(m, std::fabs(x[i]));
  }
  for (int64_t c = 0; c < channels; ++c) s[c] = s[c] > 0 ? s[c] / SmallFloatMax(kind) : 1.0f;
  *codes = Tensor(kind, w.dims());
  for (int64_t i = 0; i < w.size(); ++i)
    codes->data<uint8_t>()[i] = FloatToSmallFloat(kind, x[i] / s[(i / inner) % channels], true);
}

Status StoreWeightsNarrow(ir::Model& model, DType kind, int* stored) {
  if (kind != DType::kFloat8E4M3FN && kind != DType::kFloat4E2M1)
    return Error("weights are stored as FLOAT8E4M3FN or FLOAT4E2M1, not " +
                 std::string(DTypeName(kind)));
  ir::Graph& g = *model.graph;
  std::vector<ir::Node> dequantize;
  std::map<int, int> axis_of;  // weight value -> channel axis (every reader must agree)
  for (const ir::Node& n : g.nodes) {
    const int v = n.inputs.size() > 1 ? n.inputs[1] : -1;
    if (v < 0 || !IsFixedConstant(g, v)) continue;
    const Tensor& w = *g.values[v].constant;
    const int axis =
        w.dtype() == DType::kFloat32 && w.size() >= kMinWeights ? ChannelAxis(n, w) : -1;
    auto [it, fresh] = axis_of.emplace(v, axis);
    if (!fresh && it->second != axis) it->second = -1;
  }
  // (A weight stays float unless every MatMul / Gemm / Conv reading it agrees on its channels;
  // other readers get the same dequantized value.)
  const std::string suffix = kind == DType::kFloat4E2M1 ? "_fp4" : "_fp8";
  for (const auto& [v, axis] : axis_of) {
    if (axis < 0) continue;
    ir::Value& val = g.values[v];
    Tensor codes, scales;
    EncodeNarrow(*val.constant, axis, kind, &codes, &scales);
    const std::string name = val.name;
    const int c = g.AddValue(name + suffix, ir::TypeInfo::Tensor(kind, codes.dims()));
    g.values[c].constant = std::move(codes);
    const int s =
        g.AddValue(name + suffix + "_scale", ir::TypeInfo::Tensor(DType::kFloat32, scales.dims()));
    g.values[s].constant = std::move(scales);
    ir::Value& weight = g.values[v];  // (AddValue may have moved it)
    weight.constant.reset();
    ir::Node dq;
    dq.name = name + suffix + "_dequantize";
    dq.op_type = "DequantizeLinear";
    dq.inputs = {c, s};
    dq.outputs = {v};
    dq.attrs["axis"] = ir::Attribute::Int(axis);
    dequantize.push_back(std::move(dq));
  }
  if (stored) *stored = static_cast<int>(dequantize.size());
  if (dequantize.empty()) return OkStatus();
  // The new nodes read constants only: they go first, and every producer index moves up.
  const int shift = static_cast<int>(dequantize.size());
  for (ir::Value& val : g.values)
    if (val.producer >= 0) val.producer += shift;
  for (int i = 0; i < shift; ++i) g.values[dequantize[i].outputs[0]].producer = i;
  g.nodes.insert(g.nodes.begin(), std::make_move_iterator(dequantize.begin()),
                 std::make_move_iterator(dequantize.end()));
  return ir::Verify(g);
}

}  // namespace kiln::passes
