#include "passes/fold_batchnorm.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

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

// A per-output-channel affine map z = y * s + t that a node applies to a Conv's output y.
struct ChannelAffine {
  std::vector<double> s, t;
};

// The constant operand of a binary node as one value per channel of an [N, C, ...] output of
// `rank` dims: a scalar, or dims that are 1 except C at axis 1 (so the node does not broadcast
// y to a bigger shape). Empty if it is not one.
std::vector<double> PerChannelOperand(const ir::Graph& g, int v, int64_t channels, size_t rank) {
  if (!IsFixedConstant(g, v)) return {};
  const Tensor& t = *g.values[v].constant;
  if (t.kind() != Tensor::Kind::kTensor || t.dtype() != DType::kFloat32 || t.rank() > rank)
    return {};
  const Dims& d = t.dims();
  for (size_t k = 0; k < d.size(); ++k) {  // right-aligned against the output's dims
    size_t axis = rank - d.size() + k;
    if (d[k] != 1 && !(axis == 1 && d[k] == channels)) return {};
  }
  std::vector<double> out(channels);
  for (int64_t o = 0; o < channels; ++o) out[o] = t.data<float>()[t.size() == 1 ? 0 : o];
  return out;
}

// The affine map of `n` reading y (a Conv output with `channels` channels and `rank` dims):
// an inference BatchNormalization, or Mul / Add / Sub with a per-channel constant. Empty if none.
std::optional<ChannelAffine> AffineOf(const ir::Graph& g, const ir::Model& m, const ir::Node& n,
                                      int y, int64_t channels, size_t rank) {
  if (!IsDefaultDomain(n) || n.outputs.size() != 1 || n.outputs[0] < 0) return std::nullopt;
  if (n.op_type == "BatchNormalization") {
    if (!IsInferenceBatchNorm(n, m.OpsetFor(n.domain)) || n.inputs[0] != y) return std::nullopt;
    const Tensor* scale = VectorFloatInput(g, n, 1, channels);
    const Tensor* shift = VectorFloatInput(g, n, 2, channels);
    const Tensor* mean = VectorFloatInput(g, n, 3, channels);
    const Tensor* var = VectorFloatInput(g, n, 4, channels);
    if (!scale || !shift || !mean || !var) return std::nullopt;
    const double eps = n.attr_float("epsilon", 1e-5f);
    ChannelAffine a{std::vector<double>(channels), std::vector<double>(channels)};
    for (int64_t o = 0; o < channels; ++o) {
      a.s[o] = static_cast<double>(scale->data<float>()[o]) /
               std::sqrt(static_cast<double>(var->data<float>()[o]) + eps);
      a.t[o] = shift->data<float>()[o] - mean->data<float>()[o] * a.s[o];
    }
    return a;
  }
  const bool mul = n.op_type == "Mul", add = n.op_type == "Add", sub = n.op_type == "Sub";
  if ((!mul && !add && !sub) || n.inputs.size() != 2) return std::nullopt;
  const int other = n.inputs[0] == y ? n.inputs[1] : n.inputs[0];
  if (n.inputs[0] != y && n.inputs[1] != y) return std::nullopt;
  if (sub && n.inputs[0] != y) return std::nullopt;  // c - y negates the weights: left alone
  std::vector<double> c = PerChannelOperand(g, other, channels, rank);
  if (c.empty() && channels > 0) return std::nullopt;
  ChannelAffine a{std::vector<double>(channels, 1.0), std::vector<double>(channels, 0.0)};
  for (int64_t o = 0; o < channels; ++o) (mul ? a.s[o] : a.t[o]) = sub ? -c[o] : c[o];
  return a;
}

// Conv or ConvTranspose c (writing y) := the same with W * s, B * s + t. False when its weights
// or bias are not float32 constants with the output channels where the op keeps them: W's rows
// (Conv, [M, C / group, k...]), or its second axis per group (ConvTranspose, [C, M / group, k...]).
bool FoldIntoConv(ir::Graph& g, int c, int y, const ChannelAffine& a, const std::string& suffix) {
  const ir::Node& conv = g.nodes[c];
  if (conv.inputs.size() < 2 || conv.outputs.size() != 1 || !IsFixedConstant(g, conv.inputs[1]))
    return false;
  const Tensor w = *g.values[conv.inputs[1]].constant;  // shares the bytes; only read
  const int64_t channels = static_cast<int64_t>(a.s.size());
  const bool transpose = conv.op_type == "ConvTranspose";
  const int64_t group = conv.attr_int("group", 1);
  if (w.kind() != Tensor::Kind::kTensor || w.dtype() != DType::kFloat32 || w.rank() < 2 ||
      group <= 0 ||
      (transpose ? w.dim(1) * group != channels || w.dim(0) % group != 0 : w.dim(0) != channels))
    return false;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  const Tensor* b = has_bias ? VectorFloatInput(g, conv, 2, channels) : nullptr;
  if (has_bias && !b) return false;
  // The output channel of W's element e.
  const int64_t inner = w.size() ? w.size() / w.dim(0) / w.dim(1) : 0;  // kernel elements
  const int64_t in_per_group = w.dim(0) / group;
  auto channel_of = [&](int64_t e) {
    if (!transpose) return e / (w.size() / channels);
    const int64_t row = e / (w.dim(1) * inner), col = e / inner % w.dim(1);
    return row / in_per_group * w.dim(1) + col;
  };
  Tensor w2(DType::kFloat32, w.dims()), b2(DType::kFloat32, {channels});
  for (int64_t e = 0; e < w.size(); ++e)
    w2.data<float>()[e] = static_cast<float>(w.data<float>()[e] * a.s[channel_of(e)]);
  for (int64_t o = 0; o < channels; ++o) {
    double bias = b ? b->data<float>()[o] : 0.0;
    b2.data<float>()[o] = static_cast<float>(bias * a.s[o] + a.t[o]);
  }
  const std::string b_name = has_bias ? g.values[conv.inputs[2]].name : g.values[y].name + "_bias";
  const int x = conv.inputs[0];
  const int wv = AddConstant(g, g.values[conv.inputs[1]].name + suffix, std::move(w2));
  const int bv = AddConstant(g, b_name + suffix, std::move(b2));
  g.nodes[c].inputs = {x, wv, bv};
  return true;
}

