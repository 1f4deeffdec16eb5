// C emitters for the reduction family: ReduceSum / Mean / Max / Min / Prod / SumSquare / L1 /
// L2 / LogSum / LogSumExp (axes as an attribute or a constant input, keepdims,
// noop_with_empty_axes), ArgMax / ArgMin (keepdims, select_last_index), the running scans
// CumSum / CumProd (exclusive, reverse; the axis a constant or read at run time) and TopK.
// Each reduced output element is one register accumulation over its elements: the kept axes
// are the outer loops, the reduced axes the inner ones, both merged where memory allows. Floats
// accumulate in their compute type (float, or double for double; the host uses double),
// integers in 64 bits wrapping around as the host does.
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }
bool IsInt(DType t) { return IsSignedIntDType(t) || IsUnsignedIntDType(t); }

enum class Kind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

// The accumulator type: the compute type for floats, 64-bit for integers (and bool).
DType AccType(DType t) {
  if (IsFloatingDType(t)) return ComputeType(t);
  return IsSignedIntDType(t) ? DType::kInt64 : DType::kUInt64;
}

// The smallest and largest values of t, as C expressions of its accumulator type.
std::string Lowest(DType t) {
  if (IsFloatingDType(t)) return CNumber(ComputeType(t), -INFINITY);
  if (t == DType::kBool || IsUnsignedIntDType(t)) return "(uint64_t)0";
  return "(int64_t)INT" + S(8 * DTypeSize(t)) + "_MIN";
}
std::string Highest(DType t) {
  if (IsFloatingDType(t)) return CNumber(ComputeType(t), INFINITY);
  if (t == DType::kBool) return "(uint64_t)1";
  if (IsUnsignedIntDType(t)) return "(uint64_t)UINT" + S(8 * DTypeSize(t)) + "_MAX";
  return "(int64_t)INT" + S(8 * DTypeSize(t)) + "_MAX";
}

// a + b and a * b in the accumulator type; integers wrap (computed in uint64_t).
std::string Add(DType a, const std::string& x, const std::string& y) {
  if (IsFloatingDType(a)) return x + " + " + y;
  return "(" + CType(a) + ")((uint64_t)" + x + " + (uint64_t)" + y + ")";
}
std::string Mul(DType a, const std::string& x, const std::string& y) {
  if (IsFloatingDType(a)) return x + " * " + y;
  return "(" + CType(a) + ")((uint64_t)" + x + " * (uint64_t)" + y + ")";
}

// ---- Reduce* ----

