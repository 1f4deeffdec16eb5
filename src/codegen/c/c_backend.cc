#include "codegen/c/c_backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "codegen/c/c_names.h"
#include "codegen/c/kernel_library.h"
#include "codegen/c/node_emitter.h"
#include "compiler/compile.h"

namespace kiln::codegen::c {
namespace {

constexpr size_t kWorkspaceAlignment = 16;
constexpr size_t kRegionAlignment = 64;

std::string TypeText(const ir::TypeInfo& t) {
  std::string s(DTypeName(t.dtype));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  s += "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? "," : "") + std::to_string(t.dims[i]);
  return s + "]";
}

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Every op the C backend has no emitter for, as "Op (node a, node b)" lists.
void CollectUnsupported(const ir::Graph& g, std::map<std::string, std::vector<std::string>>* out) {
  const auto& reg = EmitterRegistry::Global();
  for (const auto& n : g.nodes) {
    if (!reg.Find(n.domain, n.op_type)) {
      std::string op =
          (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
      (*out)[op].push_back(n.Label(g));
    }
    for (const auto& [k, a] : n.attrs) {
      if (a.g) CollectUnsupported(*a.g, out);
      for (const auto& sg : a.graphs) CollectUnsupported(*sg, out);
    }
  }
}

// A graph input or output the generated interface can hold: a tensor of a C type and fixed dims.
Status CheckInterface(const ir::Value& v, const char* what) {
  if (v.type.kind != ir::TypeInfo::Kind::kTensor)
    return Error(std::string(what) + " '" + v.name +
                 "' is a sequence or optional; the C backend takes tensors only");
  if (CType(v.type.dtype).empty())
    return Error(std::string(what) + " '" + v.name + "' has element type " +
                 std::string(DTypeName(v.type.dtype)) + ", which the C backend does not support");
  if (!v.type.shape_known()) {
    std::string dims;
    for (size_t i = 0; i < v.type.dims.size(); ++i) {
      std::string sym = i < v.type.symbols.size() ? v.type.symbols[i] : "";
      dims += (i ? "," : "") + (v.type.dims[i] >= 0 ? std::to_string(v.type.dims[i])
                                : sym.empty()       ? "?"
                                                    : sym);
    }
    if (std::string(what) == "output")
      return Error("output '" + v.name + "' has dims [" + dims +
                   "] that depend on input values, not only on input dims; generated C needs "
                   "every size at compile time");
    return Error("input '" + v.name + "' has dims [" + dims +
                 "] not fixed at compile time; give them with --shape NAME=D0,D1,...");
  }
  return OkStatus();
}

class Generator {
 public:
  Generator(const compiler::Program& p, const CompileOptions& o)
      : program_(p), model_(p.model), o_(o), upper_(Upper(o.name)) {
    for (const char* reserved : {"run", "graph_main"}) globals_.Reserve(reserved);
  }

  Expected<CompiledC> Run() {
    const ir::Graph& g = *model_.graph;
    std::vector<int> feeds = g.RuntimeInputs();
    NameScope members_in, members_out;
    for (int v : feeds) in_members_.push_back(members_in.Take(g.values[v].name));
    for (int v : g.outputs) out_members_.push_back(members_out.Take(g.values[v].name));

    std::map<int, std::string> io;
    for (size_t k = 0; k < feeds.size(); ++k) io[feeds[k]] = "inputs->" + in_members_[k];
    std::vector<std::string> out_exprs;
    for (size_t k = 0; k < g.outputs.size(); ++k)
      out_exprs.push_back("outputs->" + out_members_[k]);
    std::string body;
    KILN_RETURN_IF_ERROR(EmitGraph(g, io, out_exprs, "main", &body));
    run_body_ = body;

    CompiledC result;
    size_t ws = std::max(AlignUp(workspace_, kWorkspaceAlignment), kWorkspaceAlignment);
    result.interface.workspace_size = ws;
    result.graph = model_.graph;
    result.plan = program_.main().plan;
    for (int v : feeds) result.interface.inputs.push_back(g.values[v]);
    for (int v : g.outputs) result.interface.outputs.push_back(g.values[v]);
    result.files.push_back({o_.name + ".h", Header(ws)});
    result.files.push_back({o_.name + ".c", Source()});
    result.files.push_back({o_.name + "_params.c", Params()});
    result.files.push_back({o_.name + "_kernels.h", Kernels()});
    return result;
  }

 private:
  // The first reusable header lines of every file.
  std::string Banner(const std::string& what) const {
    std::string s = BannerOpening(what, o_.kiln_version, o_.command_line,
                                  o_.source.empty() ? FileName(model_.source_path) : o_.source);
    if (!model_.producer_name.empty())
      s += " (" +
           CommentText(model_.producer_name +
                       (model_.producer_version.empty() ? "" : " " + model_.producer_version)) +
           ")";
    s += "\n * opsets: ";
    bool first = true;
    for (const auto& [d, v] : model_.opsets) {
      s += (first ? "" : ", ") + CommentText(d.empty() ? "ai.onnx" : d) + " " + std::to_string(v);
      first = false;
    }
    return s + "\n */\n";
  }

  // One array per distinct constant (same dtype and bytes share it).
  std::string ParamFor(const ir::Value& v) { return ParamFor(v.name, *v.constant); }
  std::string ParamFor(const std::string& name, const Tensor& t) {
    std::string key = std::to_string(static_cast<int>(t.dtype())) + ":" +
                      std::string(t.nbytes() ? static_cast<const char*>(t.raw()) : "", t.nbytes());
    auto it = param_by_bytes_.find(key);
    if (it != param_by_bytes_.end()) return it->second;
    std::string sym = globals_.Take(name, "kiln_" + o_.name + "_p_");
    param_by_bytes_[key] = sym;
    params_.push_back({sym, name, t});
    return sym;
  }

  size_t Reserve(size_t bytes) {
    size_t off = AlignUp(workspace_, kRegionAlignment);
    workspace_ = off + bytes;
    return off;
  }

  // Emits graph g: its nodes' functions, and into *body the calls in schedule order. `io` gives
  // the C expressions of graph inputs and captures; `out_exprs` those of the graph outputs.
  Status EmitGraph(const ir::Graph& g, std::map<int, std::string> loc,
                   const std::vector<std::string>& out_exprs, const std::string& graph_label,
                   std::string* body) {
    const planner::GraphPlan& gp = program_.Of(g).plan;
    size_t base = Reserve(gp.plan.arena_bytes);
    // The nodes' scratch: one region per graph, reserved after its nodes (and their subgraphs')
    // are emitted, as its size is the largest any node asks for. A graph's nodes run one at a
    // time, so they share it; a subgraph's nodes, which run inside a node, have their own.
    scratch_regions_.push_back({offsets_.Take("scratch_" + graph_label, "OFF_"), 0});
    // Graph outputs produced by a node of this graph are written in place; the rest are copied.
    std::vector<std::pair<std::string, int>> copies;  // (destination, value)
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      int v = g.outputs[k];
      if (g.values[v].producer >= 0 && !loc.count(v))
        loc[v] = out_exprs[k];
      else
        copies.push_back({out_exprs[k], v});
    }
    // The plan table and offset constants.
    std::string table = "/* Memory plan of " + CommentText(graph_label) + " (planner \"" +
                        gp.plan.planner + "\"): " + std::to_string(gp.plan.arena_bytes) +
                        " bytes at workspace offset " + std::to_string(base) + ", lower bound " +
                        std::to_string(gp.plan.lower_bound_bytes) + " bytes.\n" +
                        " *     offset       size  live     tensor\n";
    for (const auto& b : gp.plan.buffers) {
      std::string macro = offsets_.Take(b.name, "OFF_");
      char line[96];
      std::snprintf(line, sizeof(line), " * %10zu %10zu  [%d, %d]", base + b.offset, b.size,
                    b.first_use, b.last_use);
      std::string l = line;
      l.resize(std::max<size_t>(l.size(), 40), ' ');
      table += l + " " + CommentText(b.name) +
               (b.alias_of >= 0 ? " (shares " + CommentText(gp.plan.buffers[b.alias_of].name) + ")"
                                : "") +
               "\n";
      offset_defs_ += "#define " + macro + " " + std::to_string(base + b.offset) + "u\n";
      const ir::TypeInfo& t = g.values[b.value].type;
      loc[b.value] = "(" + CType(t.dtype) + " *)(arena + " + macro + ")";
    }
    plan_tables_ += table + " */\n";

    auto expr = [&](int v) -> Expected<std::string> {
      auto it = loc.find(v);
      if (it != loc.end()) return it->second;
      const ir::Value& val = g.values[v];
      if (val.constant) {
        if (CType(val.constant->dtype()).empty())
          return Error("tensor '" + val.name + "' has element type " +
                       std::string(DTypeName(val.constant->dtype())) +
                       ", which the C backend does not support");
        return loc[v] = ParamFor(val);
      }
      return Error("tensor '" + val.name + "' has no size known at compile time (" +
                   val.type.ToString() + "); fix the input dims with --shape");
    };

    for (size_t p = 0; p < gp.schedule.order.size(); ++p) {
      const ir::Node& n = g.nodes[gp.schedule.order[p]];
      if (gp.buffers.is_noop[p]) {
        *body += "  /* " + CommentText(n.Label(g)) + " (" + n.op_type + "): a view, no code */\n";
        continue;
      }
      KILN_RETURN_IF_ERROR(EmitNode(g, n, expr, body));
    }
    const ScratchRegion region = scratch_regions_.back();
    scratch_regions_.pop_back();
    if (region.bytes)
      offset_defs_ += "#define " + region.macro + " " + std::to_string(Reserve(region.bytes)) +
                      "u /* the scratch of " + CommentText(graph_label) + "'s nodes, " +
                      std::to_string(region.bytes) + " bytes */\n";
    for (const auto& [dst, v] : copies) {
      KILN_ASSIGN_OR_RETURN(std::string src, expr(v));
      *body +=
          "  memcpy(" + dst + ", " + src + ", " + std::to_string(Bytes(g.values[v].type)) + ");\n";
    }
    return OkStatus();
  }

  static size_t Bytes(const ir::TypeInfo& t) {
    return static_cast<size_t>(NumElements(t.dims)) * DTypeSize(t.dtype);
  }

  Status CheckValue(const ir::Graph& g, int v, const ir::Node& n) {
    const ir::Value& val = g.values[v];
    if (val.type.kind != ir::TypeInfo::Kind::kTensor)
      return Error(n.Label(g) + " (" + n.op_type + "): '" + val.name +
                   "' is a sequence or optional, which the C backend does not support");
    if (CType(val.type.dtype).empty())
      return Error(n.Label(g) + " (" + n.op_type + "): '" + val.name + "' has element type " +
                   std::string(DTypeName(val.type.dtype)) +
                   ", which the C backend does not support");
    if (!val.type.shape_known())
      return Error(
          n.Label(g) + " (" + n.op_type + "): the dims of '" + val.name +
          "' depend on data, which the C backend does not support (fix input dims with --shape)");
    return OkStatus();
  }

  template <typename ExprFn>
  Status EmitNode(const ir::Graph& g, const ir::Node& n, ExprFn& expr, std::string* body) {
    auto node_error = [&](const std::string& msg) {
      return Error(n.Label(g) + " (" + n.op_type + "): " + msg);
    };
    for (int v : n.inputs)
      if (v >= 0) KILN_RETURN_IF_ERROR(CheckValue(g, v, n));
    for (int v : n.outputs)
      if (v >= 0) KILN_RETURN_IF_ERROR(CheckValue(g, v, n));
    const NodeEmitFn* fn = EmitterRegistry::Global().Find(n.domain, n.op_type);
    if (!fn) return node_error("the C backend cannot emit this operator");
    NodeContext ctx(g, n, model_.OpsetFor(n.domain));
    std::string fname = globals_.Take(
        n.name.empty()
            ? n.op_type + "_" +
                  (n.outputs.empty() || n.outputs[0] < 0 ? "" : g.values[n.outputs[0]].name)
            : n.name,
        "node_");
    ctx.function_name = fname;
    ctx.weight_storage = o_.weight_storage;
    bool uses_ws = false;
    int scratch_count = 0;
    size_t scratch_used = 0;  // this node's bytes in its graph's scratch region
    const size_t region_at = scratch_regions_.size() - 1;  // (subgraphs push theirs meanwhile)
    ctx.scratch = [&](size_t bytes) {
      uses_ws = true;
      std::string macro = offsets_.Take(
          fname + "_scratch" + (scratch_count ? std::to_string(scratch_count) : ""), "OFF_");
      ++scratch_count;
      const size_t off = AlignUp(scratch_used, kRegionAlignment);
      scratch_used = off + bytes;
      ScratchRegion& region = scratch_regions_[region_at];
      region.bytes = std::max(region.bytes, scratch_used);
      offset_defs_ += "#define " + macro + " (" + region.macro + " + " + std::to_string(off) +
                      "u) /* scratch of " + fname + ", " + std::to_string(bytes) + " bytes */\n";
      return "(arena + " + macro + ")";
    };
    ctx.parameter = [&](const std::string& label, Tensor data) { return ParamFor(label, data); };
    ctx.subgraph = [&](const ir::Graph& sg) -> Expected<SubgraphCall> {
      uses_ws = true;
      return EmitSubgraph(sg, n, fname);
    };
    Status st = (*fn)(ctx);
    if (!st.ok()) return node_error(st.message());
    for (const auto& k : ctx.kernels()) kernels_.insert(k);
    std::string text = ctx.tables() + ctx.body();

    // Parameters: the inputs, captures and outputs the body refers to, named after their values
    // (the emitters wrote the positional in0, c0, out0), clear of every identifier in the text.
    const std::set<std::string> idents = Identifiers(text);
    auto mentions = [&](const std::string& ident) { return idents.count(ident) > 0; };
    NameScope param_names;
    for (const std::string& ident : idents) param_names.Reserve(ident);
    std::map<std::string, std::string> renamed;
    auto param = [&](const std::string& positional, int v) {
      std::string name = g.values[v].name;
      for (const char* macro_prefix : {"OFF_", "KILN_", "kiln_"})
        if (name.rfind(macro_prefix, 0) == 0) name = "v_" + name;
      return renamed[positional] = param_names.Take(name);
    };
    std::vector<std::string> params, args;
    if (uses_ws || mentions("arena")) {
      params.push_back("uint8_t *arena");
      args.push_back("arena");
    }
    std::string comment = "/* " + CommentText(n.Label(g)) +
                          (n.domain.empty() ? "" : " in domain " + CommentText(n.domain)) + "\n";
    auto describe = [&](std::string role, int v) {  // "in0" -> "input 0"
      const size_t digits = role.find_first_of("0123456789");
      role = (role[0] == 'i'   ? "input "
              : role[0] == 'o' ? "output "
                               : "capture ") +
             role.substr(digits);
      const ir::Value& val = g.values[v];
      comment += " *   " + role + std::string(role.size() < 10 ? 10 - role.size() : 0, ' ') +
                 TypeText(val.type) + " " + CommentText(val.name) +
                 (val.constant ? " (parameter)" : "") + "\n";
    };
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      int v = n.inputs[i];
      if (v < 0) continue;
      describe(NodeContext::in(static_cast<int>(i)), v);
      if (!mentions(NodeContext::in(static_cast<int>(i)))) continue;
      KILN_ASSIGN_OR_RETURN(std::string e, expr(v));
      params.push_back("const " + CType(g.values[v].type.dtype) + " *" +
                       param(NodeContext::in(static_cast<int>(i)), v));
      args.push_back(e);
    }
    for (size_t k = 0; k < n.implicit_inputs.size(); ++k) {
      int v = n.implicit_inputs[k];
      if (v < 0 || !mentions(NodeContext::capture(static_cast<int>(k)))) continue;
      KILN_RETURN_IF_ERROR(CheckValue(g, v, n));
      describe(NodeContext::capture(static_cast<int>(k)), v);
      KILN_ASSIGN_OR_RETURN(std::string e, expr(v));
      params.push_back("const " + CType(g.values[v].type.dtype) + " *" +
                       param(NodeContext::capture(static_cast<int>(k)), v));
      args.push_back(e);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int v = n.outputs[i];
      if (v < 0) continue;
      describe(NodeContext::out(static_cast<int>(i)), v);
      if (!mentions(NodeContext::out(static_cast<int>(i)))) continue;
      KILN_ASSIGN_OR_RETURN(std::string e, expr(v));
      params.push_back(CType(g.values[v].type.dtype) + " *" +
                       param(NodeContext::out(static_cast<int>(i)), v));
      args.push_back(e);
    }
    std::string attrs;
    for (const auto& [k, a] : n.attrs) {
      if (a.g || !a.graphs.empty()) continue;
      attrs += (attrs.empty() ? "" : " ") + k + "=" + a.ToString();
    }
    if (!attrs.empty()) comment += " *   " + CommentText(attrs, 400) + "\n";
    comment += " */\n";
    std::string sig = std::string(ctx.out_of_line() ? "KILN_NOINLINE " : "") +
                      (ctx.can_fail() ? "static int32_t " : "static void ") + fname + "(";
    uses_noinline_ = uses_noinline_ || ctx.out_of_line();
    if (params.empty()) sig += "void";
    for (size_t i = 0; i < params.size(); ++i) sig += (i ? ", " : "") + params[i];
    sig += ")";
    functions_ += "\n" + RenameIdentifiers(ctx.tables(), renamed) + comment + sig + " {\n" +
                  RenameIdentifiers(ctx.body(), renamed) +
                  (ctx.can_fail() ? "  return KILN_OK;\n" : "") + "}\n";
    std::string call = fname + "(";
    for (size_t i = 0; i < args.size(); ++i) call += (i ? ", " : "") + args[i];
    call += ")";
    if (ctx.can_fail()) {
      *body += "  if ((rc = " + call + ") != KILN_OK) return rc;\n";
      needs_rc_ = true;
    } else {
      *body += "  " + call + ";\n";
    }
    return OkStatus();
  }

