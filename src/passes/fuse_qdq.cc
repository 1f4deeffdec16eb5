#include "passes/fuse_qdq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/op.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

// The bytes of v when it is a fixed constant (IsFixedConstant), else null.
const Tensor* ConstantOf(const ir::Graph& g, int v) {
  return v >= 0 && IsFixedConstant(g, v) ? &*g.values[v].constant : nullptr;
}

// A DequantizeLinear of 8-bit data with a float32 scale and no blocks.
struct Dequant {
  int node = -1, data = -1, scale = -1, zp = -1;  // zp: -1 when absent
  int64_t axis = 1;
};

std::optional<Dequant> DequantOf(const ir::Graph& g, int v) {
  const int p = v >= 0 ? g.values[v].producer : -1;
  if (p < 0) return std::nullopt;
  const ir::Node& n = g.nodes[p];
  if (n.op_type != "DequantizeLinear" || !IsDefaultDomain(n) || n.inputs.size() < 2 ||
      n.inputs[0] < 0 || n.inputs[1] < 0 || n.attr_int("block_size", 0) != 0 ||
      n.attr_int("output_dtype", 0) != 0)
    return std::nullopt;
  Dequant d{p, n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1,
            n.attr_int("axis", 1)};
  if (!Is8Bit(g.values[d.data].type.dtype) || g.values[d.scale].type.dtype != DType::kFloat32)
    return std::nullopt;
  return d;
}

// The zero point, when present, is a constant of the data's type with one value per scale.
bool ZeroPointFits(const ir::Graph& g, int zp, DType type, int64_t count) {
  if (zp < 0) return true;
  const Tensor* z = ConstantOf(g, zp);
  return z && z->dtype() == type && z->size() == count;
}

// An activation's DequantizeLinear: constant scalar scale and zero point.
bool PerTensor(const ir::Graph& g, const Dequant& d) {
  const Tensor* s = ConstantOf(g, d.scale);
  return s && s->size() == 1 && ZeroPointFits(g, d.zp, g.values[d.data].type.dtype, 1);
}

// A weight's DequantizeLinear: constant data of `rank` dims, constant scales per tensor or one per
// index of axis `channel_axis` (`channels` of them), zero points alike.
bool PerChannel(const ir::Graph& g, const Dequant& d, int64_t rank, int64_t channel_axis,
                int64_t channels) {
  const Tensor* w = ConstantOf(g, d.data);
  const Tensor* s = ConstantOf(g, d.scale);
  if (!w || !s || w->rank() != rank || !ZeroPointFits(g, d.zp, w->dtype(), s->size())) return false;
  if (s->size() == 1) return s->rank() <= 1;
  const int64_t axis = d.axis < 0 ? d.axis + rank : d.axis;
  return s->rank() == 1 && axis == channel_axis && s->size() == channels;
}

