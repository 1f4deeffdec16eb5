#include "passes/fuse_channel_shuffle.h"

#include "ops/op.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsOnnxOp(const ir::Node& n, const char* op) {
  return (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == op && n.outputs.size() == 1 &&
         n.outputs[0] >= 0 && !n.inputs.empty() && n.inputs[0] >= 0;
}

// The shuffle's group when x -> mid is the split Reshape: mid = [N, g, C/g, d...] for x
// [N, C, d...], g > 1 and C/g > 1 (else there is nothing to shuffle). 0 if not.
int64_t SplitGroup(const ir::TypeInfo& x, const ir::TypeInfo& mid) {
  if (!x.shape_known() || !mid.shape_known() || x.dims.size() < 2 ||
      mid.dims.size() != x.dims.size() + 1)
    return 0;
  const Dims& a = x.dims;
  const Dims& b = mid.dims;
  if (b[0] != a[0] || b[1] < 2 || b[2] < 2 || b[1] * b[2] != a[1]) return 0;
  for (size_t k = 2; k < a.size(); ++k)
    if (b[k + 1] != a[k]) return 0;
  return b[1];
}

bool IsSwapOfAxes1And2(const ir::Node& t, size_t rank) {
  const ir::Attribute* perm = t.attr("perm");
  if (!perm || perm->kind != ir::Attribute::Kind::kInts || perm->ints.size() != rank) return false;
  for (size_t k = 0; k < rank; ++k) {
    const int64_t want = k == 1 ? 2 : k == 2 ? 1 : static_cast<int64_t>(k);
    if (perm->ints[k] != want) return false;
  }
  return true;
}

// One ChannelShuffle for the shuffle whose first Reshape is node i.
bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& split = g.nodes[i];
  if (!IsOnnxOp(split, "Reshape")) return false;
  const int x = split.inputs[0], mid = split.outputs[0];
  const int64_t group = SplitGroup(g.values[x].type, g.values[mid].type);
  if (group == 0) return false;
  const int t = r.Sole(mid);
  if (t < 0 || !IsOnnxOp(g.nodes[t], "Transpose") ||
      !IsSwapOfAxes1And2(g.nodes[t], g.values[mid].type.dims.size()))
    return false;
  const int swapped = g.nodes[t].outputs[0];
  const int merge = r.Sole(swapped);
  if (merge < 0 || !IsOnnxOp(g.nodes[merge], "Reshape") || g.nodes[merge].inputs[0] != swapped)
    return false;
  const int y = g.nodes[merge].outputs[0];
  const ir::TypeInfo& yt = g.values[y].type;
  if (!yt.shape_known() || yt.dims != g.values[x].type.dims || yt.dtype != g.values[x].type.dtype)
    return false;
  ir::Node shuffle;
  shuffle.name = g.nodes[merge].name;
  shuffle.op_type = "ChannelShuffle";
  shuffle.domain = ops::kKilnDomain;
  shuffle.inputs = {x};
  shuffle.outputs = {y};
  shuffle.attrs["group"] = ir::Attribute::Int(group);
  g.values[mid].producer = -1;
  g.values[swapped].producer = -1;
  g.nodes[merge] = std::move(shuffle);
  keep[i] = 0;
  keep[t] = 0;
  return true;
}

}  // namespace

Expected<bool> FuseChannelShuffle(ir::Model& model) {
  bool changed = FuseEachNode(*model.graph, FuseAt);
  if (changed && !model.opsets.count(ops::kKilnDomain)) model.opsets[ops::kKilnDomain] = 1;
  return VerifiedChange(*model.graph, changed);
}

}  // namespace kiln::passes
