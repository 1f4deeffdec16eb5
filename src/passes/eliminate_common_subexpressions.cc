#include "passes/eliminate_common_subexpressions.h"

#include <bit>
#include <cstring>
#include <map>
#include <unordered_map>

#include "passes/fold_constants.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

uint64_t Mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t HashBytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t HashTensor(const Tensor& t) {
  uint64_t h = Mix(static_cast<uint64_t>(t.kind()), static_cast<uint64_t>(t.dtype()));
  for (int64_t d : t.dims()) h = Mix(h, static_cast<uint64_t>(d));
  if (t.is_string())
    for (int64_t i = 0; i < t.size(); ++i)
      h = Mix(h, HashBytes(t.strings()[i].data(), t.strings()[i].size()));
  else if (t.kind() == Tensor::Kind::kTensor && t.raw())
    h = Mix(h, HashBytes(t.raw(), t.nbytes()));
  return h;
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.kind() != Tensor::Kind::kTensor) return false;  // sequences: not worth comparing
  return a.SameContents(b);
}

template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

bool SameAttribute(const ir::Attribute& a, const ir::Attribute& b) {
  using K = ir::Attribute::Kind;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kFloat:
      return std::bit_cast<uint32_t>(a.f) == std::bit_cast<uint32_t>(b.f);
    case K::kInt:
      return a.i == b.i;
    case K::kString:
      return a.s == b.s;
    case K::kTensor:
      return SameTensor(a.t, b.t);
    case K::kFloats:
      return SameBits(a.floats, b.floats);
    case K::kInts:
      return a.ints == b.ints;
    case K::kStrings:
      return a.strings == b.strings;
    case K::kTensors:
      if (a.tensors.size() != b.tensors.size()) return false;
      for (size_t i = 0; i < a.tensors.size(); ++i)
        if (!SameTensor(a.tensors[i], b.tensors[i])) return false;
      return true;
    default:
      return false;  // graphs (never compared) and undefined
  }
}

uint64_t HashAttribute(const ir::Attribute& a) {
  using K = ir::Attribute::Kind;
  uint64_t h = static_cast<uint64_t>(a.kind);
  switch (a.kind) {
    case K::kFloat:
      return Mix(h, std::bit_cast<uint32_t>(a.f));
    case K::kInt:
      return Mix(h, static_cast<uint64_t>(a.i));
    case K::kString:
      return Mix(h, std::hash<std::string>()(a.s));
    case K::kTensor:
      return Mix(h, HashTensor(a.t));
    case K::kFloats:
      return Mix(h, HashBytes(a.floats.data(), a.floats.size() * sizeof(float)));
    case K::kInts:
      return Mix(h, HashBytes(a.ints.data(), a.ints.size() * sizeof(int64_t)));
    case K::kStrings:
      for (const auto& s : a.strings) h = Mix(h, std::hash<std::string>()(s));
      return h;
    case K::kTensors:
      for (const auto& t : a.tensors) h = Mix(h, HashTensor(t));
      return h;
    default:
      return h;
  }
}

bool Candidate(const ir::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx" && n.domain != "ai.onnx.ml") return false;
  if (!IsFoldable(n)) return false;  // subgraphs, random draws, Dropout
  for (int v : n.outputs)
    if (v >= 0) return true;
  return false;
}

// The same-value classes of g's inputs-to-be-compared: equal constants and captures of one
// outer value map to their first occurrence.
std::vector<int> ConstantClasses(const ir::Graph& g) {
  std::vector<int> canon(g.values.size());
  for (size_t v = 0; v < canon.size(); ++v) canon[v] = static_cast<int>(v);
  std::unordered_map<uint64_t, std::vector<int>> seen;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!IsFixedConstant(g, static_cast<int>(v))) continue;
    const Tensor& t = *g.values[v].constant;
    if (t.kind() != Tensor::Kind::kTensor) continue;
    auto& bucket = seen[HashTensor(t)];
    for (int o : bucket)
      if (SameTensor(*g.values[o].constant, t)) {
        canon[v] = o;
        break;
      }
    if (canon[v] == static_cast<int>(v)) bucket.push_back(static_cast<int>(v));
  }
  std::map<int, int> by_outer;
  for (auto [local, outer] : g.captures) {
    auto [it, fresh] = by_outer.emplace(outer, local);
    if (!fresh) canon[local] = it->second;
  }
  return canon;
}

bool CseGraph(ir::Graph& g, bool main) {
  bool changed = false;
  for (auto& n : g.nodes)
    ForEachSubgraph(n, [&](ir::Graph& sg) { changed = CseGraph(sg, false) || changed; });
  const std::vector<int> canon = ConstantClasses(g);
  const std::vector<char> is_output = OutputMask(g);
  ValueRewirer rewire(g);
  auto same_input = [&](int v) { return v < 0 ? v : canon[rewire.Find(v)]; };
  auto same_nodes = [&](const ir::Node& a, const ir::Node& b) {
    if (a.op_type != b.op_type || a.domain != b.domain || a.inputs.size() != b.inputs.size() ||
        a.outputs.size() != b.outputs.size() || a.attrs.size() != b.attrs.size())
      return false;
    for (size_t i = 0; i < a.inputs.size(); ++i)
      if (same_input(a.inputs[i]) != same_input(b.inputs[i])) return false;
    for (size_t i = 0; i < a.outputs.size(); ++i)
      if ((a.outputs[i] < 0) != (b.outputs[i] < 0)) return false;
    for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
      if (ia->first != ib->first || !SameAttribute(ia->second, ib->second)) return false;
    return true;
  };
  std::unordered_map<uint64_t, std::vector<int>> table;  // hash -> earlier nodes
  std::vector<char> keep(g.nodes.size(), 1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!Candidate(n)) continue;
    uint64_t h = Mix(std::hash<std::string>()(n.op_type), std::hash<std::string>()(n.domain));
    for (int v : n.inputs) h = Mix(h, static_cast<uint64_t>(same_input(v) + 1));
    for (int v : n.outputs) h = Mix(h, v < 0 ? 0 : 1);
    for (const auto& [k, a] : n.attrs)
      h = Mix(Mix(h, std::hash<std::string>()(k)), HashAttribute(a));
    auto& bucket = table[h];
    int first = -1;
    for (int e : bucket)
      if (same_nodes(g.nodes[e], n)) {
        first = e;
        break;
      }
    if (first < 0) {
      bucket.push_back(static_cast<int>(i));
      continue;
    }
    bool writes_output = false;
    for (int v : n.outputs) writes_output = writes_output || (v >= 0 && main && is_output[v]);
    if (writes_output) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] >= 0) rewire.Merge(n.outputs[k], g.nodes[first].outputs[k]);
    keep[i] = 0;
    changed = true;
  }
  rewire.Apply(g, !main);
  CompactNodes(g, keep);
  return changed;
}

}  // namespace

Expected<bool> EliminateCommonSubexpressions(ir::Model& model) {
  return VerifiedChange(*model.graph, CseGraph(*model.graph, true));
}

}  // namespace kiln::passes
