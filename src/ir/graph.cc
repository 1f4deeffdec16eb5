#include "ir/graph.h"

#include <sstream>

namespace kiln::ir {

bool TypeInfo::shape_known() const {
  if (kind != Kind::kTensor || !has_shape) return false;
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
}

std::string TypeInfo::ToString() const {
  if (kind == Kind::kSequence) return "seq(" + (elem ? elem->ToString() : "?") + ")";
  if (kind == Kind::kOptional) return "optional(" + (elem ? elem->ToString() : "?") + ")";
  std::string s(DTypeName(dtype));
  if (!has_shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i] >= 0)
      s += std::to_string(dims[i]);
    else if (i < symbols.size() && !symbols[i].empty())
      s += symbols[i];
    else
      s += "?";
  }
  return s + "]";
}

TypeInfo TypeInfo::Tensor(DType t, Dims d) {
  TypeInfo ti;
  ti.dtype = t;
  ti.has_shape = true;
  ti.symbols.assign(d.size(), "");
  ti.dims = std::move(d);
  return ti;
}

TypeInfo TypeInfo::Of(const kiln::Tensor& value) {
  if (value.is_sequence()) {
    TypeInfo t;
    t.kind = Kind::kSequence;
    t.dtype = value.dtype();
    t.elem = std::make_shared<TypeInfo>();
    t.elem->dtype = value.dtype();
    if (!value.items().empty()) *t.elem = Of(value.items()[0]);
    return t;
  }
  if (value.is_none()) {
    TypeInfo t;
    t.kind = Kind::kOptional;
    return t;
  }
  return Tensor(value.dtype(), value.dims());
}

std::string Attribute::ToString() const {
  std::ostringstream os;
  auto list = [&](const auto& v) {
    os << "[";
    for (size_t k = 0; k < v.size(); ++k) os << (k ? "," : "") << v[k];
    os << "]";
  };
  switch (kind) {
    case Kind::kFloat:
      os << f;
      break;
    case Kind::kInt:
      os << i;
      break;
    case Kind::kString:
      os << '"' << s << '"';
      break;
    case Kind::kTensor:
      os << "tensor " << DTypeName(t.dtype()) << DimsToString(t.dims());
      break;
    case Kind::kGraph:
      os << "graph";
      break;
    case Kind::kFloats:
      list(floats);
      break;
    case Kind::kInts:
      list(ints);
      break;
    case Kind::kStrings:
      list(strings);
      break;
    case Kind::kTensors:
      os << tensors.size() << " tensors";
      break;
    case Kind::kGraphs:
      os << graphs.size() << " graphs";
      break;
    default:
      os << "?";
  }
  return os.str();
}