Status EmitReduce(NodeContext& ctx, Kind kind) {
  const ir::Node& n = ctx.node();
  DType t = ctx.input_dtype(0);
  if (CType(t).empty() || (!IsFloatingDType(t) && !IsInt(t) &&
                           !(t == DType::kBool && (kind == Kind::kMax || kind == Kind::kMin))))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  const Dims& in = ctx.input_dims(0);
  const bool from_input = ctx.opset() >= (kind == Kind::kSum ? 13 : 18);
  std::vector<int64_t> axes;
  if (from_input && ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(ctx, 1));
  } else {
    axes = n.attr_ints("axes");
  }
  const int64_t total = NumElements(in);
  if (axes.empty() && from_input && n.attr_int("noop_with_empty_axes", 0) != 0) {
    if (total == 0)
      ctx.Line("/* no elements */");
    else
      ctx.Line("memcpy(out0, in0, " + ByteCount(t, total) + ");");
    return OkStatus();
  }
  std::vector<char> reduced(in.size(), axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    if (!NormAxis(&a, in.size())) return ctx.error("axis out of range");
    reduced[a] = 1;
  }
  const int64_t n_out = NumElements(ctx.output_dims(0));
  if (n_out == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const int64_t count = total / n_out;  // elements per output
  // Kept axes (input and output strides) and reduced axes (input strides).
  std::vector<int64_t> st = Strides(in);
  Dims kd, rd;
  std::vector<int64_t> ks, rs;
  for (size_t a = 0; a < in.size(); ++a) {
    (reduced[a] ? rd : kd).push_back(in[a]);
    (reduced[a] ? rs : ks).push_back(st[a]);
  }
  MergedAxes km = MergeAxes(kd, {ks, Strides(kd)}), rm = MergeAxes(rd, {rs});
  DType a = AccType(t);
  std::string at = CType(a);
  // Floating math of the result (LogSum, LogSumExp, L2 of integers): double for integers.
  DType mt = IsFloatingDType(a) ? a : DType::kFloat64;
  auto over = [&](const std::function<void(const std::string& v)>& f) {  // v: the element, as `a`
    if (count == 0) return;
    Nest(ctx, rm.dims, "r", [&](const std::vector<std::string>& ridx) {
      std::string e = Load(ctx, t,
                           "in0[" + std::string(km.dims.empty() ? "" : "base + ") +
                               IndexExpr(ridx, rm.strides[0]) + "]");
      ctx.Line("const " + at + " v = (" + at + ")" + e + ";");
      f("v");
    });
  };
  Nest(ctx, km.dims, "k", [&](const std::vector<std::string>& kidx) {
    if (!km.dims.empty() && count > 0)
      ctx.Line("const size_t base = " + IndexExpr(kidx, km.strides[0]) + ";");
    std::string out = "out0[" + IndexExpr(kidx, km.strides[1]) + "]";
    std::string result = "acc";
    switch (kind) {
      case Kind::kSum:
      case Kind::kMean:
      case Kind::kLogSum:
        ctx.Line(at + " acc = 0;");
        over([&](const std::string& v) { ctx.Line("acc = " + Add(a, "acc", v) + ";"); });
        break;
      case Kind::kProd:
        ctx.Line(at + " acc = 1;");
        over([&](const std::string& v) { ctx.Line("acc = " + Mul(a, "acc", v) + ";"); });
        break;
      case Kind::kSumSquare:
      case Kind::kL2:
        ctx.Line(at + " acc = 0;");
        over([&](const std::string& v) { ctx.Line("acc = " + Add(a, "acc", Mul(a, v, v)) + ";"); });
        break;
      case Kind::kL1:
        ctx.Line(at + " acc = 0;");
        over([&](const std::string& v) {
          std::string abs = IsFloatingDType(a)   ? MathName(a, "fabs") + "(" + v + ")"
                            : a == DType::kInt64 ? "(" + v + " < 0 ? (int64_t)(0u - (uint64_t)" +
                                                       v + ") : " + v + ")"
                                                 : v;
          ctx.Line("acc = " + Add(a, "acc", abs) + ";");
        });
        break;
      case Kind::kMax:
      case Kind::kMin:
      case Kind::kLogSumExp: {
        // NaN sticks, as in numpy.
        bool max = kind != Kind::kMin;
        ctx.Line(at + " acc = " + (max ? Lowest(t) : Highest(t)) + ";");
        over([&](const std::string& v) {
          std::string pick = v + (max ? " > acc" : " < acc") + " ? " + v + " : acc";
          if (IsFloatingDType(a)) pick = v + " != " + v + " ? " + v + " : (" + pick + ")";
          ctx.Line("acc = " + pick + ";");
        });
        if (kind == Kind::kLogSumExp) {
          // log(sum(exp(x - shift))) + shift, shift the maximum (0 where it is not finite).
          std::string mtype = CType(mt);
          ctx.Line("const " + mtype + " shift = isfinite((" + mtype + ")acc) ? (" + mtype +
                   ")acc : " + CNumber(mt, 0) + ";");
          ctx.Line(mtype + " sum = " + CNumber(mt, 0) + ";");
          over([&](const std::string& v) {
            ctx.Line("sum += " + MathName(mt, "exp") + "((" + mtype + ")" + v + " - shift);");
          });
          result = MathName(mt, "log") + "(sum) + shift";
        }
        break;
      }
    }
    switch (kind) {
      case Kind::kMean:
        if (IsFloatingDType(a))
          result = "acc / " + CNumber(a, static_cast<double>(count));
        else
          result = count ? "acc / " + CNumber(a, static_cast<double>(count)) : "0";
        break;
      case Kind::kL2:
        result = MathName(mt, "sqrt") + "((" + CType(mt) + ")acc)";
        break;
      case Kind::kLogSum:
        result = MathName(mt, "log") + "((" + CType(mt) + ")acc)";
        break;
      default:
        break;
    }
    ctx.Line(out + " = " + Store(ctx, t, result) + ";");
  });
  return OkStatus();
}

// ---- ArgMax / ArgMin ----

