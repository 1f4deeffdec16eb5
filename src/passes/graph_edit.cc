#include "passes/graph_edit.h"

#include <cmath>
#include <limits>
#include <unordered_set>

#include "passes/fold_constants.h"

namespace kiln::passes {

std::vector<int> ReadCounts(const ir::Graph& g) {
  std::vector<int> reads(g.values.size(), 0);
  for (int v : g.outputs) ++reads[v];
  for (const auto& n : g.nodes) {
    for (int v : n.inputs)
      if (v >= 0) ++reads[v];
    for (int v : n.implicit_inputs)
      if (v >= 0) ++reads[v];
  }
  return reads;
}

std::vector<char> OutputMask(const ir::Graph& g) {
  std::vector<char> out(g.values.size(), 0);
  for (int v : g.outputs) out[v] = 1;
  return out;
}

bool IsDefaultDomain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool IsFixedConstant(const ir::Graph& g, int v) {
  if (v < 0 || !g.values[v].constant) return false;
  for (int i : g.inputs)
    if (i == v) return false;
  return true;
}

bool IsRemovableWhenUnread(const ir::Node& n) {
  return IsFoldable(n) || n.op_type == "Dropout" || n.op_type.rfind("Random", 0) == 0;
}

void ForEachSubgraph(ir::Node& n, const std::function<void(ir::Graph&)>& f) {
  for (auto& [k, a] : n.attrs) {
    if (a.g) f(*a.g);
    for (auto& sg : a.graphs) f(*sg);
  }
}

void ForEachSubgraph(const ir::Node& n, const std::function<void(const ir::Graph&)>& f) {
  for (const auto& [k, a] : n.attrs) {
    if (a.g) f(*a.g);
    for (const auto& sg : a.graphs) f(*sg);
  }
}

ValueRewirer::ValueRewirer(const ir::Graph& g) : to_(g.values.size()) {
  for (size_t v = 0; v < to_.size(); ++v) to_[v] = static_cast<int>(v);
}

int ValueRewirer::Find(int v) {
  if (v < 0) return v;
  int r = v;
  while (to_[r] != r) r = to_[r];
  while (to_[v] != r) {  // path compression
    int next = to_[v];
    to_[v] = r;
    v = next;
  }
  return r;
}

void ValueRewirer::Merge(int from, int to) {
  int a = Find(from), b = Find(to);
  if (a == b) return;
  to_[a] = b;
  ++merges_;
}

void ValueRewirer::Apply(ir::Graph& g, bool outputs) {
  if (merges_ == 0) return;
  for (auto& n : g.nodes) {
    for (int& v : n.inputs) v = Find(v);
    for (int& v : n.implicit_inputs) v = Find(v);
    ForEachSubgraph(n, [&](ir::Graph& sg) {
      for (auto& c : sg.captures) c.second = Find(c.second);
    });
  }
  if (outputs)
    for (int& v : g.outputs) v = Find(v);
}

void RetargetOutput(ir::Graph& g, int n, int slot, int v, ValueRewirer& rewire) {
  int old = g.nodes[n].outputs[slot];
  KILN_CHECK(old >= 0 && old != v, "retargeting an absent output");
  g.nodes[n].outputs[slot] = v;
  g.values[old].producer = -1;
  g.values[v].producer = n;
  rewire.Merge(old, v);
}

void CompactNodes(ir::Graph& g, const std::vector<char>& keep) {
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (auto& v : g.values) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    for (int v : g.nodes[i].outputs)
      if (v >= 0) g.values[v].producer = static_cast<int>(nodes.size());
    nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
}

int MarkDeadNodes(const ir::Graph& g, std::vector<char>& keep) {
  std::vector<int> reads = ReadCounts(g);
  int marked = 0;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    if (keep[i]) {
      bool used = false;
      for (int v : n.outputs) used = used || (v >= 0 && reads[v] > 0);
      if (used || !IsRemovableWhenUnread(n)) continue;
      keep[i] = 0;
      ++marked;
    }
    for (int v : n.inputs)
      if (v >= 0) --reads[v];
    for (int v : n.implicit_inputs)
      if (v >= 0) --reads[v];
  }
  return marked;
}

std::string UniqueValueName(const ir::Graph& g, const std::string& base) {
  std::unordered_set<std::string> names;
  for (const auto& v : g.values) names.insert(v.name);
  if (!names.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string s = base + "_" + std::to_string(k);
    if (!names.count(s)) return s;
  }
}

int AddConstant(ir::Graph& g, const std::string& base, Tensor t) {
  const int v = g.AddValue(UniqueValueName(g, base), ir::TypeInfo::Tensor(t.dtype(), t.dims()));
  g.values[v].constant = std::move(t);
  return v;
}

std::optional<float> ScalarFloatConstant(const ir::Graph& g, int v) {
  if (v < 0 || !IsFixedConstant(g, v)) return std::nullopt;
  const Tensor& t = *g.values[v].constant;
  if (t.kind() != Tensor::Kind::kTensor || t.dtype() != DType::kFloat32 || t.size() != 1)
    return std::nullopt;
  return t.data<float>()[0];
}

