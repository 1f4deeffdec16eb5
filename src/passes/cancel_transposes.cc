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
    for (size_t i = 0; i < perm->size(); ++i)
      (*perm)[i] = static_cast<int64_t>(perm->size() - 1 - i);
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

// True when perm moves only axes of size 1 of x's dims: the other axes keep their order, so
// the transposed tensor has x's bytes in x's order (a Reshape).
bool MovesOnlyUnitAxes(const Dims& x, const std::vector<int64_t>& perm) {
  int64_t last = -1;
  for (int64_t p : perm) {
    if (x[p] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// Transposes that move only axes of size 1 become Reshapes to the known output dims (views on
// the host: no copy). Needs Reshape's shape input (opset 5).
bool UnitTransposesToReshapes(ir::Graph& g, int64_t opset) {
  if (opset < 5) return false;
  bool changed = false;
  for (auto& n : g.nodes) {
    std::vector<int64_t> perm;
    if (!IsTranspose(n) || !PermOf(g, n, &perm)) continue;
    const ir::TypeInfo& x = g.values[n.inputs[0]].type;
    const ir::TypeInfo& y = g.values[n.outputs[0]].type;
    if (!x.shape_known() || !y.shape_known() || x.dims.size() != perm.size() ||
        std::count(x.dims.begin(), x.dims.end(), 0) > 0 || !MovesOnlyUnitAxes(x.dims, perm))
      continue;
    Tensor shape(DType::kInt64, {static_cast<int64_t>(y.dims.size())});
    for (size_t k = 0; k < y.dims.size(); ++k) shape.data<int64_t>()[k] = y.dims[k];
    const int sv = g.AddValue(UniqueValueName(g, g.values[n.outputs[0]].name + "_shape"),
                              ir::TypeInfo::Tensor(DType::kInt64, shape.dims()));
    g.values[sv].constant = std::move(shape);
    n.op_type = "Reshape";
    n.attrs.clear();
    n.inputs.push_back(sv);
    changed = true;
  }
  return changed;
}

bool CancelInGraph(ir::Graph& g, bool main, int64_t opset) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n,
                    [&](ir::Graph& sg) { changed = CancelInGraph(sg, false, opset) || changed; });
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
    if (!PermOf(g, g.nodes[p], &p1) || !PermOf(g, g.nodes[i], &p2) || p1.size() != p2.size())
      continue;
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
    outer.attrs["perm"] = ir::Attribute::Ints(q);
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
  return UnitTransposesToReshapes(g, opset) || changed;
}

}  // namespace

Expected<bool> CancelTransposes(ir::Model& model) {
  return VerifiedChange(*model.graph, CancelInGraph(*model.graph, true, model.OpsetFor("")));
}

}  // namespace kiln::passes
