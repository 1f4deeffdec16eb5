#include "frontend/onnx_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "frontend/onnx_proto.h"
#include "ir/small_float.h"
#include "ir/subbyte.h"
// After onnx_proto.h: it needs the ONNX_API macro that onnx_pb.h defines.
#include <onnx/onnx-data.pb.h>

#include "support/file_io.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

// Element bytes for the fixed-width types, 0 otherwise.
size_t ElemSize(DType t) { return DTypeSize(t); }

Status CheckDims(const onnx::TensorProto& tp, Dims* dims, const std::string& label) {
  dims->clear();
  int64_t n = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0) return Error(label + ": negative dimension " + std::to_string(d));
    if (d > 0 && n > (int64_t{1} << 40) / d) return Error(label + ": tensor is too large");
    n *= d;
    dims->push_back(d);
  }
  return OkStatus();
}

// Resolves an external data location inside base_dir; rejects absolute paths and escapes.
Expected<std::string> ConfinedPath(const std::string& base_dir, const std::string& location,
                                   const std::string& label) {
  fs::path rel(location);
  if (location.empty() || rel.is_absolute())
    return Error(label + ": external data location '" + location + "' must be a relative path");
  fs::path norm = rel.lexically_normal();
  if (!norm.empty() && (*norm.begin() == ".."))
    return Error(label + ": external data location '" + location + "' leaves the model folder");
  return (fs::path(base_dir) / norm).string();
}

// A string tensor: its values in string_data only.
Expected<Tensor> StringTensor(const onnx::TensorProto& tp, const std::string& name) {
  Dims dims;
  KILN_RETURN_IF_ERROR(CheckDims(tp, &dims, name));
  if (tp.has_raw_data() || tp.data_location() == onnx::TensorProto::EXTERNAL)
    return Error(name + ": a string tensor keeps its values in string_data, not raw or external");
  if (tp.string_data_size() != NumElements(dims))
    return Error(name + ": has " + std::to_string(tp.string_data_size()) + " strings, expected " +
                 std::to_string(NumElements(dims)));
  Tensor t(DType::kString, dims);
  std::copy(tp.string_data().begin(), tp.string_data().end(), t.strings());
  return t;
}

// A tensor of a sub-byte type (int4, uint4, ...): packed in the file, held one element per byte.
Expected<Tensor> SubByteTensor(const onnx::TensorProto& tp, DType dt, const Dims& dims,
                               const std::string& base_dir, const std::string& label,
                               const std::string& name) {
  const int64_t packed_bytes = PackedBytes(dt, NumElements(dims));
  // (The bytes are checked before the tensor is allocated: a header may claim dims that the
  // data lacks.)
  if (tp.has_raw_data()) {
    if (static_cast<int64_t>(tp.raw_data().size()) != packed_bytes)
      return Error(name + ": raw_data has " + std::to_string(tp.raw_data().size()) +
                   " bytes, expected " + std::to_string(packed_bytes) + " for " +
                   DimsToString(dims));
    Tensor t(dt, dims);
    UnpackSubByte(dt, reinterpret_cast<const uint8_t*>(tp.raw_data().data()), t.size(),
                  t.data<uint8_t>());
    return t;
  }
  // External data or one packed byte per int32_data value: read as that many UINT8 (the copy
  // of the proto holds no raw bytes).
  onnx::TensorProto bytes(tp);
  bytes.set_data_type(onnx::TensorProto::UINT8);
  bytes.clear_dims();
  bytes.add_dims(packed_bytes);
  KILN_ASSIGN_OR_RETURN(Tensor packed, TensorFromProto(bytes, base_dir, label, nullptr));
  Tensor t(dt, dims);
  UnpackSubByte(dt, packed.data<uint8_t>(), t.size(), t.data<uint8_t>());
  return t;
}