const Tensor* VectorFloatInput(const ir::Graph& g, const ir::Node& n, size_t i, int64_t count) {
  if (i >= n.inputs.size() || n.inputs[i] < 0 || !IsFixedConstant(g, n.inputs[i])) return nullptr;
  const Tensor& t = *g.values[n.inputs[i]].constant;
  if (t.kind() != Tensor::Kind::kTensor || t.dtype() != DType::kFloat32 || t.dims() != Dims{count})
    return nullptr;
  return &t;
}

bool IsOnnxBinary(const ir::Node& n, const char* op) {
  return (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == op && n.inputs.size() == 2 &&
         n.inputs[0] >= 0 && n.inputs[1] >= 0 && n.outputs.size() == 1 && n.outputs[0] >= 0;
}

int OtherOperand(const ir::Node& n, int v) {
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return -1;
}

bool Near(std::optional<float> c, double want) {
  return c && std::fabs(*c - want) <= 1e-5 * std::fabs(want);
}

bool ClipBounds(const ir::Graph& g, const ir::Node& clip, int64_t opset, float* lo, float* hi) {
  if ((!clip.domain.empty() && clip.domain != "ai.onnx") || clip.op_type != "Clip" ||
      clip.inputs.empty() || clip.inputs[0] < 0)
    return false;
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (opset < 11) {
    if (clip.inputs.size() != 1) return false;
    *lo = clip.attr_float("min", *lo);
    *hi = clip.attr_float("max", *hi);
    return true;
  }
  for (size_t i = 1; i < clip.inputs.size() && i < 3; ++i) {
    if (clip.inputs[i] < 0) continue;
    std::optional<float> c = ScalarFloatConstant(g, clip.inputs[i]);
    if (!c) return false;
    (i == 1 ? *lo : *hi) = *c;
  }
  return clip.inputs.size() <= 3;
}

Expected<bool> VerifiedChange(const ir::Graph& g, bool changed) {
  KILN_RETURN_IF_ERROR(ir::Verify(g));
  return changed;
}

bool ChainIsFree(const std::vector<char>& keep, const std::vector<int>& gone, int last) {
  if (!keep[last]) return false;
  for (int n : gone)
    if (!keep[n]) return false;
  return true;
}

void ReplaceChain(ir::Graph& g, std::vector<char>& keep, const std::vector<int>& gone, int last,
                  ir::Node fused) {
  fused.name = g.nodes[last].name;
  fused.outputs = {g.nodes[last].outputs[0]};
  for (int n : gone) {
    if (n == last) continue;
    keep[n] = 0;
    for (int v : g.nodes[n].outputs)
      if (v >= 0) g.values[v].producer = -1;
  }
  g.nodes[last] = std::move(fused);
}

bool ReplaceChainWithUnary(ir::Graph& g, std::vector<char>& keep, const std::vector<int>& gone,
                           int last, int x, const std::string& op, const std::string& domain) {
  if (!ChainIsFree(keep, gone, last)) return false;
  ir::Node fused;
  fused.op_type = op;
  fused.domain = domain;
  fused.inputs = {x};
  ReplaceChain(g, keep, gone, last, std::move(fused));
  return true;
}

int SwishMul(const ir::Graph& g, int v, const ValueReaders& r) {
  if (v < 0 || r.reads[v] != 2 || r.is_output[v] || r.nodes[v].size() != 2) return -1;
  for (int k = 0; k < 2; ++k) {
    const ir::Node& sig = g.nodes[r.nodes[v][k]];
    const int mul = r.nodes[v][1 - k];
    const ir::Node& m = g.nodes[mul];
    if (sig.op_type != "Sigmoid" || !IsDefaultDomain(sig) || sig.outputs.size() != 1 ||
        m.op_type != "Mul" || !IsDefaultDomain(m) || m.inputs.size() != 2 ||
        m.outputs.size() != 1 || m.outputs[0] < 0)
      continue;
    const int s = sig.outputs[0];
    if (r.Sole(s) != mul) continue;
    if ((m.inputs[0] == v && m.inputs[1] == s) || (m.inputs[0] == s && m.inputs[1] == v))
      return mul;
  }
  return -1;
}

bool FuseEachNode(ir::Graph& g, const FuseAtFn& fuse_at) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = FuseEachNode(sg, fuse_at) || changed; });
  const ValueReaders readers(g);
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i] && fuse_at(g, readers, keep, static_cast<int>(i))) changed = true;
  CompactNodes(g, keep);
  return changed;
}

ValueReaders::ValueReaders(const ir::Graph& g)
    : reads(ReadCounts(g)), is_output(OutputMask(g)), nodes(g.values.size()) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0 && (nodes[v].empty() || nodes[v].back() != static_cast<int>(i)))
        nodes[v].push_back(static_cast<int>(i));
}

int ValueReaders::Sole(int v) const {
  if (v < 0 || reads[v] != 1 || is_output[v] || nodes[v].size() != 1) return -1;
  return nodes[v][0];
}

}  // namespace kiln::passes