  // A subgraph of node `owner` as a function graph_<owner>_<k>(arena, captures..., inputs...,
  // outputs...). Its captures are the owner's implicit inputs (c0, c1, ... in the node function).
  Expected<SubgraphCall> EmitSubgraph(const ir::Graph& sg, const ir::Node& owner,
                                      const std::string& owner_fn) {
    std::string fname =
        globals_.Take(owner_fn.substr(5) + "_" + (sg.name.empty() ? "body" : sg.name), "graph_");
    std::map<int, std::string> loc;
    std::vector<std::string> params = {"uint8_t *arena"};
    SubgraphCall call{fname, "arena"};
    const ir::Graph& parent = *sg.parent;
    for (size_t c = 0; c < sg.captures.size(); ++c) {
      auto [local, outer] = sg.captures[c];
      std::string pname = "cap" + std::to_string(c);
      if (parent.values[outer].constant) {  // a constant of the owner's graph: read it directly
        loc[local] = ParamFor(parent.values[outer]);
        continue;
      }
      auto it = std::find(owner.implicit_inputs.begin(), owner.implicit_inputs.end(), outer);
      if (it == owner.implicit_inputs.end())
        return Error("subgraph '" + sg.name + "' captures '" + parent.values[outer].name +
                     "', which its node does not list");
      loc[local] = pname;
      params.push_back("const " + CType(sg.values[local].type.dtype) + " *" + pname);
      call.leading_args +=
          ", " + NodeContext::capture(static_cast<int>(it - owner.implicit_inputs.begin()));
    }
    for (size_t i = 0; i < sg.inputs.size(); ++i) {
      int v = sg.inputs[i];
      const ir::Value& val = sg.values[v];
      if (val.type.kind != ir::TypeInfo::Kind::kTensor || CType(val.type.dtype).empty() ||
          !val.type.shape_known())
        return Error("subgraph input '" + val.name + "' must be a tensor of fixed dims (" +
                     val.type.ToString() + ")");
      std::string pname = "sin" + std::to_string(i);
      loc[v] = pname;
      params.push_back("const " + CType(val.type.dtype) + " *" + pname);
    }
    std::vector<std::string> outs;
    for (size_t i = 0; i < sg.outputs.size(); ++i) {
      const ir::Value& val = sg.values[sg.outputs[i]];
      if (val.type.kind != ir::TypeInfo::Kind::kTensor || CType(val.type.dtype).empty() ||
          !val.type.shape_known())
        return Error("subgraph output '" + val.name + "' must be a tensor of fixed dims (" +
                     val.type.ToString() + ")");
      std::string pname = "sout" + std::to_string(i);
      outs.push_back(pname);
      params.push_back(CType(val.type.dtype) + " *" + pname);
    }
    std::string body;
    bool saved_rc = needs_rc_;
    needs_rc_ = false;
    KILN_RETURN_IF_ERROR(EmitGraph(sg, loc, outs, "subgraph " + fname, &body));
    std::string sig = "static int32_t " + fname + "(";
    for (size_t i = 0; i < params.size(); ++i) sig += (i ? ", " : "") + params[i];
    sig += ")";
    std::string unused;
    const std::set<std::string> idents = Identifiers(body);
    for (const auto& p : params) {
      std::string id = p.substr(p.rfind('*') + 1);
      if (!idents.count(id)) unused += "  (void)" + id + ";\n";
    }
    functions_ += "\n/* " + CommentText(sg.name.empty() ? "body" : sg.name) + ": a subgraph of " +
                  CommentText(owner.Label(*sg.parent)) + " */\n" + sig + " {\n" + unused +
                  (needs_rc_ ? "  int32_t rc;\n" : "") + body + "  return KILN_OK;\n}\n";
    needs_rc_ = saved_rc;
    return call;
  }

