// C emitter for Resize and Upsample. The interpolation plan (ops/resize_plan.h: for every
// resized axis and output position, the input indices and weights) is the host kernel's own,
// computed at compile time from the constant scales / sizes / roi; the emitter writes it as
// per-axis tables and one loop nest over the output. Each output element is the nested sum
// sum_k0 w0 * (sum_k1 w1 * (... in[...])) over the resized axes, first axis outermost, which is
// the arithmetic of the host's separable passes (last axis first) without their buffers: no
// scratch memory. Axes whose taps are single unit weights (every nearest mode, aligned linear)
// are plain index lookups; when all are, the node is a copy of elements in their storage type.
#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/resize_plan.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

// The value v (double) converted the way the host stores a result of integer type t.
double IntResult(DType t, double v) {
  double lo = 0, hi = 0;
  switch (t) {
    case DType::kInt8:
      lo = -128;
      hi = 127;
      break;
    case DType::kUInt8:
      lo = 0;
      hi = 255;
      break;
    case DType::kInt16:
      lo = -32768;
      hi = 32767;
      break;
    case DType::kUInt16:
      lo = 0;
      hi = 65535;
      break;
    case DType::kInt32:
      lo = -2147483648.0;
      hi = 2147483647.0;
      break;
    case DType::kUInt32:
      lo = 0;
      hi = 4294967295.0;
      break;
    case DType::kInt64:
      lo = -9223372036854775808.0;
      hi = 9223372036854774784.0;
      break;
    default:
      lo = 0;
      hi = 18446744073709549568.0;
      break;
  }
  if (std::isnan(v)) v = 0;
  return std::clamp(std::trunc(v), lo, hi);
}

// The host's plan (ops/resize_plan.h) from the constant inputs (an empty input counts as absent,
// as in the host).
Status ResizePlanOf(NodeContext& ctx, const Dims& in, ops::ResizePlan* plan) {
  const ir::Node& n = ctx.node();
  ops::ComputeContext cc(n, ctx.graph(), ctx.opset());
  std::deque<Tensor> empties;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (i == 0 || !ctx.has_input(i)) {
      cc.inputs_.push_back(nullptr);
    } else if (const Tensor* c = ctx.input_constant(i)) {
      cc.inputs_.push_back(c);
    } else if (NumElements(ctx.input_dims(i)) == 0) {
      empties.emplace_back(ctx.input_dtype(i), ctx.input_dims(i));
      cc.inputs_.push_back(&empties.back());
    } else {
      return ctx.error("input " + std::to_string(i) +
                       " (roi, scales or sizes) must be a compile-time constant");
    }
  }
  Status st = ops::PlanResize(cc, in, plan);
  return st.ok() ? OkStatus() : ctx.error(st.message());
}

// The index tables: simple axes map an output position to an input offset (-1: extrapolate);
// summed axes give each position's taps as a range [o[x], o[x + 1]) of (input offset, weight)
// pairs, and (ext) which positions extrapolate.
void EmitTables(NodeContext& ctx, const ops::ResizePlan& plan, const std::vector<size_t>& resized,
                const std::vector<bool>& simple, const std::vector<bool>& ext,
                const std::vector<int64_t>& is, DType ct) {
  const std::string ctn = CType(ct);
  const std::string& fn = ctx.function_name;
  auto table = [&](const std::string& type, const std::string& name,
                   const std::vector<std::string>& v) {
    std::string s =
        "static const " + type + " " + name + "[" + S(static_cast<int64_t>(v.size())) + "] = {";
    for (size_t j = 0; j < v.size(); ++j) s += (j % 12 ? " " : "\n    ") + v[j] + ",";
    ctx.Table(s + "\n};\n");
  };
  for (size_t d : resized) {
    const auto& taps = plan.axes[d];
    std::vector<std::string> x, o, w, e;
    if (simple[d]) {
      for (const auto& tp : taps) x.push_back(tp.extrapolate ? "-1" : S(tp.idx[0] * is[d]));
      table("int32_t", fn + "_x" + S(static_cast<int64_t>(d)), x);
      continue;
    }
    int64_t count = 0;
    for (const auto& tp : taps) {
      o.push_back(S(count));
      e.push_back(tp.extrapolate ? "1" : "0");
      for (size_t k = 0; k < tp.idx.size() && !tp.extrapolate; ++k, ++count) {
        x.push_back(S(tp.idx[k] * is[d]));
        w.push_back(CNumber(ct, tp.w[k]));
      }
    }
    o.push_back(S(count));
    if (x.empty()) {  // no taps anywhere: keep the tables valid C
      x.push_back("0");
      w.push_back(CNumber(ct, 0));
    }
    std::string a = S(static_cast<int64_t>(d));
    table("int32_t", fn + "_o" + a, o);
    table("int32_t", fn + "_x" + a, x);
    table(ctn, fn + "_w" + a, w);
    if (ext[d]) table("uint8_t", fn + "_e" + a, e);
  }
}