// True for the normalizations whose inputs 1 and 2 are a scale and a bias applied per channel
// after them (an inference BatchNormalization; InstanceNormalization; GroupNormalization, when
// its scale and bias have a value per channel: FoldIntoNormalization checks the counts).
bool IsChannelScaledNorm(const ir::Node& n, int64_t opset) {
  return IsDefaultDomain(n) &&
         (IsInferenceBatchNorm(n, opset) ||
          ((n.op_type == "InstanceNormalization" || n.op_type == "GroupNormalization") &&
           n.inputs.size() == 3 && n.outputs.size() == 1));
}

// Normalization n (IsChannelScaledNorm) := the same with scale * s and bias * s + t.
bool FoldIntoNormalization(ir::Graph& g, int n, const ChannelAffine& a, const std::string& suffix) {
  const ir::Node& bn = g.nodes[n];
  const int64_t channels = static_cast<int64_t>(a.s.size());
  const Tensor* scale = VectorFloatInput(g, bn, 1, channels);
  const Tensor* shift = VectorFloatInput(g, bn, 2, channels);
  if (!scale || !shift) return false;
  Tensor s2(DType::kFloat32, {channels}), t2(DType::kFloat32, {channels});
  for (int64_t o = 0; o < channels; ++o) {
    s2.data<float>()[o] = static_cast<float>(scale->data<float>()[o] * a.s[o]);
    t2.data<float>()[o] = static_cast<float>(shift->data<float>()[o] * a.s[o] + a.t[o]);
  }
  const int sv = AddConstant(g, g.values[bn.inputs[1]].name + suffix, std::move(s2));
  const int tv = AddConstant(g, g.values[bn.inputs[2]].name + suffix, std::move(t2));
  g.nodes[n].inputs[1] = sv;
  g.nodes[n].inputs[2] = tv;
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
    const ir::Node& op = g.nodes[i];
    if (op.inputs.empty() || op.outputs.size() != 1 || op.outputs[0] < 0) continue;
    // y: the operand a Conv, a ConvTranspose or a normalization writes (the node of an earlier
    // fold in this sweep writes it now).
    int y = -1;
    for (int v : op.inputs) {
      const int p = v >= 0 ? g.values[v].producer : -1;
      if (p >= 0 && IsDefaultDomain(g.nodes[p]) &&
          (g.nodes[p].op_type == "Conv" || g.nodes[p].op_type == "ConvTranspose" ||
           IsChannelScaledNorm(g.nodes[p], m.OpsetFor(g.nodes[p].domain))))
        y = v;
    }
    if (y < 0 || reads[y] != 1 || is_output[y]) continue;
    const int z = op.outputs[0];
    const int c = g.values[y].producer;
    const ir::TypeInfo& zt = g.values[z].type;
    const ir::TypeInfo& yt = g.values[y].type;
    if (zt.dtype != DType::kFloat32 || !zt.shape_known() || zt.dims.size() < 2 ||
        !yt.shape_known() || yt.dims != zt.dims)
      continue;
    const int64_t channels = zt.dims[1];
    std::optional<ChannelAffine> a = AffineOf(g, m, op, y, channels, zt.dims.size());
    if (!a) continue;
    const std::string suffix = op.op_type == "BatchNormalization" ? "_bn" : "_affine";
    const std::vector<int> before = g.nodes[c].inputs;
    const bool conv = g.nodes[c].op_type == "Conv" || g.nodes[c].op_type == "ConvTranspose";
    if (conv ? FoldIntoConv(g, c, y, *a, suffix) : FoldIntoNormalization(g, c, *a, suffix)) {
      // The replaced weights go now where node c was their only reader (or this sweep made
      // them for it): a model's weights would otherwise be held once more per fold.
      for (size_t k = 1; k < before.size(); ++k) {
        const int v = before[k];
        if (v < 0 || (v < static_cast<int>(reads.size()) && reads[v] != 1) ||
            std::count(g.nodes[c].inputs.begin(), g.nodes[c].inputs.end(), v) ||
            !IsFixedConstant(g, v))
          continue;
        g.values[v].constant.reset();
      }
      g.nodes[c].outputs[0] = z;  // the node keeps its name and attributes, and now writes z
      g.values[z].producer = c;
      g.values[y].producer = -1;
      keep[i] = 0;
      changed = true;
    }
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FoldBatchNorm(ir::Model& model) {
  return VerifiedChange(*model.graph, FoldInGraph(*model.graph, model));
}

}  // namespace kiln::passes