// A tensor whose nbytes are in a file beside the model: mapped, and borrowed where aligned.
Expected<Tensor> ExternalTensor(const onnx::TensorProto& tp, DType dt, const Dims& dims,
                                size_t nbytes, const std::string& base_dir,
                                const std::string& name) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    try {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::stoll(kv.value());
      else if (kv.key() == "length")
        length = std::stoll(kv.value());
    } catch (...) {
      return Error(name + ": bad external data field '" + kv.key() + "'");
    }
  }
  if (base_dir.empty()) return Error(name + ": external data needs the model's folder");
  KILN_ASSIGN_OR_RETURN(std::string path, ConfinedPath(base_dir, location, name));
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  if (length < 0) length = static_cast<int64_t>(nbytes);
  if (offset < 0 || static_cast<uint64_t>(length) != nbytes ||
      static_cast<uint64_t>(offset) + nbytes > file->size())
    return Error(name + ": external data range [" + std::to_string(offset) + ", +" +
                 std::to_string(length) + ") does not fit " + location + " (" +
                 std::to_string(file->size()) + " bytes) or the tensor's " +
                 std::to_string(nbytes) + " bytes");
  const uint8_t* p = file->data() + offset;
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0) {
    // Borrow: aligned bytes stay in the mapping, kept alive by the tensor.
    return Tensor::View(dt, dims, const_cast<uint8_t*>(p), file);
  }
  return Tensor::Copy(dt, dims, p);
}

// A tensor in the proto's typed value fields (float_data, int32_data, ...).
Expected<Tensor> TypedValuesTensor(const onnx::TensorProto& tp, DType dt, const Dims& dims,
                                   const std::string& name) {
  const int64_t n = NumElements(dims);
  const size_t esize = ElemSize(dt);
  const size_t nbytes = static_cast<size_t>(n) * esize;
  // Count the typed values before allocating: a header may claim dims that the data lacks.
  int64_t have;
  switch (dt) {
    case DType::kFloat32:
      have = tp.float_data_size();
      break;
    case DType::kFloat64:
      have = tp.double_data_size();
      break;
    case DType::kInt64:
      have = tp.int64_data_size();
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      have = tp.uint64_data_size();
      break;
    default:
      have = tp.int32_data_size();
      break;
  }
  if (have != n)
    return Error(name + ": has " + std::to_string(have) + " values, expected " + std::to_string(n));
  Tensor t(dt, dims);
  // (An empty repeated field has a null data(): memcpy must not see it.)
  switch (dt) {
    case DType::kFloat32:
      if (nbytes > 0) std::memcpy(t.raw(), tp.float_data().data(), nbytes);
      break;
    case DType::kFloat64:
      if (nbytes > 0) std::memcpy(t.raw(), tp.double_data().data(), nbytes);
      break;
    case DType::kInt64:
      if (nbytes > 0) std::memcpy(t.raw(), tp.int64_data().data(), nbytes);
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      for (int64_t i = 0; i < n; ++i) {
        if (dt == DType::kUInt32)
          t.data<uint32_t>()[i] = static_cast<uint32_t>(tp.uint64_data(i));
        else
          t.data<uint64_t>()[i] = tp.uint64_data(i);
      }
      break;
    default: {  // int32_data holds int32, int16, int8, uint16, uint8, bool, float16, bfloat16
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = tp.int32_data(i);
        switch (esize) {
          case 1:
            t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
            break;
          case 2:
            t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
            break;
          case 4:
            t.data<int32_t>()[i] = v;
            break;
        }
      }
    }
  }
  return t;
}

}  // namespace

