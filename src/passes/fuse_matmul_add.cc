#include "passes/fuse_matmul_add.h"

#include <algorithm>
#include <string>
#include <vector>

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// True when a C of dims c broadcasts to [m, n] the way Gemm accepts.
bool GemmBias(const Dims& c, int64_t m, int64_t n) {
  if (c.size() == 0) return true;
  if (c.size() == 1) return c[0] == 1 || c[0] == n;
  if (c.size() == 2) return (c[0] == 1 || c[0] == m) && (c[1] == 1 || c[1] == n);
  return false;
}

// For A of rank > 2 (a transformer's [.., M, K] activations): true when the bias c adds one
// value per output column, i.e. its dims are 1 but the last, which is 1 or n, and it does not
// add axes to z.
bool RowBias(const Dims& c, size_t rank, int64_t n) {
  if (c.size() > rank) return false;
  for (size_t k = 0; k + 1 < c.size(); ++k)
    if (c[k] != 1) return false;
  return c.empty() || c.back() == 1 || c.back() == n;
}

int AddInt64Constant(ir::Graph& g, const std::string& base, const Dims& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t k = 0; k < v.size(); ++k) t.data<int64_t>()[k] = v[k];
  const int id =
      g.AddValue(UniqueValueName(g, base), ir::TypeInfo::Tensor(DType::kInt64, t.dims()));
  g.values[id].constant = std::move(t);
  return id;
}

bool FuseInGraph(ir::Graph& g, const ir::Model& m) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseInGraph(sg, m) || changed; });
  const std::vector<int> reads = ReadCounts(g);
  const std::vector<char> is_output = OutputMask(g);
  std::vector<char> keep(g.nodes.size(), 1);
  std::vector<std::vector<ir::Node>> after(g.nodes.size());  // nodes to insert after node i
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
      if ((t != DType::kFloat32 && t != DType::kFloat64) || !a.shape_known() || a.dims.size() < 2 ||
          b.kind() != Tensor::Kind::kTensor || b.dtype() != t || b.rank() != 2 ||
          b.dim(0) != a.dims.back() || c.kind() != Tensor::Kind::kTensor || c.dtype() != t ||
          zt.dtype != t || !zt.shape_known())
        continue;
      const int64_t N = b.dim(1);
      Dims want = a.dims;
      want.back() = N;
      if (zt.dims != want) continue;
      if (a.dims.size() == 2) {
        if (!GemmBias(c.dims(), a.dims[0], N)) continue;
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
      // Rank > 2: Reshape A to [rows, K], the Gemm, Reshape back (both views on the host).
      if (!RowBias(c.dims(), a.dims.size(), N) || std::count(a.dims.begin(), a.dims.end(), 0) > 0)
        continue;
      // Copies: AddValue below may move g.values, which a, c and zt point into.
      const Dims a_dims = a.dims, z_dims = zt.dims;
      const Tensor bias_row = c.Reshaped({static_cast<int64_t>(c.size())});
      const std::string base = g.values[z].name, bias_name = g.values[bias].name;
      const int64_t K = a_dims.back(), rows = NumElements(a_dims) / K;
      const int a2 =
          g.AddValue(UniqueValueName(g, base + "_rows"), ir::TypeInfo::Tensor(t, {rows, K}));
      const int y2 =
          g.AddValue(UniqueValueName(g, base + "_gemm"), ir::TypeInfo::Tensor(t, {rows, N}));
      const int flat = AddInt64Constant(g, base + "_rows_shape", {rows, K});
      const int back = AddInt64Constant(g, base + "_shape", z_dims);
      const int c2 = g.AddValue(UniqueValueName(g, bias_name + "_row"),
                                ir::TypeInfo::Tensor(t, bias_row.dims()));
      g.values[c2].constant = bias_row;
      ir::Node gemm = g.nodes[p];  // keeps the MatMul's name
      gemm.op_type = "Gemm";
      gemm.inputs = {a2, gemm.inputs[1], c2};
      gemm.outputs = {y2};
      ir::Node& split = g.nodes[p];  // the MatMul's place: A as rows
      split.op_type = "Reshape";
      split.name = gemm.name + "_rows";
      split.inputs = {split.inputs[0], flat};
      split.outputs = {a2};
      split.attrs.clear();
      ir::Node merge;
      merge.op_type = "Reshape";
      merge.name = g.nodes[i].name;
      merge.inputs = {y2, back};
      merge.outputs = {z};
      after[i] = {std::move(gemm), std::move(merge)};  // the Add's place
      keep[i] = 0;
      changed = true;
      break;
    }
  }
  if (changed) {  // splice the inserted nodes in (CompactNodes renumbers the producers)
    std::vector<ir::Node> nodes;
    std::vector<char> kept;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      nodes.push_back(std::move(g.nodes[i]));
      kept.push_back(keep[i]);
      for (auto& n : after[i]) {
        nodes.push_back(std::move(n));
        kept.push_back(1);
      }
    }
    g.nodes = std::move(nodes);
    keep = std::move(kept);
  }
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> FuseMatMulAdd(ir::Model& model) {
  return VerifiedChange(*model.graph, FuseInGraph(*model.graph, model));
}

}  // namespace kiln::passes