  std::string Header(size_t ws) const {
    const ir::Graph& g = *model_.graph;
    std::string n = o_.name, guard = "KILN_" + upper_ + "_H_";
    std::string s = Banner(n + ".h: the interface of model " + n + " (include this file only).");
    s += "#ifndef " + guard + "\n#define " + guard +
         "\n\n#include <stddef.h>\n#include <stdint.h>\n\n";
    s += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    s += R"(#ifndef KILN_TYPES_DEFINED_
#define KILN_TYPES_DEFINED_
typedef struct kiln_tensor_info {
  const char *name;      /* the ONNX name, unmodified */
  int32_t dtype;         /* ONNX TensorProto.DataType value */
  int32_t rank;
  const int64_t *dims;
  size_t size_bytes;
} kiln_tensor_info;
typedef struct kiln_model_descriptor {
  const char *name;
  int32_t num_inputs, num_outputs;
  const kiln_tensor_info *inputs, *outputs;
  size_t workspace_size, workspace_alignment;
} kiln_model_descriptor;
#endif

)";
    s += kStatusCodeDefines;
    s += "\n";
    auto members = [&](const std::vector<int>& vals, const std::vector<std::string>& names) {
      std::string m;
      for (size_t k = 0; k < vals.size(); ++k)
        m += "  " + CType(g.values[vals[k]].type.dtype) + " *" + names[k] + "; /* " +
             CommentText(g.values[vals[k]].name) + ": " + TypeText(g.values[vals[k]].type) +
             " */\n";
      if (vals.empty()) m += "  void *none; /* the model has none */\n";
      return m;
    };
    s += "struct kiln_" + n + "_inputs {\n" + members(g.RuntimeInputs(), in_members_) + "};\n";
    s += "struct kiln_" + n + "_outputs {\n" + members(g.outputs, out_members_) + "};\n";
    s += "struct kiln_" + n + "_workspace {\n  uint8_t *arena; /* KILN_" + upper_ +
         "_WORKSPACE_SIZE bytes */\n};\n\n";
    s += "#define KILN_" + upper_ + "_WORKSPACE_SIZE " + std::to_string(ws) + "\n";
    s += "#define KILN_" + upper_ + "_WORKSPACE_ALIGNMENT " + std::to_string(kWorkspaceAlignment) +
         "\n\n";
    s += "int32_t kiln_" + n + "_run(const struct kiln_" + n + "_inputs *inputs, struct kiln_" + n +
         "_outputs *outputs,\n                struct kiln_" + n + "_workspace *workspace);\n";
    s += "int32_t kiln_" + n + "_get_input_index(const char *name);\n";
    s += "int32_t kiln_" + n + "_get_output_index(const char *name);\n";
    s += "int32_t kiln_" + n + "_set_input(struct kiln_" + n +
         "_inputs *inputs, int32_t index, void *data);\n";
    s += "int32_t kiln_" + n + "_set_output(struct kiln_" + n +
         "_outputs *outputs, int32_t index, void *data);\n";
    s += "extern const kiln_model_descriptor kiln_" + n + "_descriptor;\n\n";
    s += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard + " */\n";
    return s;
  }

