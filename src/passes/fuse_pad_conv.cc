#include "passes/fuse_pad_conv.h"

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Input i of n when it is a fixed int64 / int32 constant, else null.
const Tensor* IntConstant(const ir::Graph& g, const ir::Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] < 0 || !IsFixedConstant(g, n.inputs[i])) return nullptr;
  const Tensor& t = *g.values[n.inputs[i]].constant;
  const bool integer = t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32;
  return t.kind() == Tensor::Kind::kTensor && integer ? &t : nullptr;
}

// The pads of Pad node p ([begin of each axis, end of each axis] over all rank axes of its
// input), when they are known constants, the mode is "constant" and the value is zero; else
// empty.
std::vector<int64_t> ZeroPads(const ir::Graph& g, const ir::Node& p, int64_t opset) {
  if (!IsDefaultDomain(p) || p.op_type != "Pad" || p.inputs.empty() || p.inputs[0] < 0 ||
      p.outputs.size() != 1 || p.outputs[0] < 0)
    return {};
  if (p.attr_string("mode", "constant") != "constant") return {};
  const ir::TypeInfo& x = g.values[p.inputs[0]].type;
  if (!x.shape_known()) return {};
  const size_t rank = x.dims.size();
  std::vector<int64_t> pads;
  if (opset < 11) {
    if (p.attr_float("value", 0.0f) != 0.0f) return {};
    pads = p.attr_ints("pads");
  } else {
    const Tensor* pt = IntConstant(g, p, 1);
    if (!pt) return {};
    pads = pt->ToInt64Vector();
    if (p.inputs.size() > 2 && p.inputs[2] >= 0) {
      if (!IsFixedConstant(g, p.inputs[2])) return {};
      const Tensor& v = *g.values[p.inputs[2]].constant;
      if (v.kind() != Tensor::Kind::kTensor || v.dtype() == DType::kString || v.size() != 1 ||
          v.GetDouble(0) != 0.0)
        return {};
    }
    if (p.inputs.size() > 3 && p.inputs[3] >= 0) {
      // Pads of the listed axes only: spread them over every axis.
      const Tensor* at = IntConstant(g, p, 3);
      if (!at) return {};
      const std::vector<int64_t> axes = at->ToInt64Vector();
      if (pads.size() != 2 * axes.size()) return {};
      std::vector<int64_t> all(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
        if (a < 0 || a >= static_cast<int64_t>(rank)) return {};
        all[a] += pads[i];
        all[a + rank] += pads[i + axes.size()];
      }
      pads = std::move(all);
    }
  }
  if (pads.size() != 2 * rank) return {};
  for (int64_t v : pads)
    if (v < 0) return {};
  return pads;
}

// True when node r reads its first input with zero padding of its own spatial axes.
bool TakesSpatialPads(const ir::Node& r, size_t rank) {
  if (!IsDefaultDomain(r) || rank < 3) return false;
  if (r.op_type == "AveragePool") {
    if (r.attr_int("count_include_pad", 0) != 1) return false;
  } else if (r.op_type != "Conv") {
    return false;
  }
  if (r.attr_string("auto_pad", "NOTSET") != "NOTSET") return false;
  const std::vector<int64_t> own = r.attr_ints("pads");
  return own.empty() || own.size() == 2 * (rank - 2);
}

bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i, int64_t opset) {
  const ir::Node& pad = g.nodes[i];
  const std::vector<int64_t> pads = ZeroPads(g, pad, opset);
  if (pads.empty()) return false;
  const size_t rank = pads.size() / 2, spatial = rank - 2;
  if (pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 || pads[rank + 1] != 0) return false;
  const int y = pad.outputs[0], reader = r.Sole(y);
  if (reader < 0 || !keep[reader] || !keep[i]) return false;
  ir::Node& conv = g.nodes[reader];
  if (conv.inputs.empty() || conv.inputs[0] != y || !TakesSpatialPads(conv, rank)) return false;
  for (size_t k = 1; k < conv.inputs.size(); ++k)
    if (conv.inputs[k] == y) return false;
  std::vector<int64_t> own = conv.attr_ints("pads");
  own.resize(2 * spatial, 0);
  for (size_t a = 0; a < spatial; ++a) {
    own[a] += pads[2 + a];
    own[spatial + a] += pads[rank + 2 + a];
  }
  conv.attrs["pads"] = ir::Attribute::Ints(own);
  conv.inputs[0] = pad.inputs[0];
  keep[i] = 0;
  g.values[y].producer = -1;
  return true;
}

}  // namespace

Expected<bool> FusePadConv(ir::Model& model) {
  const int64_t opset = model.OpsetFor("");
  bool changed = FuseEachNode(
      *model.graph, [opset](ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
        return FuseAt(g, r, keep, i, opset);
      });
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