Status EmitResize(NodeContext& ctx) {
  const Dims& in = ctx.input_dims(0);
  const Dims& od = ctx.output_dims(0);
  DType t = ctx.input_dtype(0);
  if (t == DType::kBool || (!IsFloatingDType(t) && !IsSignedIntDType(t) && !IsUnsignedIntDType(t)))
    return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  ops::ResizePlan plan;
  KILN_RETURN_IF_ERROR(ResizePlanOf(ctx, in, &plan));
  if (plan.out != od) return ctx.error("the planned output dims differ from the inferred ones");
  const int64_t n_out = NumElements(od);
  if (n_out == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (NumElements(in) == 0) return ctx.error("cannot resize an empty tensor to a non-empty one");
  if (NumElements(in) >= (int64_t{1} << 31))
    return ctx.error("the input is too large for int32 index tables");
  const size_t rank = in.size();
  std::vector<size_t> resized;
  for (size_t d = 0; d < rank; ++d)
    if (!plan.axes[d].empty()) resized.push_back(d);
  if (resized.empty()) {
    ctx.Line("memcpy(out0, in0, " + ByteCount(t, n_out) + ");");
    return OkStatus();
  }
  const bool is_int = !IsFloatingDType(t);
  const DType ct = is_int ? DType::kFloat64 : ComputeType(t);  // arithmetic and weight type
  const std::string ctn = CType(ct);
  std::vector<int64_t> is = Strides(in), os = Strides(od);
  std::vector<bool> simple(rank, true), ext(rank, false);
  bool copy = true;
  for (size_t d : resized) {
    for (const auto& tp : plan.axes[d]) {
      if (tp.extrapolate)
        ext[d] = true;
      else if (tp.idx.size() != 1 || tp.w[0] != 1.0)
        simple[d] = false;
    }
    copy = copy && simple[d];
  }
  EmitTables(ctx, plan, resized, simple, ext, is, ct);
  const std::string& fn = ctx.function_name;
  std::string extrap;
  if (copy) {
    extrap = is_int ? CNumber(t, IntResult(t, plan.extrapolation))
                    : Store(ctx, t, CNumber(ct, plan.extrapolation));
  } else {
    extrap = CNumber(ct, plan.extrapolation);
  }
  // The loops: axes of extent 1 left out, runs of unchanged axes merged into one loop.
  Dims loop_dims;
  std::vector<int64_t> loop_in, loop_out;  // strides of each loop in the input and the output
  std::vector<int> loop_of(rank, -1);      // the loop of each resized axis
  for (size_t d = 0; d < rank; ++d) {
    if (od[d] == 1) continue;
    bool r = !plan.axes[d].empty();
    if (!r && !loop_dims.empty() && loop_in.back() != 0 && loop_in.back() == is[d] * in[d]) {
      loop_dims.back() *= od[d];
      loop_in.back() = is[d];
      loop_out.back() = os[d];
      continue;
    }
    if (r) loop_of[d] = static_cast<int>(loop_dims.size());
    loop_dims.push_back(od[d]);
    loop_in.push_back(r ? 0 : is[d]);
    loop_out.push_back(os[d]);
  }
  LoopNest(ctx, loop_dims, [&](const std::vector<std::string>& loops) {
    std::vector<std::string> idx(rank, "0");
    for (size_t d = 0; d < rank; ++d)
      if (loop_of[d] >= 0) idx[d] = loops[loop_of[d]];
    std::string o = IndexExpr(loops, loop_out);
    std::string base = IndexExpr(loops, loop_in);
    // Sets `dst` to the value at nesting level j (resized axis resized[j]) at input offset `off`.
    std::function<void(size_t, const std::string&, const std::string&)> level =
        [&](size_t j, const std::string& off, const std::string& dst) {
          if (j == resized.size()) {
            ctx.Line(dst + " = " +
                     (copy     ? "in0[" + off + "]"
                      : is_int ? "(double)in0[" + off + "]"
                               : Load(ctx, t, "in0[" + off + "]")) +
                     ";");
            return;
          }
          std::string a = S(static_cast<int64_t>(resized[j])), i = idx[resized[j]];
          if (simple[resized[j]]) {
            std::string x = fn + "_x" + a + "[" + i + "]";
            std::string next = (off == "0" ? "" : off + " + ") + "(size_t)" + x;
            if (!ext[resized[j]]) {
              level(j + 1, next, dst);
              return;
            }
            ctx.Line("if (" + x + " < 0) {");
            ctx.Line("  " + dst + " = " + extrap + ";");
            ctx.Line("} else {");
            ctx.Indent();
            level(j + 1, next, dst);
            ctx.Dedent();
            ctx.Line("}");
            return;
          }
          std::string k = "k" + S(static_cast<int64_t>(j)), s = "s" + S(static_cast<int64_t>(j)),
                      v = "v" + S(static_cast<int64_t>(j));
          std::string ot = fn + "_o" + a;
          if (ext[resized[j]]) {
            ctx.Line("if (" + fn + "_e" + a + "[" + i + "]) {");
            ctx.Line("  " + dst + " = " + extrap + ";");
            ctx.Line("} else {");
          } else {
            ctx.Line("{");
          }
          ctx.Indent();
          ctx.Line(ctn + " " + s + " = " + CNumber(ct, 0) + ";");
          ctx.Line("int32_t " + k + ";");
          ctx.Line("for (" + k + " = " + ot + "[" + i + "]; " + k + " < " + ot + "[" + i +
                   " + 1]; ++" + k + ") {");
          ctx.Indent();
          ctx.Line(ctn + " " + v + ";");
          level(j + 1, (off == "0" ? "" : off + " + ") + "(size_t)" + fn + "_x" + a + "[" + k + "]",
                v);
          ctx.Line(s + " += " + fn + "_w" + a + "[" + k + "] * " + v + ";");
          ctx.Dedent();
          ctx.Line("}");
          ctx.Line(dst + " = " + s + ";");
          ctx.Dedent();
          ctx.Line("}");
        };
    if (copy) {
      level(0, base, "out0[" + o + "]");
      return;
    }
    ctx.Line(ctn + " r;");
    level(0, base, "r");
    if (is_int) {
      double lo = IntResult(t, -1e300), hi = IntResult(t, 1e300);
      ctx.Line("if (r != r) r = 0.0;");
      ctx.Line("r = trunc(r);");
      ctx.Line("r = r < " + CNumber(ct, lo) + " ? " + CNumber(ct, lo) + " : (r > " +
               CNumber(ct, hi) + " ? " + CNumber(ct, hi) + " : r);");
      ctx.Line("out0[" + o + "] = (" + CType(t) + ")r;");
    } else {
      ctx.Line("out0[" + o + "] = " + Store(ctx, t, "r") + ";");
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterResizeEmitters(EmitterRegistry& r) {
  r.Register("Resize", EmitResize);
  r.Register("Upsample", EmitResize);
}

}  // namespace kiln::codegen::c
