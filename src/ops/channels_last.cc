#include "ops/channels_last.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/dnnl/conv_dnnl.h"
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/x86/cpu_isa.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "ops/op_traits.h"
#include "ops/resize_plan.h"

namespace kiln::ops {
namespace {

bool ChannelsLastable(const ir::TypeInfo& t) {
  return t.dtype == DType::kFloat32 && t.shape_known() && t.dims.size() == 4 && t.dims[0] == 1;
}

bool ConcatCanRunChannelsLast(const ir::Node& node, const ir::Graph& g) {
  if (node.outputs.size() != 1 || node.outputs[0] < 0 || node.inputs.empty()) return false;
  const int64_t axis = node.attr_int("axis", 0);
  if (axis != 1 && axis != -3) return false;
  for (int v : node.inputs)
    if (v < 0 || !ChannelsLastable(g.values[v].type)) return false;
  return ChannelsLastable(g.values[node.outputs[0]].type);
}

bool IsOnnx(const ir::Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

// MaxPool / AveragePool that ChannelsLastPool2D runs: float32 2-D, no Indices, no dilation.
bool PoolCanRunChannelsLast(const ir::Node& node, const ir::Graph& g) {
  if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.empty() || node.outputs[0] < 0)
    return false;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.outputs[i] >= 0) return false;  // Indices
  const ir::TypeInfo& x = g.values[node.inputs[0]].type;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (x.dtype != DType::kFloat32 || !x.shape_known() || !y.shape_known() || x.dims.size() != 4 ||
      node.attr_int("storage_order", 0) != 0)
    return false;
  Dims kernel = node.attr_ints("kernel_shape");
  WindowGeom wg;
  if (kernel.size() != 2 || !ComputeWindowGeom(node, Dims(x.dims.begin() + 2, x.dims.end()), kernel,
                                               true, node.attr_int("ceil_mode", 0) != 0, &wg)
                                 .empty())
    return false;
  for (int64_t d : wg.dilations)
    if (d != 1) return false;
  if (y.dims != Dims{x.dims[0], x.dims[1], wg.out[0], wg.out[1]}) return false;
  return true;
}

// Mul(x, s) (either order) with x [N, C, H, W] of the output's dims and s [1 or N, C, 1, 1]: the
// per-channel scale of a squeeze-and-excitation block. Returns x's input index, or -1.
int ChannelScaleInput(const ir::Node& node, const ir::Graph& g) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1 || node.outputs[0] < 0 ||
      node.inputs[0] < 0 || node.inputs[1] < 0)
    return -1;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (!ChannelsLastable(y)) return -1;
  for (int big = 0; big < 2; ++big) {
    const ir::TypeInfo& x = g.values[node.inputs[big]].type;
    const ir::TypeInfo& s = g.values[node.inputs[1 - big]].type;
    if (x.dtype == DType::kFloat32 && x.dims == y.dims && s.dtype == DType::kFloat32 &&
        s.shape_known() && s.dims == Dims{1, y.dims[1], 1, 1})
      return big;
  }
  return -1;
}

// Element-wise ops whose kernels do not care about the layout when every data input has the
// output's dims (ops/op_traits.h): the unary ones (their input 0; Clip's bounds are scalars) and
// the binary / variadic ones (every input).
bool IsUnaryElementwise(const ir::Node& node) {
  return HasTrait(node.domain, node.op_type, kUnaryElementwise);
}
bool IsSameShapeElementwise(const ir::Node& node) {
  return (OpTraits(node.domain, node.op_type) & (kBinaryElementwise | kVariadicElementwise)) != 0;
}

// A single-element input of a binary or variadic element-wise node (the 3 and 6 of a
// HardSwish written out as x * Clip(x + 3, 0, 6) / 6): broadcast alike in either layout.
bool IsScalarOperand(const ir::Graph& g, int v) {
  const ir::TypeInfo& t = g.values[v].type;
  return t.shape_known() && t.dims.size() <= 4 && NumElements(t.dims) == 1;
}