// Conv's bias as int32 at scale x_scale * w_scale[m]: the data of a DequantizeLinear at that scale
// (zero point 0), or a float32 constant rounded to it. -1 when it is neither.
int IntBias(ir::Graph& g, int bias, const Dequant& x, const Dequant& w, int64_t channels) {
  const float xs = ConstantOf(g, x.scale)->data<float>()[0];
  const Tensor& ws = *ConstantOf(g, w.scale);
  auto scale = [&](int64_t m) {
    return static_cast<double>(xs) * ws.data<float>()[ws.size() == 1 ? 0 : m];
  };
  const int p = g.values[bias].producer;
  if (p >= 0) {
    const ir::Node& n = g.nodes[p];
    if (n.op_type != "DequantizeLinear" || !IsDefaultDomain(n) || n.inputs.size() < 2) return -1;
    const Tensor* q = ConstantOf(g, n.inputs[0]);
    const Tensor* s = ConstantOf(g, n.inputs[1]);
    const Tensor* z = n.inputs.size() > 2 ? ConstantOf(g, n.inputs[2]) : nullptr;
    if (!q || !s || q->dtype() != DType::kInt32 || q->size() != channels ||
        s->dtype() != DType::kFloat32 || (s->size() != 1 && s->size() != channels) ||
        (n.inputs.size() > 2 && n.inputs[2] >= 0 && (!z || z->dtype() != DType::kInt32)))
      return -1;
    for (int64_t m = 0; m < channels; ++m) {
      const double want = scale(m), have = s->data<float>()[s->size() == 1 ? 0 : m];
      if (std::fabs(have - want) > 1e-6 * std::fabs(want)) return -1;
      if (z && z->data<int32_t>()[z->size() == 1 ? 0 : m] != 0) return -1;
    }
    return n.inputs[0];
  }
  const Tensor* b = ConstantOf(g, bias);
  if (!b || b->dtype() != DType::kFloat32 || b->size() != channels) return -1;
  Tensor q(DType::kInt32, {channels});
  for (int64_t m = 0; m < channels; ++m) {
    const double v = std::nearbyint(b->data<float>()[m] / scale(m));
    if (!(std::fabs(v) < 2147483647.0)) return -1;
    q.data<int32_t>()[m] = static_cast<int32_t>(v);
  }
  return AddConstant(g, g.values[bias].name + "_int32", std::move(q));
}

// A QuantizeLinear to 8 bits with a constant scalar scale and zero point (absent: uint8 0).
bool IsPerTensorQuantize(const ir::Graph& g, const ir::Node& q) {
  if (q.op_type != "QuantizeLinear" || !IsDefaultDomain(q) || q.inputs.size() < 2 ||
      q.inputs[0] < 0 || q.outputs.size() != 1 || q.outputs[0] < 0 ||
      q.attr_int("block_size", 0) != 0 || q.attr_int("precision", 0) != 0 ||
      !Is8Bit(g.values[q.outputs[0]].type.dtype))
    return false;
  const Tensor* s = ConstantOf(g, q.inputs[1]);
  if (!s || s->dtype() != DType::kFloat32 || s->size() != 1) return false;
  const int zp = q.inputs.size() > 2 ? q.inputs[2] : -1;
  return ZeroPointFits(g, zp, g.values[q.outputs[0]].type.dtype, 1);
}

// Q(Clip(v, lo, hi)) == Q(v) for every v: the Q saturates at or before lo and hi anyway (a Relu
// is lo = 0 with no hi; an absent bound is infinite).
bool QuantizeAbsorbsClip(const ir::Graph& g, const ir::Node& q, double lo, double hi) {
  const double scale = ConstantOf(g, q.inputs[1])->data<float>()[0];
  if (!(scale > 0 && std::isfinite(scale))) return false;
  const int zp_value = q.inputs.size() > 2 ? q.inputs[2] : -1;
  const double zp = zp_value < 0 ? 0 : ConstantOf(g, zp_value)->GetDouble(0);
  const bool is_signed = g.values[q.outputs[0]].type.dtype == DType::kInt8;
  const double qmin = is_signed ? -128 : 0, qmax = is_signed ? 127 : 255;
  auto quantize = [&](double x) { return std::clamp(std::nearbyint(x / scale) + zp, qmin, qmax); };
  return (std::isinf(lo) || quantize(lo) == qmin) && (std::isinf(hi) || quantize(hi) == qmax);
}

