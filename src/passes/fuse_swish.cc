#include "passes/fuse_swish.h"

#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool FuseInGraph(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg) || changed; });
  const ValueReaders r(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const ir::Node& sig = g.nodes[c];
    if (sig.op_type != "Sigmoid" || !IsDefaultDomain(sig) || sig.inputs.size() != 1) continue;
    const int x = sig.inputs[0];
    const ir::TypeInfo* xt = x >= 0 ? &g.values[x].type : nullptr;
    if (!xt || xt->dtype != DType::kFloat32 || !xt->shape_known()) continue;
    const int mul = SwishMul(g, x, r);
    if (mul < 0 || g.values[g.nodes[mul].outputs[0]].type.dims != xt->dims) continue;
    if (ReplaceChainWithUnary(g, keep, {static_cast<int>(c), mul}, mul, x, "Swish", ""))
      changed = true;
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseSwish(ir::Model& model) {
  bool changed = FuseInGraph(*model.graph);
  KILN_RETURN_IF_ERROR(ir::Verify(*model.graph));
  return changed;
}

}  // namespace kiln::passes