Expected<Tensor> TensorFromProto(const onnx::TensorProto& tp, const std::string& base_dir,
                                 const std::string& label, std::string* take_raw) {
  std::string name = label + (tp.name().empty() ? "" : " tensor '" + tp.name() + "'");
  DType dt = static_cast<DType>(tp.data_type());
  if (tp.data_type() == onnx::TensorProto::STRING) return StringTensor(tp, name);
  if (!IsSupportedDType(dt) && !IsSmallFloatDType(dt) && !IsSubByteDType(dt))
    return Error(name + ": unsupported data type " + std::to_string(tp.data_type()) + " (" +
                 std::string(DTypeName(dt)) + ")");
  Dims dims;
  KILN_RETURN_IF_ERROR(CheckDims(tp, &dims, name));
  if (IsSubByteDType(dt)) return SubByteTensor(tp, dt, dims, base_dir, label, name);
  const size_t nbytes = static_cast<size_t>(NumElements(dims)) * ElemSize(dt);
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    return ExternalTensor(tp, dt, dims, nbytes, base_dir, name);
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      return Error(name + ": raw_data has " + std::to_string(tp.raw_data().size()) +
                   " bytes, expected " + std::to_string(nbytes) + " for " + DimsToString(dims));
    if (take_raw && nbytes > 0 && reinterpret_cast<uintptr_t>(take_raw->data()) % 16 == 0) {
      auto owner = std::make_shared<std::string>(std::move(*take_raw));
      return Tensor::View(dt, dims, owner->data(), owner);
    }
    return Tensor::Copy(dt, dims, tp.raw_data().data());
  }
  return TypedValuesTensor(tp, dt, dims, name);
}

namespace {

Expected<ir::TypeInfo> TypeFromProto(const onnx::TypeProto& tp, const std::string& label) {
  ir::TypeInfo ti;
  if (tp.has_tensor_type()) {
    const auto& tt = tp.tensor_type();
    ti.dtype = static_cast<DType>(tt.elem_type());
    if (tt.has_shape()) {
      ti.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          if (d.dim_value() < 0) return Error(label + ": negative dimension in type");
          ti.dims.push_back(d.dim_value());
          ti.symbols.push_back("");
        } else {
          ti.dims.push_back(-1);
          ti.symbols.push_back(d.dim_param());
        }
      }
    }
  } else if (tp.has_sequence_type()) {
    ti.kind = ir::TypeInfo::Kind::kSequence;
    KILN_ASSIGN_OR_RETURN(auto e, TypeFromProto(tp.sequence_type().elem_type(), label));
    ti.elem = std::make_shared<ir::TypeInfo>(std::move(e));
  } else if (tp.has_optional_type()) {
    ti.kind = ir::TypeInfo::Kind::kOptional;
    KILN_ASSIGN_OR_RETURN(auto e, TypeFromProto(tp.optional_type().elem_type(), label));
    ti.elem = std::make_shared<ir::TypeInfo>(std::move(e));
  }
  return ti;
}

struct Importer {
  const onnx::ModelProto& model;
  std::string base_dir;
  std::string label;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions;

  // Names inside an inlined body get a prefix unique to the call: the caller's first output.
  template <class Map>
  static std::string InlinePrefix(const onnx::FunctionProto& fn, const onnx::NodeProto& np,
                                  const Map& mapped) {
    for (const auto& o : np.output())
      if (!o.empty()) return mapped(o) + "/" + fn.name() + "/";
    return fn.name() + "/";
  }

  using Renames = std::unordered_map<std::string, std::string>;

  // A name as seen by the caller: renamed when inside an inlined function body.
  static std::string Mapped(const Renames* rename, const std::string& n) {
    if (!rename || n.empty()) return n;
    auto it = rename->find(n);
    return it == rename->end() ? n : it->second;
  }

  // The model-local function a node calls, or nullptr.
  const onnx::FunctionProto* FunctionFor(const onnx::NodeProto& np) const {
    auto fit = functions.find({np.domain(), np.op_type()});
    if (fit == functions.end() && (np.domain().empty() || np.domain() == "ai.onnx"))
      fit = functions.find({"ai.onnx", np.op_type()});
    return fit == functions.end() ? nullptr : fit->second;
  }

  // The names inside an inlined call of `fn`: formal inputs/outputs map to the caller's actual
  // names, internal values get a prefix unique to the call (the caller's first output).
  static Renames InlineNames(const onnx::FunctionProto& fn, const onnx::NodeProto& np,
                             const Renames* rename) {
    auto mapped = [&](const std::string& n) { return Mapped(rename, n); };
    Renames inner;
    std::string prefix = InlinePrefix(fn, np, mapped);
    for (int i = 0; i < fn.input_size(); ++i)
      inner[fn.input(i)] = i < np.input_size() ? mapped(np.input(i)) : "";
    for (int i = 0; i < fn.output_size(); ++i)
      inner[fn.output(i)] = i < np.output_size() ? mapped(np.output(i)) : "";
    for (const auto& fnode : fn.node())
      for (const auto& o : fnode.output())
        if (!o.empty() && !inner.count(o)) inner[o] = prefix + o;
    return inner;
  }