Attribute Attribute::Int(int64_t v) {
  Attribute a;
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}
Attribute Attribute::Float(float v) {
  Attribute a;
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}
Attribute Attribute::String(std::string v) {
  Attribute a;
  a.kind = Kind::kString;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::Ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::Floats(std::vector<float> v) {
  Attribute a;
  a.kind = Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

int64_t Node::attr_int(const std::string& key, int64_t def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kInt ? a->i : def;
}
float Node::attr_float(const std::string& key, float def) const {
  const Attribute* a = attr(key);
  if (a && a->kind == Attribute::Kind::kFloat) return a->f;
  if (a && a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  return def;
}
std::string Node::attr_string(const std::string& key, const std::string& def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kString ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& key, std::vector<int64_t> def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& key, std::vector<float> def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kFloats ? a->floats : def;
}

std::string Node::Label(const Graph& g) const {
  if (!name.empty()) return "node '" + name + "' (" + op_type + ")";
  for (int o : outputs)
    if (o >= 0) return op_type + " node producing '" + g.values[o].name + "'";
  return op_type + " node";
}

int Graph::AddValue(std::string n, TypeInfo type) {
  Value v;
  v.name = std::move(n);
  v.type = std::move(type);
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

std::vector<int> Graph::RuntimeInputs() const {
  std::vector<int> r;
  for (int v : inputs)
    if (!values[v].constant) r.push_back(v);
  return r;
}

Expected<std::vector<int>> Graph::TopologicalOrder() const {
  // Kahn's algorithm over value producers: linear in nodes + edges.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> consumers(values.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int v : nodes[n].inputs) {
      if (v < 0 || values[v].producer < 0) continue;
      ++pending[n];
      consumers[v].push_back(static_cast<int>(n));
    }
  }
  std::vector<int> order, ready;
  for (size_t n = nodes.size(); n-- > 0;)
    if (pending[n] == 0) ready.push_back(static_cast<int>(n));
  while (!ready.empty()) {
    int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (int o : nodes[n].outputs) {
      if (o < 0) continue;
      for (int c : consumers[o])
        if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (order.size() != nodes.size()) {
    for (size_t n = 0; n < nodes.size(); ++n)
      if (pending[n] > 0) return Error("graph has a cycle through " + nodes[n].Label(*this));
  }
  return order;
}

int64_t Model::OpsetFor(const std::string& domain) const {
  auto it = opsets.find(domain);
  if (it != opsets.end()) return it->second;
  if (domain.empty()) {
    auto it2 = opsets.find("ai.onnx");
    if (it2 != opsets.end()) return it2->second;
  }
  return domain.empty() ? 1 : 1;
}

Status Verify(const Graph& g) {
  const int nv = static_cast<int>(g.values.size());
  std::vector<int> produced_at(nv, -1);
  std::vector<char> available(nv, 0);
  for (int v : g.inputs) {
    if (v < 0 || v >= nv) return Error("graph input index out of range");
    available[v] = 1;
  }
  for (int v = 0; v < nv; ++v)
    if (g.values[v].constant) available[v] = 1;
  for (auto [local, outer] : g.captures) {
    if (local < 0 || local >= nv) return Error("capture index out of range");
    available[local] = 1;
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (int v : node.inputs) {
      if (v == -1) continue;
      if (v < -1 || v >= nv) return Error(node.Label(g) + ": input index out of range");
      if (!available[v]) {
        if (g.values[v].producer >= 0)
          return Error(
              node.Label(g) + ": input '" + g.values[v].name +
              "' is produced later (the graph is not topologically sorted or has a cycle)");
        return Error(node.Label(g) + ": input '" + g.values[v].name + "' is never produced");
      }
    }
    for (int v : node.outputs) {
      if (v == -1) continue;
      if (v < -1 || v >= nv) return Error(node.Label(g) + ": output index out of range");
      if (available[v])
        return Error(node.Label(g) + ": output '" + g.values[v].name + "' is defined twice");
      available[v] = 1;
      produced_at[v] = static_cast<int>(n);
    }
    for (const auto& [key, a] : node.attrs) {
      if (a.g) KILN_RETURN_IF_ERROR(Verify(*a.g).Context(node.Label(g) + " attribute " + key));
      for (const auto& sg : a.graphs)
        KILN_RETURN_IF_ERROR(Verify(*sg).Context(node.Label(g) + " attribute " + key));
    }
  }
  for (int v : g.outputs) {
    if (v < 0 || v >= nv) return Error("graph output index out of range");
    if (!available[v]) return Error("graph output '" + g.values[v].name + "' is never produced");
  }
  return OkStatus();
}

std::string PrintGraph(const Graph& g, int indent) {
  std::ostringstream os;
  std::string pad(indent, ' ');
  auto vname = [&](int v) { return v < 0 ? std::string("<none>") : "%" + g.values[v].name; };
  os << pad << "graph " << g.name << " (";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    os << (i ? ", " : "") << vname(g.inputs[i]) << ": " << g.values[g.inputs[i]].type.ToString();
  os << ")\n";
  for (auto [local, outer] : g.captures) os << pad << "  capture " << vname(local) << "\n";
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    if (val.constant)
      os << pad << "  const %" << val.name << ": " << DTypeName(val.constant->dtype())
         << DimsToString(val.constant->dims()) << "\n";
  }
  for (const Node& n : g.nodes) {
    os << pad << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      os << (i ? ", " : "") << vname(n.outputs[i]);
      if (n.outputs[i] >= 0) os << ": " << g.values[n.outputs[i]].type.ToString();
    }
    os << " = " << (n.domain.empty() ? "" : n.domain + ".") << n.op_type << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << vname(n.inputs[i]);
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs) {
        os << (first ? "" : ", ") << k << "=" << a.ToString();
        first = false;
      }
      os << "}";
    }
    if (!n.name.empty()) os << "  # " << n.name;
    os << "\n";
    for (const auto& [k, a] : n.attrs) {
      if (a.g) os << PrintGraph(*a.g, indent + 4);
      for (const auto& sg : a.graphs) os << PrintGraph(*sg, indent + 4);
    }
  }
  os << pad << "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << vname(g.outputs[i]);
  os << "\n";
  return os.str();
}

std::string PrintModel(const Model& m) {
  std::ostringstream os;
  os << "model ir_version=" << m.ir_version << " producer=" << m.producer_name << " opsets={";
  bool first = true;
  for (const auto& [d, v] : m.opsets) {
    os << (first ? "" : ", ") << (d.empty() ? "ai.onnx" : d) << ":" << v;
    first = false;
  }
  os << "}\n";
  if (m.graph) os << PrintGraph(*m.graph, 0);
  return os.str();
}

std::shared_ptr<Graph> CloneGraph(const Graph& g, const Graph* parent) {
  auto c = std::make_shared<Graph>(g);
  c->parent = parent;
  for (auto& n : c->nodes)
    for (auto& [k, a] : n.attrs) {
      if (a.g) a.g = CloneGraph(*a.g, c.get());
      for (auto& sg : a.graphs) sg = CloneGraph(*sg, c.get());
    }
  return c;
}

Model CloneModel(const Model& m) {
  Model c = m;
  if (m.graph) c.graph = CloneGraph(*m.graph);
  return c;
}

}  // namespace kiln::ir