Status EmitArg(NodeContext& ctx, bool is_max) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t) && !IsInt(t))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  const Dims& in = ctx.input_dims(0);
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormAxis(&axis, in.size())) return ctx.error("axis out of range");
  if (in[axis] == 0) return ctx.error("cannot take the arg of an empty axis");
  if (NumElements(in) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const bool last = ctx.opset() >= 12 && ctx.node().attr_int("select_last_index", 0) != 0;
  DType ct = ComputeType(t);
  std::string ctype = CType(ct);
  AxisSplit s = SplitAround(in, axis);
  // NaN wins, like numpy; among equals the first (or, with select_last_index, the last) index.
  std::string cmp = std::string(is_max ? " >" : " <") + (last ? "= " : " ") + "best";
  std::string better = "v" + cmp;
  if (IsFloatingDType(t))
    better = last ? "v" + cmp + " || v != v" : "v" + cmp + " || (v != v && best == best)";
  For(ctx, s.outer, "o", [&](const Ix& o) {
    For(ctx, s.inner, "i", [&](const Ix& i) {
      auto xat = [&](const Ix& j) {
        return Load(ctx, t, "in0[" + (o * (s.len * s.inner) + j * s.inner + i).str() + "]");
      };
      ctx.Line(ctype + " best = " + xat(0) + ";");
      ctx.Line("int64_t arg = 0;");
      if (s.len > 1) {
        ctx.Line("for (size_t j = 1; j < " + S(s.len) + "; ++j) {");
        ctx.Line("  const " + ctype + " v = " + xat(Ix::Var("j")) + ";");
        ctx.Line("  if (" + better + ") {");
        ctx.Line("    best = v;");
        ctx.Line("    arg = (int64_t)j;");
        ctx.Line("  }");
        ctx.Line("}");
      } else {
        ctx.Line("(void)best;");
      }
      ctx.Line("out0[" + (o * s.inner + i).str() + "] = arg;");
    });
  });
  return OkStatus();
}

// ---- CumSum / CumProd ----

// The scan along one axis.
void EmitScanAlong(NodeContext& ctx, bool prod, const Dims& in, int64_t axis) {
  DType t = ctx.input_dtype(0);
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0,
             reverse = ctx.node().attr_int("reverse", 0) != 0;
  DType ct = ComputeType(t);  // the host's Acc<T>: float for 16-bit floats, else T
  std::string ctype = CType(ct);
  AxisSplit s = SplitAround(in, axis);
  For(ctx, s.outer, "o", [&](const Ix& o) {
    For(ctx, s.inner, "i", [&](const Ix& i) {
      ctx.Line(ctype + " run = " + (prod ? "1" : "0") + ";");
      For(ctx, s.len, "j", [&](const Ix& j) {
        const Ix along = reverse ? Ix(s.len - 1) - j : j;
        const std::string at = (o * (s.len * s.inner) + along * s.inner + i).str();
        if (exclusive) ctx.Line("out0[" + at + "] = " + Store(ctx, t, "run", ct) + ";");
        std::string v = Load(ctx, t, "in0[" + at + "]");
        std::string next = IsFloatingDType(ct) ? (prod ? "run * " : "run + ") + v
                                               : "(" + ctype + ")((uint64_t)run " +
                                                     (prod ? "*" : "+") + " (uint64_t)" + v + ")";
        ctx.Line("run = " + next + ";");
        if (!exclusive) ctx.Line("out0[" + at + "] = " + Store(ctx, t, "run", ct) + ";");
      });
    });
  });
}

Status EmitScan(NodeContext& ctx, bool prod) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t) && !IsInt(t))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  if (!ctx.has_input(1) || NumElements(ctx.input_dims(1)) != 1)
    return ctx.error("'axis' must be a scalar");
  const Dims& in = ctx.input_dims(0);
  if (NumElements(in) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (ctx.input_constant(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> av, ConstantInts(ctx, 1));
    int64_t axis = av[0];
    if (!NormAxis(&axis, in.size())) return ctx.error("axis out of range");
    EmitScanAlong(ctx, prod, in, axis);
    return OkStatus();
  }
  // An axis known only at run time: one scan per possible axis, chosen by its value.
  if (in.empty()) return ctx.error("needs an input of rank >= 1");
  ctx.SetCanFail();
  const int64_t rank = static_cast<int64_t>(in.size());
  ctx.Line("int64_t axis = (int64_t)in1[0];");
  ctx.Line("if (axis < 0) axis += " + S(rank) + ";");
  ctx.Line("switch (axis) {");
  for (int64_t a = 0; a < rank; ++a) {
    ctx.Line("  case " + S(a) + ": {");
    ctx.Indent();
    ctx.Indent();
    EmitScanAlong(ctx, prod, in, a);
    ctx.Line("break;");
    ctx.Dedent();
    ctx.Dedent();
    ctx.Line("  }");
  }
  ctx.Line("  default:");
  ctx.Line("    return KILN_ERROR_INVALID_DATA;");
  ctx.Line("}");
  return OkStatus();
}

// ---- TopK ----