  // One name scope per (sub)graph being imported.
  struct Scope {
    ir::Graph* graph;
    Scope* parent;
    std::unordered_map<std::string, int> names;
  };

  // Finds `name` in scope s, capturing it from enclosing scopes if needed; -1 if nowhere.
  int Resolve(Scope& s, const std::string& name) {
    auto it = s.names.find(name);
    if (it != s.names.end()) return it->second;
    if (!s.parent) return -1;
    int outer = Resolve(*s.parent, name);
    if (outer < 0) return -1;
    int local = s.graph->AddValue(name, s.parent->graph->values[outer].type);
    s.graph->captures.push_back({local, outer});
    s.names[name] = local;
    return local;
  }

  Expected<ir::Attribute> ImportAttribute(const onnx::AttributeProto& ap, Scope& s,
                                          const std::string& where) {
    ir::Attribute a;
    using K = ir::Attribute::Kind;
    std::string at = where + " attribute '" + ap.name() + "'";
    int type = ap.type();
    if (type == onnx::AttributeProto::UNDEFINED) {  // very old files omit the type
      if (ap.has_f())
        type = onnx::AttributeProto::FLOAT;
      else if (ap.has_i())
        type = onnx::AttributeProto::INT;
      else if (ap.has_s())
        type = onnx::AttributeProto::STRING;
      else if (ap.has_t())
        type = onnx::AttributeProto::TENSOR;
      else if (ap.has_g())
        type = onnx::AttributeProto::GRAPH;
      else if (ap.floats_size())
        type = onnx::AttributeProto::FLOATS;
      else if (ap.ints_size())
        type = onnx::AttributeProto::INTS;
      else if (ap.strings_size())
        type = onnx::AttributeProto::STRINGS;
      else if (ap.tensors_size())
        type = onnx::AttributeProto::TENSORS;
      else if (ap.graphs_size())
        type = onnx::AttributeProto::GRAPHS;
      else if (ap.has_tp())
        type = onnx::AttributeProto::TYPE_PROTO;
    }
    switch (type) {
      case onnx::AttributeProto::FLOAT:
        a.kind = K::kFloat;
        a.f = ap.f();
        break;
      case onnx::AttributeProto::INT:
        a.kind = K::kInt;
        a.i = ap.i();
        break;
      case onnx::AttributeProto::STRING:
        a.kind = K::kString;
        a.s = ap.s();
        break;
      case onnx::AttributeProto::TENSOR: {
        a.kind = K::kTensor;
        KILN_ASSIGN_OR_RETURN(a.t, TensorFromProto(ap.t(), base_dir, at));
        break;
      }
      case onnx::AttributeProto::GRAPH: {
        a.kind = K::kGraph;
        KILN_ASSIGN_OR_RETURN(a.g, ImportGraph(ap.g(), &s, at));
        break;
      }
      case onnx::AttributeProto::FLOATS:
        a.kind = K::kFloats;
        a.floats.assign(ap.floats().begin(), ap.floats().end());
        break;
      case onnx::AttributeProto::INTS:
        a.kind = K::kInts;
        a.ints.assign(ap.ints().begin(), ap.ints().end());
        break;
      case onnx::AttributeProto::STRINGS:
        a.kind = K::kStrings;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case onnx::AttributeProto::TENSORS:
        a.kind = K::kTensors;
        for (const auto& t : ap.tensors()) {
          KILN_ASSIGN_OR_RETURN(auto tt, TensorFromProto(t, base_dir, at));
          a.tensors.push_back(std::move(tt));
        }
        break;
      case onnx::AttributeProto::GRAPHS:
        a.kind = K::kGraphs;
        for (const auto& g : ap.graphs()) {
          KILN_ASSIGN_OR_RETURN(auto gg, ImportGraph(g, &s, at));
          a.graphs.push_back(std::move(gg));
        }
        break;
      case onnx::AttributeProto::TYPE_PROTO:
      case onnx::AttributeProto::TYPE_PROTOS:
        // Only Optional's 'type' uses these, and only for static typing of an empty optional:
        // the IR has no type-valued attribute, so it is kept as present with no value.
        a.kind = K::kUndefined;
        break;
      default:
        return Error(at + ": unsupported attribute type " + std::to_string(ap.type()));
    }
    return a;
  }

