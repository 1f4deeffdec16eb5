#include "passes/fuse_transpose_matmul.h"

#include <string>
#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// The input of Transpose node t when its perm swaps the last two of rank >= 2 axes and keeps the
// others, else -1.
int SwappedLastTwo(const ir::Graph& g, const ir::Node& t) {
  if (t.op_type != "Transpose" || !IsDefaultDomain(t) || t.inputs.size() != 1 || t.inputs[0] < 0)
    return -1;
  const ir::TypeInfo& x = g.values[t.inputs[0]].type;
  if (!x.has_shape || x.dims.size() < 2) return -1;
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> perm = t.attr_ints("perm");
  if (!t.attr("perm")) return rank == 2 ? t.inputs[0] : -1;  // the default reverses the axes
  if (static_cast<int64_t>(perm.size()) != rank) return -1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t want = d == rank - 2 ? rank - 1 : d == rank - 1 ? rank - 2 : d;
    if (perm[d] != want && perm[d] != want - rank) return -1;
  }
  return t.inputs[0];
}

bool FuseInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg, m) || changed; });
  const std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& mm = g.nodes[i];
    if (mm.op_type != "MatMul" || !IsDefaultDomain(mm) || m.OpsetFor(mm.domain) < 12 ||
        mm.inputs.size() != 2 || mm.outputs.size() != 1 || mm.inputs[0] < 0 || mm.inputs[1] < 0)
      continue;
    const ir::TypeInfo &ta = g.values[mm.inputs[0]].type, &tb = g.values[mm.inputs[1]].type;
    if ((ta.dtype != DType::kFloat32 && ta.dtype != DType::kFloat64) || !ta.has_shape ||
        !tb.has_shape || ta.dims.size() < 2 || tb.dims.size() < 2)
      continue;
    int from[2] = {-1, -1}, by[2] = {-1, -1};  // per operand: the untransposed input, its node
    for (int side = 0; side < 2; ++side) {
      const int v = mm.inputs[side], p = g.values[v].producer;
      if (p < 0 || !keep[p] || reads[v] != 1 || is_output[v]) continue;
      from[side] = SwappedLastTwo(g, g.nodes[p]);
      if (from[side] >= 0) by[side] = p;
    }
    if (from[0] < 0 && from[1] < 0) continue;
    const char* a = from[0] >= 0 ? "...km" : "...mk";
    const char* b = from[1] >= 0 ? "...nk" : "...kn";
    for (int side = 0; side < 2; ++side) {
      if (from[side] < 0) continue;
      mm.inputs[side] = from[side];
      keep[by[side]] = 0;
    }
    mm.op_type = "Einsum";
    mm.attrs["equation"] = ir::Attribute::String(std::string(a) + "," + b + "->...mn");
    changed = true;
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseTransposeMatMul(ir::Model& model) {
  return VerifiedChange(*model.graph, FuseInGraph(*model.graph, model));
}

}  // namespace kiln::passes
