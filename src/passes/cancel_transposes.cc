#include "passes/cancel_transposes.h"

#include <algorithm>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsTranspose(const ir::Node& n) {
  return n.op_type == "Transpose" && (n.domain.empty() || n.domain == "ai.onnx") &&
         n.inputs.size() == 1 && n.inputs[0] >= 0 && n.outputs.size() == 1 && n.outputs[0] >= 0;
}

// The node's perm, or false when it cannot be known (a default perm on an input of unknown rank,
// or a malformed one).
bool PermOf(const ir::Graph& g, const ir::Node& n, std::vector<int64_t>* perm) {
  const ir::Attribute* a = n.attr("perm");
  const ir::TypeInfo& x = g.values[n.inputs[0]].type;
  if (!a) {
    if (x.kind != ir::TypeInfo::Kind::kTensor || !x.has_shape) return false;
    perm->resize(x.dims.size());
    for (size_t i = 0; i < perm->size(); ++i) (*perm)[i] = static_cast<int64_t>(perm->size() - 1 - i);
    return true;
  }
  if (a->kind != ir::Attribute::Kind::kInts) return false;
  *perm = a->ints;
  std::vector<char> seen(perm->size(), 0);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[p]) return false;
    seen[p] = 1;
  }
  return true;
}

bool CancelInGraph(ir::Graph& g, bool main) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = CancelInGraph(sg, false) || changed; });
  std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  ValueRewirer rewire(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!IsTranspose(g.nodes[i])) continue;
    int y = rewire.Find(g.nodes[i].inputs[0]);
    int p = g.values[y].producer;
    if (p < 0 || !keep[p] || !IsTranspose(g.nodes[p]) || reads[y] != 1 || is_output[y]) continue;
    std::vector<int64_t> p1, p2;
    if (!PermOf(g, g.nodes[p], &p1) || !PermOf(g, g.nodes[i], &p2) || p1.size() != p2.size()) continue;
    std::vector<int64_t> q(p2.size());
    bool identity = true;
    for (size_t j = 0; j < q.size(); ++j) {
      q[j] = p1[p2[j]];
      identity = identity && q[j] == static_cast<int64_t>(j);
    }
    // The outer node now reads x with the composed perm; the inner one goes.
    int x = rewire.Find(g.nodes[p].inputs[0]);
    ir::Node& outer = g.nodes[i];
    outer.inputs[0] = x;
    ir::Attribute perm;
    perm.kind = ir::Attribute::Kind::kInts;
    perm.ints = q;
    outer.attrs["perm"] = perm;
    keep[p] = 0;
    reads[y] = 0;
    changed = true;
    if (!identity) continue;
    int z = outer.outputs[0];
    if (main && is_output[z]) {
      int px = g.values[x].producer;
      if (px < 0 || !keep[px] || is_output[x]) continue;  // an identity Transpose stays
      const auto& outs = g.nodes[px].outputs;
      int slot = static_cast<int>(std::find(outs.begin(), outs.end(), x) - outs.begin());
      RetargetOutput(g, px, slot, z, rewire);
      reads[z] += reads[x] - 1;
    } else {
      rewire.Merge(z, x);
      reads[x] += reads[z] - 1;
    }
    keep[i] = 0;
  }
  rewire.Apply(g, !main);
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> CancelTransposes(ir::Model& model) {
  bool changed = CancelInGraph(*model.graph, true);
  KILN_RETURN_IF_ERROR(ir::Verify(*model.graph));
  return changed;
}

}  // namespace kiln::passes