  std::string Source() const {
    const ir::Graph& g = *model_.graph;
    std::string n = o_.name;
    std::string s = Banner(n + ".c: one function per node, run() calls them in the planned order.");
    s += "#include \"" + n + ".h\"\n\n#include <math.h>\n#include <string.h>\n\n#include \"" + n +
         "_kernels.h\"\n\n";
    if (uses_noinline_)
      s += "#if defined(__GNUC__) || defined(__clang__)\n#define KILN_NOINLINE "
           "__attribute__((noinline))\n#else\n#define KILN_NOINLINE\n#endif\n\n";
    s += "/* Parameters (" + n + "_params.c). */\n";
    for (const auto& p : params_)
      s += "extern const " + CType(p.data.dtype()) + " " + p.symbol + "[" +
           std::to_string(std::max<int64_t>(p.data.size(), 1)) + "];\n";
    s += "\n" + plan_tables_ + offset_defs_ + functions_ + "\n";
    // run()
    s += "int32_t kiln_" + n + "_run(const struct kiln_" + n + "_inputs *inputs, struct kiln_" + n +
         "_outputs *outputs,\n                struct kiln_" + n + "_workspace *workspace) {\n";
    s += "  uint8_t *arena;\n";
    if (needs_rc_) s += "  int32_t rc;\n";
    s += "  if (inputs == NULL || outputs == NULL || workspace == NULL) return "
         "KILN_ERROR_NULL_ARGUMENT;\n";
    for (const auto& m : in_members_)
      s += "  if (inputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    for (const auto& m : out_members_)
      s += "  if (outputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    s += "  arena = workspace->arena;\n  if (arena == NULL) return KILN_ERROR_NULL_WORKSPACE;\n";
    s += "  if ((uintptr_t)arena % KILN_" + upper_ +
         "_WORKSPACE_ALIGNMENT != 0) return KILN_ERROR_MISALIGNED_WORKSPACE;\n";
    s += run_body_ + "  return KILN_OK;\n}\n\n";
    // Descriptor, lookup and setters.
    auto infos = [&](const std::vector<int>& vals, const std::string& kind) {
      std::string t;
      for (size_t k = 0; k < vals.size(); ++k) {
        const ir::TypeInfo& ty = g.values[vals[k]].type;
        if (!ty.dims.empty())
          t += "static const int64_t kiln_" + n + "_" + kind + "_dims" + std::to_string(k) +
               "[] = " + IntList(ty.dims) + ";\n";
      }
      if (vals.empty()) return t;
      t += "static const kiln_tensor_info kiln_" + n + "_" + kind + "_info[] = {\n";
      for (size_t k = 0; k < vals.size(); ++k) {
        const ir::Value& v = g.values[vals[k]];
        t += "    {" + CStringLiteral(v.name) + ", " +
             std::to_string(static_cast<int>(v.type.dtype)) + ", " +
             std::to_string(v.type.dims.size()) + ", " +
             (v.type.dims.empty() ? std::string("NULL")
                                  : "kiln_" + n + "_" + kind + "_dims" + std::to_string(k)) +
             ", " + std::to_string(Bytes(v.type)) + "},\n";
      }
      return t + "};\n";
    };
    std::vector<int> feeds = g.RuntimeInputs();
    s += infos(feeds, "input") + infos(g.outputs, "output");
    s += "const kiln_model_descriptor kiln_" + n + "_descriptor = {\n    " + CStringLiteral(n) +
         ", " + std::to_string(feeds.size()) + ", " + std::to_string(g.outputs.size()) + ", " +
         (feeds.empty() ? "NULL" : "kiln_" + n + "_input_info") + ", " +
         (g.outputs.empty() ? "NULL" : "kiln_" + n + "_output_info") + ",\n    KILN_" + upper_ +
         "_WORKSPACE_SIZE, KILN_" + upper_ + "_WORKSPACE_ALIGNMENT};\n\n";
    auto lookup = [&](const std::string& kind, size_t count) {
      std::string t = "int32_t kiln_" + n + "_get_" + kind + "_index(const char *name) {\n";
      if (count == 0) return t + "  (void)name;\n  return -1;\n}\n\n";
      t += "  int32_t i;\n  if (name == NULL) return -1;\n";
      t += "  for (i = 0; i < " + std::to_string(count) + "; ++i)\n";
      t += "    if (strcmp(name, kiln_" + n + "_" + kind +
           "_info[i].name) == 0) return i;\n  return -1;\n}\n\n";
      return t;
    };
    s += lookup("input", feeds.size()) + lookup("output", g.outputs.size());
    auto setter = [&](const std::string& kind, const std::vector<int>& vals,
                      const std::vector<std::string>& names) {
      std::string t = "int32_t kiln_" + n + "_set_" + kind + "(struct kiln_" + n + "_" + kind +
                      "s *" + kind + "s, int32_t index, void *data) {\n";
      t += "  if (" + kind + "s == NULL) return KILN_ERROR_NULL_ARGUMENT;\n";
      if (vals.empty())
        return t + "  (void)index;\n  (void)data;\n  return KILN_ERROR_INVALID_INDEX;\n}\n\n";
      t += "  switch (index) {\n";
      for (size_t k = 0; k < vals.size(); ++k)
        t += "    case " + std::to_string(k) + ": " + kind + "s->" + names[k] + " = (" +
             CType(g.values[vals[k]].type.dtype) + " *)data; return KILN_OK;\n";
      return t + "    default: return KILN_ERROR_INVALID_INDEX;\n  }\n}\n\n";
    };
    s += setter("input", feeds, in_members_) + setter("output", g.outputs, out_members_);
    return s;
  }