// The bounds of a Relu or of a Clip with constant bounds (attributes before opset 11, inputs
// from it), or nullopt for any other node.
std::optional<std::pair<double, double>> ClipBounds(const ir::Graph& g, const ir::Node& n,
                                                    int64_t opset) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!IsDefaultDomain(n) || n.inputs.empty() || n.inputs[0] < 0) return std::nullopt;
  if (n.op_type == "Relu") return std::pair{0.0, kInf};
  if (n.op_type != "Clip") return std::nullopt;
  if (opset < 11) {
    const ir::Attribute* lo = n.attr("min");
    const ir::Attribute* hi = n.attr("max");
    return std::pair{lo ? double{lo->f} : -kInf, hi ? double{hi->f} : kInf};
  }
  double bounds[2] = {-kInf, kInf};
  for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
    if (n.inputs[i] < 0) continue;
    const Tensor* b = ConstantOf(g, n.inputs[i]);
    if (!b || b->dtype() != DType::kFloat32 || b->size() != 1) return std::nullopt;
    bounds[i - 1] = b->data<float>()[0];
  }
  return std::pair{bounds[0], bounds[1]};
}

// QuantizeLinear qn becomes com.kiln `op` (requantized in fixed point, kernels/reference/requant.c)
// reading `in`, then the Q's scale and zero point (added where absent: it states the output type
// the Q would write, as the QLinear ops default to x's), then `tail`.
void ToKilnOp(ir::Graph& g, int qn, const char* op, std::vector<int> in,
              const std::vector<int>& tail = {}, std::map<std::string, ir::Attribute> attrs = {}) {
  int yz = g.nodes[qn].inputs.size() > 2 ? g.nodes[qn].inputs[2] : -1;
  if (yz < 0) {
    Tensor zero(DType::kUInt8, {});
    yz = AddConstant(g, g.values[g.nodes[qn].outputs[0]].name + "_zero_point", std::move(zero));
  }
  ir::Node& q = g.nodes[qn];
  in.push_back(q.inputs[1]);
  in.push_back(yz);
  in.insert(in.end(), tail.begin(), tail.end());
  q.inputs = std::move(in);
  q.op_type = op;
  q.domain = ops::kKilnDomain;
  q.attrs = std::move(attrs);
}

// Q(GlobalAveragePool(DQ(x))) as com.kiln QLinearGlobalAveragePool (per-tensor scales, a plane
// whose int32 sum cannot overflow); false where it is not of that form.
bool FusePool(ir::Graph& g, int qn, int pool) {
  std::optional<Dequant> x =
      DequantOf(g, g.nodes[pool].inputs.empty() ? -1 : g.nodes[pool].inputs[0]);
  if (!x || !PerTensor(g, *x) || g.nodes[pool].outputs.size() != 1) return false;
  const ir::TypeInfo& xt = g.values[x->data].type;
  if (!xt.has_shape || xt.dims.size() < 3) return false;
  int64_t plane = 1;
  for (size_t i = 2; i < xt.dims.size(); ++i) plane *= xt.dims[i];
  if (plane < 1 || plane > (int64_t{1} << 23)) return false;
  ToKilnOp(g, qn, "QLinearGlobalAveragePool", {x->data, x->scale, x->zp});
  return true;
}

// Q(Add(DQ(a), DQ(b))) of two tensors of one shape as com.kiln QLinearAdd (per-tensor scales);
// false where it is not of that form.
bool FuseAdd(ir::Graph& g, int qn, int add) {
  const ir::Node& n = g.nodes[add];
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  std::optional<Dequant> a = DequantOf(g, n.inputs[0]), b = DequantOf(g, n.inputs[1]);
  if (!a || !b || !PerTensor(g, *a) || !PerTensor(g, *b)) return false;
  const ir::TypeInfo &at = g.values[a->data].type, &bt = g.values[b->data].type;
  if (!at.has_shape || !bt.has_shape || at.dims != bt.dims) return false;
  ToKilnOp(g, qn, "QLinearAdd", {a->data, a->scale, a->zp, b->data, b->scale, b->zp});
  return true;
}

