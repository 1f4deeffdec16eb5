#include "passes/fuse_swish.h"

#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// x * Sigmoid(x) with the Sigmoid at node i, as one Swish(x).
bool FuseAt(ir::Graph& g, const ValueReaders& r, std::vector<char>& keep, int i) {
  const ir::Node& sig = g.nodes[i];
  if (sig.op_type != "Sigmoid" || !IsDefaultDomain(sig) || sig.inputs.size() != 1) return false;
  const int x = sig.inputs[0];
  const ir::TypeInfo* xt = x >= 0 ? &g.values[x].type : nullptr;
  if (!xt || xt->dtype != DType::kFloat32 || !xt->shape_known()) return false;
  const int mul = SwishMul(g, x, r);
  return mul >= 0 && g.values[g.nodes[mul].outputs[0]].type.dims == xt->dims &&
         ReplaceChainWithUnary(g, keep, {i, mul}, mul, x, "Swish", "");
}

}  // namespace

Expected<bool> FuseSwish(ir::Model& model) {
  return VerifiedChange(*model.graph, FuseEachNode(*model.graph, FuseAt));
}

}  // namespace kiln::passes