  std::string Params() const {
    std::string n = o_.name;
    std::string s = Banner(n + "_params.c: the model's constants.");
    s += "#include <math.h>\n#include <stdint.h>\n\n";
    std::string attr = "KILN_" + upper_ + "_PARAM_ATTR";
    s += "#if defined(__GNUC__) || defined(__clang__)\n#define " + attr +
         " __attribute__((aligned(16)";
    s += o_.params_section.empty() ? "" : ", section(" + CStringLiteral(o_.params_section) + ")";
    s += "))\n#else\n#define " + attr + "\n#endif\n";
    for (const auto& p : params_) {
      const Tensor& t = p.data;
      std::string dims;
      for (size_t i = 0; i < t.dims().size(); ++i)
        dims += (i ? "," : "") + std::to_string(t.dims()[i]);
      s += "\n/* " + CommentText(p.onnx_name) + ": " + std::string(DTypeName(t.dtype())) + "[" +
           dims + "] */\n";
      s += "extern const " + CType(t.dtype()) + " " + p.symbol + "[" +
           std::to_string(std::max<int64_t>(t.size(), 1)) + "];\n";
      s += "const " + CType(t.dtype()) + " " + p.symbol + "[" +
           std::to_string(std::max<int64_t>(t.size(), 1)) + "] " + attr + " = {";
      size_t es = DTypeSize(t.dtype());
      const char* data = static_cast<const char*>(t.raw());
      std::string line;
      for (int64_t i = 0; i < t.size(); ++i) {
        std::string lit = CLiteral(t.dtype(), data + i * es);
        if (line.size() + lit.size() > 96) {
          s += "\n   " + line;
          line.clear();
        }
        line += " " + lit + ",";
      }
      if (t.size() == 0) line = " 0";
      s += "\n   " + line + "\n};\n";
    }
    if (params_.empty())
      s += "\n/* The model has no parameters. */\ntypedef int kiln_" + n + "_no_params;\n";
    return s;
  }