  // Imports one node, inlining it when it calls a model-local function. `rename` maps names used
  // inside an inlined function body to the caller's names; `fattrs` are the caller's attributes.
  Status ImportNode(const onnx::NodeProto& np, Scope& s, const Renames* rename,
                    const google::protobuf::RepeatedPtrField<onnx::AttributeProto>* fattrs,
                    int depth) {
    auto mapped = [&](const std::string& n) { return Mapped(rename, n); };
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    std::string where = "node '" + (np.name().empty() ? np.op_type() : np.name()) + "'";

    if (const onnx::FunctionProto* fp = FunctionFor(np)) {
      if (depth > 32) return Error(where + ": model-local functions nest too deeply (recursion?)");
      const onnx::FunctionProto& fn = *fp;
      Renames inner = InlineNames(fn, np, rename);
      // The caller's attributes, with references into an enclosing function resolved first.
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> call_attrs;
      for (const auto& a : np.attribute()) {
        if (!a.ref_attr_name().empty() && fattrs) {
          for (const auto& fa : *fattrs)
            if (fa.name() == a.ref_attr_name()) {
              auto* c = call_attrs.Add();
              *c = fa;
              c->set_name(a.name());
            }
        } else {
          *call_attrs.Add() = a;
        }
      }
      for (const auto& fnode : fn.node())
        KILN_RETURN_IF_ERROR(ImportNode(fnode, s, &inner, &call_attrs, depth + 1));
      return OkStatus();
    }

    ir::Node node;
    node.name = np.name();
    node.op_type = np.op_type();
    node.domain = domain;
    for (const auto& ap : np.attribute()) {
      if (!ap.ref_attr_name().empty()) {
        // A reference to an attribute of the enclosing function; absent means use the default.
        if (!fattrs) return Error(where + ": attribute reference outside a function");
        const onnx::AttributeProto* found = nullptr;
        for (const auto& fa : *fattrs)
          if (fa.name() == ap.ref_attr_name()) found = &fa;
        if (!found) continue;
        KILN_ASSIGN_OR_RETURN(auto a, ImportAttribute(*found, s, where));
        node.attrs[ap.name()] = std::move(a);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(auto a, ImportAttribute(ap, s, where));
      node.attrs[ap.name()] = std::move(a);
    }
    for (const auto& in : np.input()) {
      std::string n = mapped(in);
      if (n.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      int v = Resolve(s, n);
      if (v < 0) return Error(where + ": input '" + n + "' is not defined");
      node.inputs.push_back(v);
    }
    int index = static_cast<int>(s.graph->nodes.size());
    for (const auto& out : np.output()) {
      std::string n = mapped(out);
      if (n.empty()) {
        node.outputs.push_back(-1);
        continue;
      }
      auto it = s.names.find(n);
      if (it == s.names.end()) return Error(where + ": output '" + n + "' was not declared");
      ir::Value& v = s.graph->values[it->second];
      if (v.producer >= 0 || v.constant)
        return Error(where + ": output '" + n + "' is already defined");
      v.producer = index;
      node.outputs.push_back(it->second);
    }
    // Values the node's subgraphs read from this graph: dependencies for ordering and lifetimes.
    for (const auto& [k, a] : node.attrs) {
      auto add = [&](const ir::Graph& g) {
        for (auto [local, outer] : g.captures) node.implicit_inputs.push_back(outer);
      };
      if (a.g) add(*a.g);
      for (const auto& g : a.graphs) add(*g);
    }
    s.graph->nodes.push_back(std::move(node));
    return OkStatus();
  }

  // Collects every name a node (or an inlined function body) defines, so that values exist
  // before any node refers to them regardless of file order.
  void DeclareOutputs(const onnx::NodeProto& np, Scope& s, const Renames* rename, int depth) {
    const onnx::FunctionProto* fn = FunctionFor(np);
    if (fn && depth <= 32) {
      Renames inner = InlineNames(*fn, np, rename);
      for (const auto& fnode : fn->node()) DeclareOutputs(fnode, s, &inner, depth + 1);
      return;
    }
    for (const auto& o : np.output()) {
      std::string n = Mapped(rename, o);
      if (!n.empty() && !s.names.count(n)) s.names[n] = s.graph->AddValue(n);
    }
  }

  // `owned`: gp itself where the importer may take its initializers' bytes (the main graph).
  Expected<std::shared_ptr<ir::Graph>> ImportGraph(const onnx::GraphProto& gp, Scope* parent,
                                                   const std::string& where,
                                                   onnx::GraphProto* owned = nullptr) {
    auto g = std::make_shared<ir::Graph>();
    g->name = gp.name();
    g->parent = parent ? parent->graph : nullptr;
    Scope s{g.get(), parent, {}};
    std::string gl = where.empty() ? "graph" : where;

    for (int i = 0; i < gp.initializer_size(); ++i) {
      const onnx::TensorProto& init = gp.initializer(i);
      if (s.names.count(init.name()))
        return Error(gl + ": initializer '" + init.name() + "' is defined twice");
      std::string* take = owned && init.has_raw_data()
                              ? owned->mutable_initializer(i)->mutable_raw_data()
                              : nullptr;
      KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(init, base_dir, gl, take));
      int v = g->AddValue(init.name(), ir::TypeInfo::Tensor(t.dtype(), t.dims()));
      g->values[v].constant = std::move(t);
      s.names[init.name()] = v;
    }
    if (gp.sparse_initializer_size() > 0)
      return Error(gl + ": sparse initializers are not supported");
    for (const auto& in : gp.input()) {
      KILN_ASSIGN_OR_RETURN(auto type, TypeFromProto(in.type(), gl + " input '" + in.name() + "'"));
      auto it = s.names.find(in.name());
      int v;
      if (it != s.names.end()) {
        v = it->second;  // an initializer that is also an input: a default the caller may override
      } else {
        v = g->AddValue(in.name(), type);
        s.names[in.name()] = v;
      }
      g->inputs.push_back(v);
    }
    for (const auto& np : gp.node()) DeclareOutputs(np, s, nullptr, 0);
    for (const auto& vi : gp.value_info()) {
      auto it = s.names.find(vi.name());
      if (it == s.names.end() || g->values[it->second].constant) continue;
      KILN_ASSIGN_OR_RETURN(auto type, TypeFromProto(vi.type(), gl + " value '" + vi.name() + "'"));
      g->values[it->second].type = type;
    }
    for (const auto& out : gp.output()) {
      auto it = s.names.find(out.name());
      int v;
      if (it == s.names.end()) {
        v = Resolve(s, out.name());  // a subgraph may return an outer value directly
        if (v < 0) return Error(gl + ": output '" + out.name() + "' is never produced");
      } else {
        v = it->second;
      }
      if (out.has_type() && !g->values[v].constant) {
        KILN_ASSIGN_OR_RETURN(auto type,
                              TypeFromProto(out.type(), gl + " output '" + out.name() + "'"));
        if (type.dtype != DType::kUndefined || type.kind != ir::TypeInfo::Kind::kTensor)
          g->values[v].type = type;
      }
      g->outputs.push_back(v);
    }
    for (const auto& np : gp.node()) KILN_RETURN_IF_ERROR(ImportNode(np, s, nullptr, nullptr, 0));
    KILN_RETURN_IF_ERROR(SortNodes(*g));
    return g;
  }

  // Stable topological sort; files are meant to be sorted, but some are not.
  static Status SortNodes(ir::Graph& g) {
    bool sorted = true;
    std::vector<char> ready(g.values.size(), 0);
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].producer < 0) ready[v] = 1;
    for (const auto& n : g.nodes) {
      for (int v : n.inputs)
        if (v >= 0 && !ready[v]) sorted = false;
      for (int v : n.implicit_inputs)
        if (v >= 0 && !ready[v]) sorted = false;
      for (int v : n.outputs)
        if (v >= 0) ready[v] = 1;
    }
    if (sorted) return OkStatus();
    KILN_ASSIGN_OR_RETURN(auto order, g.TopologicalOrder());
    std::vector<ir::Node> nodes;
    nodes.reserve(order.size());
    for (int n : order) nodes.push_back(std::move(g.nodes[n]));
    g.nodes = std::move(nodes);
    for (size_t n = 0; n < g.nodes.size(); ++n)
      for (int v : g.nodes[n].outputs)
        if (v >= 0) g.values[v].producer = static_cast<int>(n);
    return OkStatus();
  }
};

}  // namespace