// True when the element-wise node fits: a float32 4-D output, and every data input (input 0 of a
// unary op) of the output's dims, or, for the others, a single element (not both).
bool ElementwiseFits(const ir::Node& node, const ir::Graph& g, bool unary) {
  if (node.outputs.size() != 1 || node.outputs[0] < 0 || node.inputs.empty()) return false;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (y.dtype != DType::kFloat32 || !y.shape_known() || y.dims.size() != 4) return false;
  const size_t data = unary ? 1 : node.inputs.size();
  bool full = false;
  for (size_t i = 0; i < data; ++i) {
    if (node.inputs[i] < 0) return false;
    if (g.values[node.inputs[i]].type.dims == y.dims)
      full = true;
    else if (unary || !IsScalarOperand(g, node.inputs[i]))
      return false;
  }
  return full;
}

// BatchNormalization in inference, one scale per channel.
bool BatchNormFits(const ir::Node& node, const ir::Graph& g) {
  if (node.inputs.size() != 5 || node.attr_int("training_mode", 0) != 0) return false;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.outputs[i] >= 0) return false;
  for (int v : node.inputs)
    if (v < 0) return false;
  if (!ElementwiseFits(node, g, true)) return false;
  const ir::TypeInfo& scale = g.values[node.inputs[1]].type;
  return scale.shape_known() && scale.dims == Dims{g.values[node.outputs[0]].type.dims[1]};
}

// How a node takes the channels-last layout, once it fits (its dtypes, dims and attributes): the
// inputs it reads channels-last, whether it writes output 0 so, and the inputs whose layout is
// the output's (ChannelsLastUse::linked).
struct NodeLayout {
  bool fits = false;
  bool output = false;
  std::vector<char> reads, linked;  // per input
};

// A node that fits reads and writes channels-last through the inputs `through` (linked), and
// reads nothing else.
NodeLayout Through(const ir::Node& node, bool fits, const std::vector<int>& through) {
  NodeLayout l;
  l.fits = fits;
  l.output = fits;
  l.reads.assign(node.inputs.size(), 0);
  l.linked.assign(node.inputs.size(), 0);
  for (int i : through)
    if (i < static_cast<int>(node.inputs.size())) l.reads[i] = l.linked[i] = fits ? 1 : 0;
  return l;
}

NodeLayout ElementwiseLayout(const ir::Node& node, const ir::Graph& g) {
  if (IsUnaryElementwise(node)) return Through(node, ElementwiseFits(node, g, true), {0});
  std::vector<int> full;  // the inputs of the output's dims; single elements broadcast alike
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.inputs[i] >= 0 && !node.outputs.empty() && node.outputs[0] >= 0 &&
        g.values[node.inputs[i]].type.dims == g.values[node.outputs[0]].type.dims)
      full.push_back(static_cast<int>(i));
  NodeLayout l = Through(node, ElementwiseFits(node, g, false), full);
  for (size_t i = 0; i < node.inputs.size(); ++i) l.reads[i] = l.fits ? 1 : 0;
  return l;
}

using LayoutRule = NodeLayout (*)(const ir::Node&, const ir::Graph&);