  std::string Kernels() const {
    std::string n = o_.name, guard = "KILN_" + upper_ + "_KERNELS_H_";
    std::string s = Banner(n + "_kernels.h: the portable kernels this model uses (included by " +
                           n + ".c only).");
    s += "#ifndef " + guard + "\n#define " + guard +
         "\n\n#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n";
    if (o_.cpu != "generic")  // the int8 kernels' DSP paths (kernels/reference/qconv_packed.c)
      s += "\n/* --cpu " + o_.cpu +
           ": the DSP extension's instructions through ACLE. */\n#define KILN_ARM_DSP 1\n";
    for (const auto& k : KernelClosure(kernels_)) s += "\n" + *KernelSource(k);
    return s + "\n#endif /* " + guard + " */\n";
  }

  struct ParamEntry {
    std::string symbol, onnx_name;
    Tensor data;
  };

  const compiler::Program& program_;
  const ir::Model& model_;
  const CompileOptions& o_;
  std::string upper_;
  NameScope globals_, offsets_;
  std::vector<std::string> in_members_, out_members_;
  std::map<std::string, std::string> param_by_bytes_;
  std::vector<ParamEntry> params_;
  std::set<std::string> kernels_;
  std::string functions_, offset_defs_, plan_tables_, run_body_;
  size_t workspace_ = 0;
  struct ScratchRegion {
    std::string macro;
    size_t bytes;
  };
  std::vector<ScratchRegion> scratch_regions_;  // the graphs being emitted, innermost last
  bool needs_rc_ = false;
  bool uses_noinline_ = false;  // a node function is KILN_NOINLINE
};