// The k best of each slice along the axis, best first (ties keep the smaller index; NaN ranks
// above every number when largest, below when smallest), by insertion into the outputs
// themselves: O(len * k) compares and no scratch memory.
Status EmitTopK(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t) && !IsInt(t))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  const Dims& in = ctx.input_dims(0);
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormAxis(&axis, in.size())) return ctx.error("axis out of range");
  int64_t k = 0;
  if (ctx.opset() < 10) {
    k = ctx.node().attr_int("k", 0);
  } else {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ConstantInts(ctx, 1));
    if (kv.size() != 1) return ctx.error("'K' must hold one value");
    k = kv[0];
  }
  if (k < 0 || k > in[axis]) return ctx.error("k is out of range");
  const bool values = ctx.has_output(0), indices = ctx.num_outputs() > 1 && ctx.has_output(1);
  if (k == 0 || NumElements(in) == 0 || (!values && !indices)) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const bool largest = ctx.opset() < 11 || ctx.node().attr_int("largest", 1) != 0;
  DType ct = ComputeType(t);
  std::string ctype = CType(ct);
  AxisSplit s = SplitAround(in, axis);
  auto x = [&](const std::string& j) {
    return "in0[o * " + S(s.len * s.inner) + " + " + j + " * " + S(s.inner) + " + i]";
  };
  auto y = [&](int out, const std::string& q) {
    return NodeContext::out(out) + "[o * " + S(k * s.inner) + " + " + q + " * " + S(s.inner) +
           " + i]";
  };
  // The value at output position q (read back from the values, or through the index).
  auto val = [&](const std::string& q) {
    return Load(ctx, t, values ? y(0, q) : x("(size_t)" + y(1, q)));
  };
  std::string better = largest ? "v > w || (v != v && w == w)" : "v < w || (w != w && v == v)";
  if (!IsFloatingDType(t)) better = largest ? "v > w" : "v < w";
  Loop(ctx, s.outer, "o", [&] {
    Loop(ctx, s.inner, "i", [&] {
      ctx.Line("size_t cnt = 0;");
      Loop(ctx, s.len, "j", [&] {
        ctx.Line("const " + ctype + " v = " + Load(ctx, t, x("j")) + ";");
        ctx.Line("size_t p = cnt;");
        ctx.Line("while (p > 0) {");
        ctx.Indent();
        ctx.Line("const " + ctype + " w = " + val("(p - 1)") + ";");
        ctx.Line("if (!(" + better + ")) break;");
        ctx.Line("if (p < " + S(k) + ") {");
        if (values) ctx.Line("  " + y(0, "p") + " = " + y(0, "(p - 1)") + ";");
        if (indices) ctx.Line("  " + y(1, "p") + " = " + y(1, "(p - 1)") + ";");
        ctx.Line("}");
        ctx.Line("--p;");
        ctx.Dedent();
        ctx.Line("}");
        ctx.Line("if (p < " + S(k) + ") {");
        if (values) ctx.Line("  " + y(0, "p") + " = " + x("j") + ";");
        if (indices) ctx.Line("  " + y(1, "p") + " = (int64_t)j;");
        ctx.Line("}");
        ctx.Line("if (cnt < " + S(k) + ") ++cnt;");
      });
    });
  });
  return OkStatus();
}

}  // namespace

void RegisterReduceEmitters(EmitterRegistry& r) {
  const std::pair<const char*, Kind> reductions[] = {
      {"ReduceSum", Kind::kSum},       {"ReduceMean", Kind::kMean},
      {"ReduceMax", Kind::kMax},       {"ReduceMin", Kind::kMin},
      {"ReduceProd", Kind::kProd},     {"ReduceSumSquare", Kind::kSumSquare},
      {"ReduceL1", Kind::kL1},         {"ReduceL2", Kind::kL2},
      {"ReduceLogSum", Kind::kLogSum}, {"ReduceLogSumExp", Kind::kLogSumExp}};
  for (const auto& [op, kind] : reductions)
    r.Register(op, [kind = kind](NodeContext& ctx) { return EmitReduce(ctx, kind); });
  r.Register("ArgMax", [](NodeContext& ctx) { return EmitArg(ctx, true); });
  r.Register("ArgMin", [](NodeContext& ctx) { return EmitArg(ctx, false); });
  r.Register("CumSum", [](NodeContext& ctx) { return EmitScan(ctx, false); });
  r.Register("CumProd", [](NodeContext& ctx) { return EmitScan(ctx, true); });
  r.Register("TopK", EmitTopK);
}

}  // namespace kiln::codegen::c