// Q(Gemm(DQ(x), DQ(w), bias)) with alpha = beta = 1, transA = 0, x [M, K] and a constant w
// ([K, N], or [N, K] with transB, transposed here) as com.kiln QLinearMatMul with its bias (input
// 8, int32 at x_scale * w_scale[n]); false where it is not of that form.
bool FuseGemm(ir::Graph& g, int qn, int gemm) {
  const ir::Node& n = g.nodes[gemm];
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || n.attr_int("transA", 0) != 0 ||
      n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f)
    return false;
  const bool trans_b = n.attr_int("transB", 0) != 0;
  std::optional<Dequant> x = DequantOf(g, n.inputs[0]), w = DequantOf(g, n.inputs[1]);
  if (!x || !w || !PerTensor(g, *x) || !g.values[x->data].type.has_shape ||
      g.values[x->data].type.dims.size() != 2)
    return false;
  const Tensor* wq = ConstantOf(g, w->data);
  if (!wq || wq->rank() != 2) return false;
  const int64_t N = wq->dim(trans_b ? 0 : 1), K = wq->dim(trans_b ? 1 : 0);
  if (!PerChannel(g, *w, 2, trans_b ? 0 : 1, N)) return false;
  int bias = -1;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const ir::TypeInfo& bt = g.values[n.inputs[2]].type;
    if (!bt.has_shape || bt.dims != Dims{N} || (bias = IntBias(g, n.inputs[2], *x, *w, N)) < 0)
      return false;
  }
  int weights = w->data;
  if (trans_b) {  // [N, K] -> [K, N], the per-channel scales then along axis 1
    Tensor t(wq->dtype(), {K, N});
    const auto* from = static_cast<const uint8_t*>(wq->raw());
    auto* to = static_cast<uint8_t*>(t.raw());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) to[k * N + j] = from[j * K + k];
    weights = AddConstant(g, g.values[w->data].name + "_transposed", std::move(t));
  }
  ToKilnOp(g, qn, "QLinearMatMul", {x->data, x->scale, x->zp, weights, w->scale, w->zp},
           bias >= 0 ? std::vector<int>{bias} : std::vector<int>{});
  return true;
}

// Q(Add(MatMul(DQ(x), DQ(w)), bias)) of a constant w [K, N] and a bias [N] that adds one value
// per output column (a dense layer; the MatMul's result read only by the Add) as com.kiln
// QLinearMatMul with its bias (input 8, int32 at x_scale * w_scale[n]), the MatMul added to
// `gone`; false where it is not of that form.
bool FuseDense(ir::Graph& g, int qn, int add, const ValueReaders& readers,
               const std::vector<char>& keep, std::vector<int>* gone) {
  const ir::Node& a = g.nodes[add];
  if (a.inputs.size() != 2 || a.outputs.size() != 1) return false;
  for (int side = 0; side < 2; ++side) {
    const int y = a.inputs[side], bias = a.inputs[1 - side];
    const int mm = y < 0 ? -1 : g.values[y].producer;
    if (mm < 0 || !keep[mm] || readers.Sole(y) != add || bias < 0) continue;
    const ir::Node& m = g.nodes[mm];
    if (m.op_type != "MatMul" || !IsDefaultDomain(m) || m.inputs.size() != 2) continue;
    std::optional<Dequant> x = DequantOf(g, m.inputs[0]), w = DequantOf(g, m.inputs[1]);
    if (!x || !w || !PerTensor(g, *x)) continue;
    const Tensor* wq = ConstantOf(g, w->data);
    const ir::TypeInfo &yt = g.values[y].type, &bt = g.values[bias].type;
    if (!wq || wq->rank() != 2 || !PerChannel(g, *w, 2, 1, wq->dim(1)) || !yt.has_shape ||
        !bt.has_shape || bt.dims != Dims{wq->dim(1)} || g.values[a.outputs[0]].type.dims != yt.dims)
      continue;
    const int int_bias = IntBias(g, bias, *x, *w, wq->dim(1));
    if (int_bias < 0) continue;
    ToKilnOp(g, qn, "QLinearMatMul", {x->data, x->scale, x->zp, w->data, w->scale, w->zp},
             {int_bias});
    gone->push_back(mm);
    return true;
  }
  return false;
}