// The rule of each op that has one, by op type (ONNX ops; com.kiln's ChannelShuffle by its
// qualified name). Element-wise ops without an entry follow ElementwiseLayout, the convolutions
// ConvCanRunChannelsLast (ops/conv.cc).
const std::map<std::string, LayoutRule>& LayoutRules() {
  static const auto* rules = new std::map<std::string, LayoutRule>{
      {"Concat",
       [](const ir::Node& n, const ir::Graph& g) {
         std::vector<int> all(n.inputs.size());
         for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
         return Through(n, ConcatCanRunChannelsLast(n, g), all);
       }},
      {"MaxPool", [](const ir::Node& n,
                     const ir::Graph& g) { return Through(n, PoolCanRunChannelsLast(n, g), {0}); }},
      {"AveragePool",
       [](const ir::Node& n, const ir::Graph& g) {
         return Through(n, PoolCanRunChannelsLast(n, g), {0});
       }},
      {"Resize",
       [](const ir::Node& n, const ir::Graph& g) {
         return Through(n, ResizeCanRunChannelsLast(n, g), {0});
       }},
      {"Upsample",
       [](const ir::Node& n, const ir::Graph& g) {
         return Through(n, ResizeCanRunChannelsLast(n, g), {0});
       }},
      {"BatchNormalization",
       [](const ir::Node& n, const ir::Graph& g) { return Through(n, BatchNormFits(n, g), {0}); }},
      // A squeeze-and-excitation scale reads its full-size input channels-last; any other Mul
      // is element-wise.
      {"Mul",
       [](const ir::Node& n, const ir::Graph& g) {
         const int big = ChannelScaleInput(n, g);
         return big >= 0 ? Through(n, true, {big}) : ElementwiseLayout(n, g);
       }},
      // Reads channels-last, writes [N, C, 1, 1].
      {"GlobalAveragePool",
       [](const ir::Node& n, const ir::Graph& g) {
         NodeLayout l;
         if (n.inputs.empty() || n.inputs[0] < 0) return l;
         const ir::TypeInfo& x = g.values[n.inputs[0]].type;
         l.fits = x.dtype == DType::kFloat32 && x.shape_known() && x.dims.size() == 4;
         l.reads.assign(n.inputs.size(), 0);
         l.reads[0] = l.fits ? 1 : 0;
         l.linked.assign(n.inputs.size(), 0);
         return l;
       }},
      {std::string(kKilnDomain) + ".ChannelShuffle",
       [](const ir::Node& n, const ir::Graph& g) {
         return Through(n,
                        n.inputs.size() == 1 && n.inputs[0] >= 0 &&
                            ChannelsLastable(g.values[n.inputs[0]].type),
                        {0});
       }},
  };
  return *rules;
}

NodeLayout LayoutOf(const ir::Node& node, const ir::Graph& g) {
  const std::string key = IsOnnx(node) ? node.op_type : node.domain + "." + node.op_type;
  const auto& rules = LayoutRules();
  if (auto it = rules.find(key); it != rules.end()) return it->second(node, g);
  if (IsOnnx(node) && (IsUnaryElementwise(node) || IsSameShapeElementwise(node)))
    return ElementwiseLayout(node, g);
  NodeLayout l;  // the convolutions: no input linked to the output
  l.output = ConvCanRunChannelsLast(node, g, kChannelsLastOutput);
  l.reads.assign(node.inputs.size(), 0);
  for (size_t i = 0; i < node.inputs.size(); ++i)
    l.reads[i] = ConvCanRunChannelsLast(node, g, static_cast<int>(i)) ? 1 : 0;
  l.linked.assign(node.inputs.size(), 0);
  l.fits = l.output;
  return l;
}

}  // namespace

ChannelsLastUse ChannelsLastUseOf(const ir::Node& node, const ir::Graph& g) {
  ChannelsLastUse use;
  use.reads.assign(node.inputs.size(), 0);
  use.linked.assign(node.inputs.size(), 0);
  // Nothing would make or read channels-last tensors without oneDNN; with AVX-512 or AVX2 its
  // kernels and kiln's for the layout are measured, without them not.
  if (!DnnlAvailable() || BestIsa() == Isa::kBaseline) return use;
  NodeLayout l = LayoutOf(node, g);
  if (!l.fits) return use;
  use.output = l.output;
  use.reads = std::move(l.reads);
  use.linked = std::move(l.linked);
  return use;
}

bool CanRunChannelsLast(const ir::Node& node, const ir::Graph& g, int input) {
  const ChannelsLastUse use = ChannelsLastUseOf(node, g);
  if (input == kChannelsLastOutput) return use.output;
  return input >= 0 && input < static_cast<int>(use.reads.size()) && use.reads[input];
}

bool CanWriteChannelsLastInterleaved(const ir::Node& node, const ir::Graph& g) {
  if ((node.op_type != "Conv" && node.op_type != "FusedConv") ||
      !CanRunChannelsLast(node, g, kChannelsLastOutput))
    return false;
  return node.op_type == "Conv" || ((node.inputs.size() <= 3 || node.inputs[3] < 0) &&
                                    node.attr_string("activation", "") != "Swish");
}

}  // namespace kiln::ops
