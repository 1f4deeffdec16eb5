#include "passes/fuse_matmul_add.h"

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsDefaultDomain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// True when a C of dims c broadcasts to [m, n] the way Gemm accepts.
bool GemmBias(const Dims& c, int64_t m, int64_t n) {
  if (c.size() == 0) return true;
  if (c.size() == 1) return c[0] == 1 || c[0] == n;
  if (c.size() == 2) return (c[0] == 1 || c[0] == m) && (c[1] == 1 || c[1] == n);
  return false;
}

bool FuseInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg, m) || changed; });
  const std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& add = g.nodes[i];
    const int64_t opset = m.OpsetFor(add.domain);
    if (add.op_type != "Add" || !IsDefaultDomain(add) || opset < 7 || add.inputs.size() != 2 ||
        add.outputs.size() != 1 || add.outputs[0] < 0 || add.inputs[0] < 0 || add.inputs[1] < 0)
      continue;
    for (int side = 0; side < 2; ++side) {
      int y = add.inputs[side], bias = add.inputs[1 - side], z = add.outputs[0];
      int p = g.values[y].producer;
      if (p < 0 || !keep[p] || reads[y] != 1 || is_output[y] || !IsFixedConstant(g, bias)) continue;
      const ir::Node& mm = g.nodes[p];
      if (mm.op_type != "MatMul" || !IsDefaultDomain(mm) || mm.inputs.size() != 2 ||
          mm.outputs.size() != 1 || mm.inputs[0] < 0 || !IsFixedConstant(g, mm.inputs[1]))
        continue;
      const ir::TypeInfo& a = g.values[mm.inputs[0]].type;
      const Tensor& b = *g.values[mm.inputs[1]].constant;
      const Tensor& c = *g.values[bias].constant;
      const ir::TypeInfo& zt = g.values[z].type;
      DType t = a.dtype;
      if ((t != DType::kFloat32 && t != DType::kFloat64) || !a.shape_known() || a.dims.size() != 2 ||
          b.kind() != Tensor::Kind::kTensor || b.dtype() != t || b.rank() != 2 ||
          b.dim(0) != a.dims[1] || c.kind() != Tensor::Kind::kTensor || c.dtype() != t ||
          zt.dtype != t || !zt.shape_known() || zt.dims != Dims{a.dims[0], b.dim(1)} ||
          !GemmBias(c.dims(), a.dims[0], b.dim(1)))
        continue;
      ir::Node& gemm = g.nodes[p];  // the MatMul becomes the Gemm, keeping its name
      gemm.op_type = "Gemm";
      gemm.inputs = {gemm.inputs[0], gemm.inputs[1], bias};
      gemm.outputs = {z};
      g.values[z].producer = p;
      g.values[y].producer = -1;
      keep[i] = 0;
      changed = true;
      break;
    }
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseMatMulAdd(ir::Model& model) {
  bool changed = FuseInGraph(*model.graph, model);
  KILN_RETURN_IF_ERROR(ir::Verify(*model.graph));
  return changed;
}

}  // namespace kiln::passes