// Q(Conv(DQ(x), DQ(w), bias)) as com.kiln QLinearConv, Q(MatMul(DQ(x), DQ(w))) as com.kiln
// QLinearMatMul (fuse_qdq.h); false where it is not of that form.
bool FuseConvOrMatMul(ir::Graph& g, int qn, int core) {
  const ir::Node& c = g.nodes[core];
  const bool conv = c.op_type == "Conv";
  if (c.inputs.size() < 2 || c.outputs.size() != 1) return false;
  std::optional<Dequant> x = DequantOf(g, c.inputs[0]), w = DequantOf(g, c.inputs[1]);
  if (!x || !w || !PerTensor(g, *x)) return false;
  const ir::TypeInfo& xt = g.values[x->data].type;
  const Tensor* wq = ConstantOf(g, w->data);
  if (!wq || !xt.has_shape) return false;
  int bias = -1;
  if (conv) {
    const int64_t rank = static_cast<int64_t>(xt.dims.size());
    if (rank < 3 || !PerChannel(g, *w, rank, 0, wq->rank() > 0 ? wq->dim(0) : 0)) return false;
    if (c.inputs.size() > 2 && c.inputs[2] >= 0 &&
        (bias = IntBias(g, c.inputs[2], *x, *w, wq->dim(0))) < 0)
      return false;
  } else if (c.inputs.size() != 2 || !PerChannel(g, *w, 2, 1, wq->rank() == 2 ? wq->dim(1) : 0)) {
    return false;
  }
  ToKilnOp(g, qn, conv ? "QLinearConv" : "QLinearMatMul",
           {x->data, x->scale, x->zp, w->data, w->scale, w->zp},
           bias >= 0 ? std::vector<int>{bias} : std::vector<int>{},
           conv ? g.nodes[core].attrs : std::map<std::string, ir::Attribute>{});
  return true;
}

bool FuseInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg, m) || changed; });
  const ValueReaders readers(g);
  std::vector<char> keep(g.nodes.size(), 1);
  const size_t count = g.nodes.size();
  for (size_t qi = 0; qi < count; ++qi) {
    if (!keep[qi] || !IsPerTensorQuantize(g, g.nodes[qi])) continue;
    const int qn = static_cast<int>(qi);
    std::vector<int> gone;
    int y = g.nodes[qi].inputs[0];
    int core = g.values[y].producer;
    if (core < 0 || readers.Sole(y) != qn || !keep[core]) continue;
    if (auto bounds = ClipBounds(g, g.nodes[core], m.OpsetFor(""))) {
      if (!QuantizeAbsorbsClip(g, g.nodes[qi], bounds->first, bounds->second)) continue;
      gone.push_back(core);
      y = g.nodes[core].inputs[0];
      core = g.values[y].producer;
      if (core < 0 || readers.Sole(y) != gone.back() || !keep[core]) continue;
    }
    const ir::Node& c = g.nodes[core];
    const std::string& op = c.op_type;
    if (!IsDefaultDomain(c)) continue;
    if (!(op == "GlobalAveragePool" ? FusePool(g, qn, core)
          : op == "Add"  ? FuseAdd(g, qn, core) || FuseDense(g, qn, core, readers, keep, &gone)
          : op == "Gemm" ? FuseGemm(g, qn, core)
          : op == "Conv" || op == "MatMul" ? FuseConvOrMatMul(g, qn, core)
                                           : false))
      continue;
    gone.push_back(core);
    for (int n : gone) keep[n] = 0;
    changed = true;
  }
  if (changed) MarkDeadNodes(g, keep);
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseQdq(ir::Model& model) {
  const bool changed = FuseInGraph(*model.graph, model);
  if (changed && !model.opsets.count(ops::kKilnDomain)) model.opsets[ops::kKilnDomain] = 1;
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
