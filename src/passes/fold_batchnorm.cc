#include "passes/fold_batchnorm.h"

#include <cmath>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsDefaultDomain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The float32 constant behind input i of n with exactly `count` elements in a 1-D shape, or null.
const Tensor* ChannelParam(const ir::Graph& g, const ir::Node& n, size_t i, int64_t count) {
  if (i >= n.inputs.size() || !IsFixedConstant(g, n.inputs[i])) return nullptr;
  const Tensor& t = *g.values[n.inputs[i]].constant;
  if (t.kind() != Tensor::Kind::kTensor || t.dtype() != DType::kFloat32 || t.dims() != Dims{count})
    return nullptr;
  return &t;
}

// The inference form: one output, not training, one parameter per channel.
bool IsInferenceBatchNorm(const ir::Node& bn, int64_t opset) {
  if (bn.op_type != "BatchNormalization" || !IsDefaultDomain(bn) || bn.inputs.size() != 5 ||
      bn.outputs.empty() || bn.outputs[0] < 0)
    return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k)
    if (bn.outputs[k] >= 0) return false;
  if (opset >= 14 && bn.attr_int("training_mode", 0) != 0) return false;
  if (opset < 9 && bn.attr_int("spatial", 1) == 0) return false;
  return true;
}

bool FoldInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FoldInGraph(sg, m) || changed; });
  const std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& bn = g.nodes[i];
    if (!IsInferenceBatchNorm(bn, m.OpsetFor(bn.domain)) || bn.inputs[0] < 0) continue;
    int y = bn.inputs[0], z = bn.outputs[0];
    int c = g.values[y].producer;
    if (c < 0 || reads[y] != 1 || is_output[y]) continue;
    const ir::Node& conv = g.nodes[c];
    if (conv.op_type != "Conv" || !IsDefaultDomain(conv) || conv.inputs.size() < 2 ||
        conv.outputs.size() != 1 || !IsFixedConstant(g, conv.inputs[1]))
      continue;
    const Tensor w = *g.values[conv.inputs[1]].constant;  // shares the bytes; only read
    if (w.kind() != Tensor::Kind::kTensor || w.dtype() != DType::kFloat32 || w.rank() < 1) continue;
    const int64_t channels = w.dim(0);
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    const Tensor* b = has_bias ? ChannelParam(g, conv, 2, channels) : nullptr;
    if (has_bias && !b) continue;
    const Tensor* scale = ChannelParam(g, bn, 1, channels);
    const Tensor* shift = ChannelParam(g, bn, 2, channels);
    const Tensor* mean = ChannelParam(g, bn, 3, channels);
    const Tensor* var = ChannelParam(g, bn, 4, channels);
    if (!scale || !shift || !mean || !var || g.values[z].type.dtype != DType::kFloat32) continue;

    const double eps = bn.attr_float("epsilon", 1e-5f);
    const int64_t per_channel = channels ? w.size() / channels : 0;
    Tensor w2(DType::kFloat32, w.dims()), b2(DType::kFloat32, {channels});
    for (int64_t o = 0; o < channels; ++o) {
      double s = static_cast<double>(scale->data<float>()[o]) /
                 std::sqrt(static_cast<double>(var->data<float>()[o]) + eps);
      const float* src = w.data<float>() + o * per_channel;
      float* dst = w2.data<float>() + o * per_channel;
      for (int64_t k = 0; k < per_channel; ++k) dst[k] = static_cast<float>(src[k] * s);
      double bias = b ? b->data<float>()[o] : 0.0;
      b2.data<float>()[o] = static_cast<float>((bias - mean->data<float>()[o]) * s +
                                               shift->data<float>()[o]);
    }
    std::string w_name = g.values[conv.inputs[1]].name + "_bn";
    std::string b_name = (has_bias ? g.values[conv.inputs[2]].name : g.values[y].name + "_bias") + "_bn";
    int x = conv.inputs[0];
    int wv = g.AddValue(UniqueValueName(g, w_name), ir::TypeInfo::Tensor(DType::kFloat32, w2.dims()));
    g.values[wv].constant = std::move(w2);
    int bv = g.AddValue(UniqueValueName(g, b_name), ir::TypeInfo::Tensor(DType::kFloat32, {channels}));
    g.values[bv].constant = std::move(b2);
    ir::Node& out = g.nodes[c];  // the Conv keeps its name and attributes, and now writes z
    out.inputs = {x, wv, bv};
    out.outputs[0] = z;
    g.values[z].producer = c;
    g.values[y].producer = -1;
    keep[i] = 0;
    changed = true;
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FoldBatchNorm(ir::Model& model) {
  bool changed = FoldInGraph(*model.graph, model);
  KILN_RETURN_IF_ERROR(ir::Verify(*model.graph));
  return changed;
}

}  // namespace kiln::passes