// What the C backend checks before planning: the ops no emitter takes, in one message, then the
// interface's tensors.
Status CheckSupported(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  std::map<std::string, std::vector<std::string>> unsupported;
  CollectUnsupported(g, &unsupported);
  if (!unsupported.empty()) {
    std::string msg = "the C backend cannot emit ";
    bool first = true;
    for (const auto& [op, nodes] : unsupported) {
      msg += (first ? "" : ", ") + op + " (" + nodes[0] +
             (nodes.size() > 1 ? " and " + std::to_string(nodes.size() - 1) + " more" : "") + ")";
      first = false;
    }
    return Error(msg);
  }
  for (int v : g.RuntimeInputs()) KILN_RETURN_IF_ERROR(CheckInterface(g.values[v], "input"));
  for (int v : g.outputs) KILN_RETURN_IF_ERROR(CheckInterface(g.values[v], "output"));
  return OkStatus();
}

}  // namespace

Expected<compiler::Program> CompileProgram(ir::Model model, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(CheckModelName(options.name));
  compiler::CompileOptions co;
  co.target = compiler::Target::kC;
  co.shapes = options.shapes;
  co.passes = options.passes;
  co.dump_ir_after = options.dump_ir_after;
  co.plan = options.plan;
  co.before_plan = CheckSupported;
  return compiler::Compile(std::move(model), co);
}

Expected<CompiledC> CompileToC(ir::Model model, const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto program, CompileProgram(std::move(model), options));
  return CompileToC(program, options);
}

Expected<CompiledC> CompileToC(const compiler::Program& program, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(CheckModelName(options.name));
  if (program.target != compiler::Target::kC)
    return Error("the C backend emits programs compiled for the c target");
  KILN_RETURN_IF_ERROR(CheckSupported(program.model));  // a program compiled without them
  Generator gen(program, options);
  return gen.Run();
}

}  // namespace kiln::codegen::c