Expected<ir::Model> ImportModelProto(onnx::ModelProto& mp, const std::string& base_dir,
                                     const std::string& label) {
  if (!mp.has_graph()) return Error(label + ": model has no graph");
  ir::Model m;
  m.ir_version = mp.ir_version();
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  for (const auto& op : mp.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    m.opsets[d] = op.version();
  }
  if (mp.opset_import_size() == 0) m.opsets[""] = 1;  // IR v1/v2 files predate opset_import
  Importer imp{mp, base_dir, label, {}};
  for (const auto& f : mp.functions()) imp.functions[{f.domain(), f.name()}] = &f;
  KILN_ASSIGN_OR_RETURN(m.graph, imp.ImportGraph(mp.graph(), nullptr, "", mp.mutable_graph()));
  // Before IR version 4 every initializer had to be listed as a graph input too, so there the
  // listing does not make it a default a caller may override (ONNX Runtime reads it so as well):
  // such inputs are constants.
  if (m.ir_version > 0 && m.ir_version < 4) {
    auto& in = m.graph->inputs;
    in.erase(std::remove_if(in.begin(), in.end(),
                            [&](int v) { return m.graph->values[v].constant.has_value(); }),
             in.end());
  }
  Status st = ir::Verify(*m.graph);
  if (!st.ok()) return Error(label + ": " + st.message());
  return m;
}

