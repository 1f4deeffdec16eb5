// C emitters for If, Loop and Scan. Each body is a generated function with its own planned region
// of the workspace (see c_backend.cc); every shape must be fixed at compile time, so a Loop whose
// scan outputs would grow with a data-dependent trip count is rejected by the backend before it
// gets here. Loop-carried values live in the node's outputs between iterations; the body writes
// the next values into node scratch, which is copied back after each iteration.
#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {
namespace {

size_t Bytes(const ir::TypeInfo& t) {
  return static_cast<size_t>(NumElements(t.dims)) * DTypeSize(t.dtype);
}

const ir::Graph* Body(NodeContext& ctx, const char* attr) {
  const ir::Attribute* a = ctx.node().attr(attr);
  return a && a->g ? a->g.get() : nullptr;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += ", " + x;
  return s;
}

// A pointer for each of the node's outputs (NULL-free: unused ones get scratch).
Expected<std::vector<std::string>> OutputPointers(NodeContext& ctx, const ir::Graph& body,
                                                  size_t first_body_output, size_t count) {
  std::vector<std::string> ptrs;
  for (size_t k = 0; k < count; ++k) {
    const ir::TypeInfo& bt = body.values[body.outputs[first_body_output + k]].type;
    if (static_cast<int>(k) < ctx.num_outputs() && ctx.has_output(static_cast<int>(k))) {
      if (ctx.output_dims(static_cast<int>(k)) != bt.dims ||
          ctx.output_dtype(static_cast<int>(k)) != bt.dtype)
        return ctx.error("output " + std::to_string(k) + " is " +
                         ctx.output_type(static_cast<int>(k)).ToString() + " but the body gives " +
                         bt.ToString());
      ptrs.push_back(NodeContext::out(static_cast<int>(k)));
    } else {
      ptrs.push_back("(" + CType(bt.dtype) + " *)" + ctx.scratch(std::max<size_t>(Bytes(bt), 1)));
    }
  }
  return ptrs;
}

Status EmitIf(NodeContext& ctx) {
  const ir::Graph* then_g = Body(ctx, "then_branch");
  const ir::Graph* else_g = Body(ctx, "else_branch");
  if (!then_g || !else_g) return ctx.error("needs then_branch and else_branch");
  if (then_g->outputs.size() != static_cast<size_t>(ctx.num_outputs()) ||
      else_g->outputs.size() != static_cast<size_t>(ctx.num_outputs()))
    return ctx.error("branches and node disagree on the number of outputs");
  KILN_ASSIGN_OR_RETURN(auto then_call, ctx.subgraph(*then_g));
  KILN_ASSIGN_OR_RETURN(auto else_call, ctx.subgraph(*else_g));
  KILN_ASSIGN_OR_RETURN(auto then_out, OutputPointers(ctx, *then_g, 0, then_g->outputs.size()));
  KILN_ASSIGN_OR_RETURN(auto else_out, OutputPointers(ctx, *else_g, 0, else_g->outputs.size()));
  ctx.SetCanFail();
  ctx.Line("if (in0[0]) return " + then_call.function + "(" + then_call.leading_args +
           Join(then_out) + ");");
  ctx.Line("return " + else_call.function + "(" + else_call.leading_args + Join(else_out) + ");");
  return OkStatus();
}

// Loop(M?, cond?, v_initial...) with body (iter, cond, v...) -> (cond, v..., scan...).
Status EmitLoop(NodeContext& ctx) {
  const ir::Graph* body = Body(ctx, "body");
  if (!body) return ctx.error("needs a body");
  const size_t carried = static_cast<size_t>(std::max(0, ctx.num_inputs() - 2));
  if (body->inputs.size() != carried + 2 || body->outputs.size() < carried + 1)
    return ctx.error("the body's inputs and outputs do not match the node's");
  const size_t scans = body->outputs.size() - 1 - carried;
  if (!ctx.has_input(0) && !ctx.has_input(1))
    return ctx.error("has neither a trip count nor a condition");
  KILN_ASSIGN_OR_RETURN(auto call, ctx.subgraph(*body));
  ctx.SetCanFail();
  ctx.Line("int64_t iter = 0;");
  ctx.Line("uint8_t cond = " + std::string(ctx.has_input(1) ? "in1[0] != 0" : "1") +
           ", next_cond = 1;");
  ctx.Line("int32_t rc;");
  std::vector<std::string> state, next;
  for (size_t k = 0; k < carried; ++k) {
    const ir::TypeInfo& t = ctx.input_type(static_cast<int>(k + 2));
    if (!ctx.has_output(static_cast<int>(k)) || ctx.output_dims(static_cast<int>(k)) != t.dims)
      return ctx.error("loop-carried value " + std::to_string(k) + " must keep its dims");
    std::string ct = CType(t.dtype);
    state.push_back(NodeContext::out(static_cast<int>(k)));
    next.push_back("next" + std::to_string(k));
    ctx.Line(ct + " *next" + std::to_string(k) + " = (" + ct + " *)" +
             ctx.scratch(std::max<size_t>(Bytes(t), 1)) + ";");
    ctx.Line("memcpy(" + state.back() + ", " + NodeContext::in(static_cast<int>(k + 2)) + ", " +
             std::to_string(Bytes(t)) + ");");
  }
  std::vector<std::string> scan_out;
  int64_t trips = -1;
  for (size_t j = 0; j < scans; ++j) {
    int o = static_cast<int>(carried + j);
    const ir::TypeInfo& bt = body->values[body->outputs[1 + carried + j]].type;
    if (!ctx.has_output(o)) {
      scan_out.push_back("(" + CType(bt.dtype) + " *)" +
                         ctx.scratch(std::max<size_t>(Bytes(bt), 1)));
      continue;
    }
    const Dims& od = ctx.output_dims(o);
    if (od.empty() || Dims(od.begin() + 1, od.end()) != bt.dims)
      return ctx.error("scan output " + std::to_string(j) +
                       " has dims that do not stack the body's");
    trips = od[0];
    scan_out.push_back(NodeContext::out(o) + " + (size_t)iter * " +
                       std::to_string(NumElements(bt.dims)));
  }
  std::string limit = ctx.has_input(0) ? "iter < in0[0] && " : "";
  if (trips >= 0) limit += "iter < " + std::to_string(trips) + " && ";
  ctx.Line("for (iter = 0; " + limit + "cond; ++iter) {");
  std::vector<std::string> args = {"&iter", "&cond"};
  for (const auto& s : state) args.push_back(s);
  std::string a;
  for (const auto& x : args) a += ", " + x;
  std::vector<std::string> outs = {"&next_cond"};
  for (const auto& n : next) outs.push_back(n);
  for (const auto& s : scan_out) outs.push_back(s);
  ctx.Line("  rc = " + call.function + "(" + call.leading_args + a + Join(outs) + ");");
  ctx.Line("  if (rc != KILN_OK) return rc;");
  ctx.Line("  cond = next_cond != 0;");
  for (size_t k = 0; k < carried; ++k)
    ctx.Line("  memcpy(" + state[k] + ", " + next[k] + ", " +
             std::to_string(Bytes(ctx.input_type(static_cast<int>(k + 2)))) + ");");
  ctx.Line("}");
  if (trips >= 0)
    ctx.Line("if (iter != " + std::to_string(trips) +
             ") return KILN_ERROR_INVALID_DATA; /* scan outputs sized at compile time */");
  return OkStatus();
}

// Scan (opset 9+): states, then scan inputs sliced along their axes; the body's scan outputs are
// stacked along theirs.
Status EmitScan(NodeContext& ctx) {
  if (ctx.opset() < 9) return ctx.error("Scan before opset 9 (with a batch axis) is not supported");
  const ir::Graph* body = Body(ctx, "body");
  if (!body) return ctx.error("needs a body");
  const int64_t m = ctx.node().attr_int("num_scan_inputs", 0);
  const int64_t n = ctx.num_inputs() - m;
  if (m <= 0 || n < 0 || body->inputs.size() != static_cast<size_t>(ctx.num_inputs()) ||
      body->outputs.size() != static_cast<size_t>(ctx.num_outputs()))
    return ctx.error("the body's inputs and outputs do not match the node's");
  const int64_t k_out = ctx.num_outputs() - n;
  auto axes_in = ctx.node().attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
  auto dirs_in = ctx.node().attr_ints("scan_input_directions", std::vector<int64_t>(m, 0));
  auto axes_out = ctx.node().attr_ints("scan_output_axes", std::vector<int64_t>(k_out, 0));
  auto dirs_out = ctx.node().attr_ints("scan_output_directions", std::vector<int64_t>(k_out, 0));
  if (axes_in.size() != static_cast<size_t>(m) || dirs_in.size() != static_cast<size_t>(m) ||
      axes_out.size() != static_cast<size_t>(k_out) ||
      dirs_out.size() != static_cast<size_t>(k_out))
    return ctx.error("scan axes or directions have the wrong length");
  KILN_ASSIGN_OR_RETURN(auto call, ctx.subgraph(*body));
  ctx.SetCanFail();
  ctx.Line("int32_t rc;");
  std::vector<std::string> args, outs, after;
  for (int64_t k = 0; k < n; ++k) {  // states: in the outputs, next values in scratch
    const ir::TypeInfo& t = ctx.input_type(static_cast<int>(k));
    std::string ct = CType(t.dtype), s = NodeContext::out(static_cast<int>(k));
    if (!ctx.has_output(static_cast<int>(k)))
      s = "(" + ct + " *)" + ctx.scratch(std::max<size_t>(Bytes(t), 1));
    ctx.Line(ct + " *state" + std::to_string(k) + " = " + s + ";");
    ctx.Line(ct + " *next" + std::to_string(k) + " = (" + ct + " *)" +
             ctx.scratch(std::max<size_t>(Bytes(t), 1)) + ";");
    ctx.Line("memcpy(state" + std::to_string(k) + ", " + NodeContext::in(static_cast<int>(k)) +
             ", " + std::to_string(Bytes(t)) + ");");
    args.push_back("state" + std::to_string(k));
    outs.push_back("next" + std::to_string(k));
    after.push_back("memcpy(state" + std::to_string(k) + ", next" + std::to_string(k) + ", " +
                    std::to_string(Bytes(t)) + ");");
  }
  int64_t trips = -1;
  std::vector<std::string> gathers, scatters;
  for (int64_t j = 0; j < m; ++j) {
    const Dims& d = ctx.input_dims(static_cast<int>(n + j));
    int64_t axis = axes_in[j] < 0 ? axes_in[j] + static_cast<int64_t>(d.size()) : axes_in[j];
    if (axis < 0 || axis >= static_cast<int64_t>(d.size()))
      return ctx.error("scan input axis out of range");
    if (trips >= 0 && d[axis] != trips)
      return ctx.error("scan inputs disagree on the sequence length");
    trips = d[axis];
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= d[a];
    for (size_t a = axis + 1; a < d.size(); ++a) inner *= d[a];
    std::string t =
        dirs_in[j] ? "(" + std::to_string(trips - 1) + " - (size_t)step)" : "(size_t)step";
    std::string in = NodeContext::in(static_cast<int>(n + j));
    if (outer == 1) {
      args.push_back(in + " + " + t + " * " + std::to_string(inner));
      continue;
    }
    std::string ct = CType(ctx.input_dtype(static_cast<int>(n + j)));
    std::string buf = "slice" + std::to_string(j);
    ctx.Line(ct + " *" + buf + " = (" + ct + " *)" +
             ctx.scratch(static_cast<size_t>(outer * inner) *
                         DTypeSize(ctx.input_dtype(static_cast<int>(n + j)))) +
             ";");
    gathers.push_back("for (size_t o = 0; o < " + std::to_string(outer) + "; ++o) memcpy(" + buf +
                      " + o * " + std::to_string(inner) + ", " + in + " + (o * " +
                      std::to_string(trips) + " + " + t + ") * " + std::to_string(inner) + ", " +
                      ByteCount(ctx.input_dtype(static_cast<int>(n + j)), inner) + ");");
    args.push_back(buf);
  }
  for (int64_t j = 0; j < k_out; ++j) {
    int o = static_cast<int>(n + j);
    const ir::TypeInfo& bt = body->values[body->outputs[o]].type;
    std::string ct = CType(bt.dtype);
    if (!ctx.has_output(o)) {
      outs.push_back("(" + ct + " *)" + ctx.scratch(std::max<size_t>(Bytes(bt), 1)));
      continue;
    }
    const Dims& od = ctx.output_dims(o);
    int64_t axis = axes_out[j] < 0 ? axes_out[j] + static_cast<int64_t>(od.size()) : axes_out[j];
    if (axis < 0 || axis >= static_cast<int64_t>(od.size()) || od[axis] != trips)
      return ctx.error("scan output axis out of range or of the wrong length");
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= od[a];
    for (size_t a = axis + 1; a < od.size(); ++a) inner *= od[a];
    std::string t =
        dirs_out[j] ? "(" + std::to_string(trips - 1) + " - (size_t)step)" : "(size_t)step";
    if (outer == 1) {
      outs.push_back(NodeContext::out(o) + " + " + t + " * " + std::to_string(inner));
      continue;
    }
    std::string buf = "piece" + std::to_string(j);
    ctx.Line(ct + " *" + buf + " = (" + ct + " *)" + ctx.scratch(std::max<size_t>(Bytes(bt), 1)) +
             ";");
    outs.push_back(buf);
    scatters.push_back("for (size_t o = 0; o < " + std::to_string(outer) + "; ++o) memcpy(" +
                       NodeContext::out(o) + " + (o * " + std::to_string(trips) + " + " + t +
                       ") * " + std::to_string(inner) + ", " + buf + " + o * " +
                       std::to_string(inner) + ", " + ByteCount(bt.dtype, inner) + ");");
  }
  ctx.Line("for (int64_t step = 0; step < " + std::to_string(std::max<int64_t>(trips, 0)) +
           "; ++step) {");
  for (const auto& g : gathers) ctx.Line("  " + g);
  ctx.Line("  rc = " + call.function + "(" + call.leading_args + Join(args) + Join(outs) + ");");
  ctx.Line("  if (rc != KILN_OK) return rc;");
  for (const auto& s : scatters) ctx.Line("  " + s);
  for (const auto& s : after) ctx.Line("  " + s);
  ctx.Line("}");
  return OkStatus();
}

}  // namespace

void RegisterControlFlowEmitters(EmitterRegistry& r) {
  r.Register("If", EmitIf);
  r.Register("Loop", EmitLoop);
  r.Register("Scan", EmitScan);
}

}  // namespace kiln::codegen::c