Expected<ir::Model> ParseOnnxModel(const void* data, size_t size, const std::string& base_dir,
                                   const std::string& label) {
  onnx::ModelProto mp;
  if (size > static_cast<size_t>(INT32_MAX))
    return Error(label + ": larger than 2 GB; store the weights as external data");
  if (!mp.ParseFromArray(data, static_cast<int>(size)))
    return Error(label + ": not a valid ONNX model (protobuf parse failed)");
  return ImportModelProto(mp, base_dir, label);
}

Expected<ir::Model> LoadOnnxModel(const std::string& path) {
  // Read as a stream, not mapped: the file's pages are then not resident beside the parsed
  // proto, whose weights move on into the tensors (ImportModelProto), so the weights are held
  // once at any time.
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  onnx::ModelProto mp;
  Status read = OkStatus();
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    read = Error(path + ": not a regular file");
  else if (st.st_size > INT32_MAX)
    read = Error(path + ": larger than 2 GB; store the weights as external data");
  else if (!mp.ParseFromFileDescriptor(fd))
    read = Error(path + ": not a valid ONNX model (protobuf parse failed)");
  ::close(fd);
  KILN_RETURN_IF_ERROR(read);
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  KILN_ASSIGN_OR_RETURN(auto m, ImportModelProto(mp, dir, path));
  m.source_path = path;
  return m;
}

Expected<Tensor> ParseTensorProto(const void* data, size_t size, const std::string& label) {
  onnx::TensorProto tp;
  if (size > static_cast<size_t>(INT32_MAX) || !tp.ParseFromArray(data, static_cast<int>(size)))
    return Error(label + ": not a valid TensorProto");
  return TensorFromProto(tp, "", label);
}

Expected<Tensor> LoadTensorProtoFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return ParseTensorProto(file->data(), file->size(), path);
}

namespace {

Expected<Tensor> SequenceFromProto(const onnx::SequenceProto& sp, const ir::TypeInfo* type,
                                   const std::string& label, int depth);

// An OptionalProto or SequenceProto element, per its elem_type tag.
Expected<Tensor> OptionalFromProto(const onnx::OptionalProto& op, const ir::TypeInfo* type,
                                   const std::string& label, int depth) {
  const ir::TypeInfo* elem = type && type->elem ? type->elem.get() : nullptr;
  if (op.has_tensor_value()) return TensorFromProto(op.tensor_value(), "", label);
  if (op.has_sequence_value())
    return SequenceFromProto(op.sequence_value(), elem, label, depth + 1);
  if (op.has_optional_value())
    return OptionalFromProto(op.optional_value(), elem, label, depth + 1);
  if (op.has_sparse_tensor_value() || op.has_map_value())
    return Error(label + ": sparse tensor and map values are not supported");
  return Tensor::None();
}

Expected<Tensor> SequenceFromProto(const onnx::SequenceProto& sp, const ir::TypeInfo* type,
                                   const std::string& label, int depth) {
  if (depth > 16) return Error(label + ": values nest too deeply");
  const ir::TypeInfo* elem = type && type->elem ? type->elem.get() : nullptr;
  std::vector<Tensor> items;
  if (sp.sparse_tensor_values_size() > 0 || sp.map_values_size() > 0)
    return Error(label + ": sequences of sparse tensors or maps are not supported");
  for (const auto& t : sp.tensor_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor v, TensorFromProto(t, "", label));
    items.push_back(std::move(v));
  }
  for (const auto& s : sp.sequence_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor v, SequenceFromProto(s, elem, label, depth + 1));
    items.push_back(std::move(v));
  }
  for (const auto& o : sp.optional_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor v, OptionalFromProto(o, elem, label, depth + 1));
    items.push_back(std::move(v));
  }
  DType dt = !items.empty() ? items[0].dtype() : elem ? elem->dtype : DType::kUndefined;
  for (const auto& it : items)
    if (it.dtype() != dt && !it.is_none())
      return Error(label + ": sequence elements have different element types");
  return Tensor::Sequence(dt, std::move(items));
}

}  // namespace

Expected<Tensor> LoadValueProtoFile(const std::string& path, const ir::TypeInfo& type) {
  using K = ir::TypeInfo::Kind;
  if (type.kind == K::kTensor) return LoadTensorProtoFile(path);
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  if (file->size() > static_cast<size_t>(INT32_MAX)) return Error(path + ": file is too large");
  const int size = static_cast<int>(file->size());
  if (type.kind == K::kSequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromArray(file->data(), size)) return Error(path + ": not a valid SequenceProto");
    return SequenceFromProto(sp, &type, path, 0);
  }
  onnx::OptionalProto op;
  if (!op.ParseFromArray(file->data(), size)) return Error(path + ": not a valid OptionalProto");
  return OptionalFromProto(op, &type, path, 0);
}

std::string SerializeTensorProto(const Tensor& t, const std::string& name) {
  onnx::TensorProto tp;
  tp.set_name(name);
  tp.set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.dims()) tp.add_dims(d);
  if (t.is_string()) {
    for (int64_t i = 0; i < t.size(); ++i) tp.add_string_data(t.strings()[i]);
  } else if (IsSubByteDType(t.dtype())) {  // packed, as files hold them
    std::string packed(static_cast<size_t>(PackedBytes(t.dtype(), t.size())), '\0');
    PackSubByte(t.dtype(), t.data<uint8_t>(), t.size(), reinterpret_cast<uint8_t*>(packed.data()));
    tp.set_raw_data(std::move(packed));
  } else {
    tp.set_raw_data(t.raw(), t.nbytes());
  }
  return tp.SerializeAsString();
}

}  // namespace kiln::frontend
