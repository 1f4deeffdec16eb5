// C emitters for the element-wise and activation families: unary maps, broadcasting binary and
// variadic ops, comparisons, Where, Clip, Cast. Each node becomes one loop nest over the output
// with the operands' broadcast strides folded into the index expressions at compile time;
// 16-bit floats are computed in float (kernels/reference/half.c) like the host executor does.
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/elementwise_kernels.h"
#include "ops/unary_ops.h"

namespace kiln::codegen::c {

namespace {

using Args = std::vector<std::string>;
using ExprFn = std::function<Expected<std::string>(NodeContext&, DType ct, const Args&)>;

bool IsInt(DType t) { return IsSignedIntDType(t) || IsUnsignedIntDType(t); }

// Wrapping integer arithmetic without signed overflow: computed in the unsigned type (at least
// unsigned int, so small types cannot overflow a promoted int).
std::string IntArith(DType t, const std::string& op, const std::string& a, const std::string& b) {
  std::string u = DTypeSize(t) == 8 ? "uint64_t" : "uint32_t";
  return "(" + CType(t) + ")((" + u + ")(" + a + ") " + op + " (" + u + ")(" + b + "))";
}

// A map of x that only floating-point types have.
ExprFn FloatExpr(std::function<std::string(NodeContext&, DType, const std::string&)> f) {
  return [f](NodeContext& ctx, DType ct, const Args& a) -> Expected<std::string> {
    if (!IsFloatingDType(ct)) return ctx.error("needs a floating-point input");
    return f(ctx, ct, a[0]);
  };
}

// An op of ops/unary_ops.h: its formula, printed.
template <class Op>
ExprFn FormulaExpr() {
  return [](NodeContext& ctx, DType ct, const Args& a) -> Expected<std::string> {
    return FormulaC(Op(ctx.node())(ops::SymExpr::Var(a[0])), ct);
  };
}

// The unary ops: the formulas of ops/unary_ops.h, and those with integer or boolean rules.
const std::map<std::string, ExprFn>& UnaryOps() {
  static const auto* m = [] {
    auto* t = new std::map<std::string, ExprFn>{
        {"Abs",
         [](NodeContext&, DType t, const Args& a) -> Expected<std::string> {
           if (IsFloatingDType(t)) return MathName(t, "fabs") + "(" + a[0] + ")";
           if (IsSignedIntDType(t))
             return "(" + a[0] + " < 0 ? " + IntArith(t, "-", "0", a[0]) + " : " + a[0] + ")";
           return a[0];
         }},
        {"Neg",
         [](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
           if (IsFloatingDType(t)) return "-" + a[0];
           if (IsSignedIntDType(t)) return IntArith(t, "-", "0", a[0]);
           return ctx.error("needs a signed input");
         }},
        {"Sign",
         [](NodeContext&, DType t, const Args& a) -> Expected<std::string> {
           if (IsUnsignedIntDType(t)) return "(" + a[0] + " > 0 ? 1 : 0)";
           return "(" + a[0] + " > 0 ? " + CNumber(t, 1) + " : (" + a[0] + " < 0 ? " +
                  CNumber(t, -1) + " : " + a[0] + "))";
         }},
        {"Not",
         [](NodeContext&, DType, const Args& a) -> Expected<std::string> { return "!" + a[0]; }},
        {"BitwiseNot",
         [](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
           if (!IsInt(t)) return ctx.error("needs an integer input");
           return "(" + CType(t) + ")~" + a[0];
         }},
        {"Shrink", FloatExpr([](NodeContext& ctx, DType t, const std::string& x) {
           std::string l = CNumber(t, ctx.node().attr_float("lambd", 0.5f)),
                       b = CNumber(t, ctx.node().attr_float("bias", 0.0f));
           return "(" + x + " < -" + l + " ? " + x + " + " + b + " : (" + x + " > " + l + " ? " +
                  x + " - " + b + " : " + CNumber(t, 0) + "))";
         })},
        {"IsNaN", FloatExpr([](NodeContext&, DType, const std::string& x) {
           return "(" + x + " != " + x + ")";
         })},
        {"IsInf", FloatExpr([](NodeContext& ctx, DType t, const std::string& x) {
           bool neg = ctx.node().attr_int("detect_negative", 1) != 0,
                pos = ctx.node().attr_int("detect_positive", 1) != 0;
           std::string inf =
               "(" + x + " == " + (t == DType::kFloat64 ? "(double)INFINITY" : "INFINITY") + ")";
           std::string ninf =
               "(" + x + " == -" + (t == DType::kFloat64 ? "(double)INFINITY" : "INFINITY") + ")";
           if (pos && neg) return "(" + inf + " || " + ninf + ")";
           return pos ? inf : neg ? ninf : std::string("0");
         })},
    };
    ops::unary::ForEachUnaryFormulaOp([&]<class Op>() { (*t)[Op::kName] = FormulaExpr<Op>(); });
    return t;
  }();
  return *m;
}

// Binary ops over one dtype (the output dtype is the input's, or bool for comparisons).
const std::map<std::string, ExprFn>& BinaryOps() {
  auto arith = [](const char* op) {
    return [op = std::string(op)](NodeContext&, DType t, const Args& a) -> Expected<std::string> {
      if (IsSignedIntDType(t) || (IsUnsignedIntDType(t) && DTypeSize(t) < 4 && op == "*"))
        return IntArith(t, op, a[0], a[1]);
      return "(" + a[0] + " " + op + " " + a[1] + ")";
    };
  };
  auto cmp = [](const char* op) {
    return [op = std::string(op)](NodeContext&, DType, const Args& a) -> Expected<std::string> {
      return "(" + a[0] + " " + op + " " + a[1] + ")";
    };
  };
  auto bits = [](const char* op) {
    return
        [op = std::string(op)](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
          if (!IsInt(t)) return ctx.error("needs integer inputs");
          return "(" + CType(t) + ")(" + a[0] + " " + op + " " + a[1] + ")";
        };
  };
  static const auto* m = new std::map<std::string, ExprFn>{
      {"Add", arith("+")},
      {"Sub", arith("-")},
      {"Mul", arith("*")},
      {"Div",
       [](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
         if (IsInt(t)) {
           ctx.UseKernel("intmath");
           return "kiln_intmath_div_" + CSuffix(t) + "(" + a[0] + ", " + a[1] + ")";
         }
         return "(" + a[0] + " / " + a[1] + ")";
       }},
      {"Mod",
       [](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
         bool fmod = ctx.node().attr_int("fmod", 0) == 1;
         if (IsFloatingDType(t)) {
           std::string m = MathName(t, "fmod") + "(" + a[0] + ", " + a[1] + ")";
           if (fmod) return m;
           return "(" + m + " != " + m + " ? " + CNumber(t, 0) + " : " + m + ")";
         }
         ctx.UseKernel("intmath");
         return "kiln_intmath_" + std::string(fmod ? "fmod_" : "mod_") + CSuffix(t) + "(" + a[0] +
                ", " + a[1] + ")";
       }},
      {"BitShift",
       [](NodeContext& ctx, DType t, const Args& a) -> Expected<std::string> {
         if (!IsUnsignedIntDType(t)) return ctx.error("needs unsigned inputs");
         bool left = ctx.node().attr_string("direction", "") == "LEFT";
         std::string bitsz = std::to_string(DTypeSize(t) * 8);
         std::string wide = DTypeSize(t) == 8 ? "(uint64_t)" : "(uint32_t)";
         return "(" + a[1] + " >= " + bitsz + " ? 0 : (" + CType(t) + ")(" + wide + a[0] +
                (left ? " << " : " >> ") + a[1] + "))";
       }},
      {"BitwiseAnd", bits("&")},
      {"BitwiseOr", bits("|")},
      {"BitwiseXor", bits("^")},
      {"And", cmp("&&")},
      {"Or", cmp("||")},
      {"Xor",
       [](NodeContext&, DType, const Args& a) -> Expected<std::string> {
         return "(!" + a[0] + " != !" + a[1] + ")";
       }},
      {"Equal", cmp("==")},
      {"Less", cmp("<")},
      {"LessOrEqual", cmp("<=")},
      {"Greater", cmp(">")},
      {"GreaterOrEqual", cmp(">=")},
  };
  return *m;
}

Status EmitMap(NodeContext& ctx, const ExprFn& f, int arity) {
  DType in_t = ctx.input_dtype(0), out_t = ctx.output_dtype(0);
  DType ct = ComputeType(in_t);
  std::vector<int> inputs;
  std::vector<Dims> dims;
  for (int i = 0; i < arity; ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    inputs.push_back(i);
    dims.push_back(i == 1 ? ops::LegacyBroadcastDims(ctx.node(), ctx.opset(), ctx.input_dims(0),
                                                     ctx.input_dims(1))
                          : ctx.input_dims(i));
  }
  Status st = OkStatus();
  EmitBroadcast(ctx, inputs, dims, ctx.output_dims(0), [&](const Args& raw) {
    Args a;
    for (size_t k = 0; k < raw.size(); ++k)
      a.push_back(Load(ctx, ctx.input_dtype(inputs[k]), raw[k]));
    auto e = f(ctx, ct, a);
    if (!e.ok()) {
      st = e.status();
      return std::string("0");
    }
    return Store(ctx, out_t, *e, ct);
  });
  return st;
}

void RegisterMaps(EmitterRegistry& r) {
  for (const auto& [op, f] : UnaryOps()) {
    r.Register(op, [f = f](NodeContext& ctx) { return EmitMap(ctx, f, 1); });
  }
  for (const auto& [op, f] : BinaryOps()) {
    r.Register(op, [f = f](NodeContext& ctx) { return EmitMap(ctx, f, 2); });
  }
  ops::unary::ForEachUnaryFormulaOp([&]<class Op>() {
    if constexpr (ops::unary::HasOtherDomain<Op>)
      r.Register(
          Op::kName, [](NodeContext& ctx) { return EmitMap(ctx, FormulaExpr<Op>(), 1); },
          Op::kOtherDomain);
  });
}

// Pow: the exponent may have another dtype; squares and square roots are spelled out.
Status EmitPow(NodeContext& ctx) {
  DType bt = ctx.input_dtype(0), et = ctx.input_dtype(1);
  DType ct = ComputeType(bt);
  const Tensor* ec = ctx.input_constant(1);
  double e0 = 0;
  bool scalar_exp = ec && ec->size() == 1;
  if (scalar_exp) e0 = ElementAsDouble(*ec, 0);
  EmitBroadcast(ctx, {0, 1},
                {ctx.input_dims(0), ops::LegacyBroadcastDims(ctx.node(), ctx.opset(),
                                                             ctx.input_dims(0), ctx.input_dims(1))},
                ctx.output_dims(0), [&](const Args& raw) {
                  std::string a = Load(ctx, bt, raw[0]), b = Load(ctx, et, raw[1]);
                  std::string e;
                  if (IsFloatingDType(ct)) {
                    if (scalar_exp && e0 == 2.0)
                      e = a + " * " + a;
                    else if (scalar_exp && e0 == 0.5)
                      e = MathName(ct, "sqrt") + "(" + a + ")";
                    else
                      e = "(" + CType(ct) + ")pow((double)" + a + ", (double)" + b + ")";
                  } else if (!IsFloatingDType(et)) {
                    ctx.UseKernel("intmath");
                    e = "kiln_intmath_pow_" + CSuffix(bt) + "(" + a + ", (int64_t)" + b + ")";
                  } else {
                    ctx.UseKernel("intmath");
                    e = "(" + CType(bt) + ")(uint64_t)kiln_intmath_from_double(pow((double)" + a +
                        ", (double)" + b + "))";
                  }
                  return Store(ctx, bt, e);
                });
  return OkStatus();
}

// Sum / Mean / Max / Min over any number of broadcast inputs.
Status EmitVariadic(NodeContext& ctx, const std::string& op) {
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::vector<int> inputs;
  std::vector<Dims> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    inputs.push_back(i);
    dims.push_back(ctx.input_dims(i));
  }
  if (inputs.empty()) return ctx.error("has no inputs");
  if ((op == "Mean") && !IsFloatingDType(t)) return ctx.error("Mean needs floating-point inputs");
  EmitBroadcast(ctx, inputs, dims, ctx.output_dims(0), [&](const Args& raw) {
    std::string acc = Load(ctx, t, raw[0]);
    for (size_t k = 1; k < raw.size(); ++k) {
      std::string b = Load(ctx, t, raw[k]);
      if (op == "Sum" || op == "Mean") {
        acc = IsSignedIntDType(t) ? IntArith(t, "+", acc, b) : "(" + acc + " + " + b + ")";
      } else {
        // NaN propagates, as numpy's maximum / minimum do.
        std::string cmp = op == "Max" ? " > " : " < ";
        std::string nan = IsFloatingDType(ct) ? " || " + acc + " != " + acc : "";
        if (k > 1) {  // bind the running value once to keep the expression small
          ctx.Line(CType(ct) + " acc" + std::to_string(k) + " = " + acc + ";");
          acc = "acc" + std::to_string(k);
          nan = IsFloatingDType(ct) ? " || " + acc + " != " + acc : "";
        }
        acc = "((" + acc + cmp + b + nan + ") ? " + acc + " : " + b + ")";
      }
    }
    if (op == "Mean") acc = "(" + acc + " / " + CNumber(ct, static_cast<double>(raw.size())) + ")";
    return Store(ctx, t, acc);
  });
  return OkStatus();
}

Status EmitWhere(NodeContext& ctx) {
  EmitBroadcast(ctx, {0, 1, 2}, {ctx.input_dims(0), ctx.input_dims(1), ctx.input_dims(2)},
                ctx.output_dims(0),
                [&](const Args& a) { return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")"; });
  return OkStatus();
}

// Clip: bounds from attributes (before opset 11) or from optional scalar inputs.
Status EmitClip(NodeContext& ctx) {
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string lo, hi;
  if (ctx.opset() < 11) {
    if (ctx.node().attr("min")) lo = CNumber(ct, ctx.node().attr_float("min", 0));
    if (ctx.node().attr("max")) hi = CNumber(ct, ctx.node().attr_float("max", 0));
  } else {
    if (ctx.has_input(1)) lo = Load(ctx, t, NodeContext::in(1) + "[0]");
    if (ctx.has_input(2)) hi = Load(ctx, t, NodeContext::in(2) + "[0]");
  }
  EmitBroadcast(ctx, {0}, {ctx.input_dims(0)}, ctx.output_dims(0), [&](const Args& raw) {
    std::string x = Load(ctx, t, raw[0]);
    std::string e = x;
    if (!lo.empty()) e = "(" + e + " < " + lo + " ? " + lo + " : " + e + ")";
    if (!hi.empty()) e = "(" + e + " > " + hi + " ? " + hi + " : " + e + ")";
    return Store(ctx, t, e);
  });
  return OkStatus();
}

Status EmitCast(NodeContext& ctx) {
  DType from = ctx.input_dtype(0), to = ctx.output_dtype(0);
  EmitBroadcast(ctx, {0}, {ctx.input_dims(0)}, ctx.output_dims(0), [&](const Args& raw) {
    std::string x = Load(ctx, from, raw[0]);
    if (to == DType::kBool) return "(uint8_t)(" + x + " != 0)";
    if (from == DType::kBool) x = "(" + x + " != 0)";
    if (IsFloatingDType(from) && !IsFloatingDType(to)) {  // no undefined behaviour on NaN or range
      ctx.UseKernel("intmath");
      return "(" + CType(to) + ")(uint64_t)kiln_intmath_from_double((double)" + x + ")";
    }
    return Store(ctx, to, x);
  });
  return OkStatus();
}

// PRelu: the slope broadcasts to X, or (before opset 7 style) per channel along axis 1.
Status EmitPRelu(NodeContext& ctx) {
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  Dims sd = ctx.input_dims(1), x = ctx.input_dims(0), d;
  if (!(ops::BroadcastDims(x, sd, &d) && d == x) && sd.size() == 1 && x.size() >= 2 &&
      sd[0] == x[1]) {
    Dims c(x.size(), 1);
    c[1] = sd[0];
    sd = c;
  }
  EmitBroadcast(ctx, {0, 1}, {x, sd}, ctx.output_dims(0), [&](const Args& raw) {
    std::string a = Load(ctx, t, raw[0]), s = Load(ctx, ctx.input_dtype(1), raw[1]);
    return Store(ctx, t,
                 "(" + a + " < " + CNumber(ct, 0) + " ? " + s + " * " + a + " : " + a + ")");
  });
  return OkStatus();
}

}  // namespace

Expected<std::string> UnaryExpr(NodeContext& ctx, DType t, const std::string& x) {
  auto it = UnaryOps().find(ctx.node().op_type);
  if (it == UnaryOps().end()) return ctx.error("is not a unary element-wise op");
  return it->second(ctx, t, {x});
}

void RegisterElementwiseEmitters(EmitterRegistry& r) {
  RegisterMaps(r);
  r.Register("Pow", EmitPow);
  for (const char* op : {"Sum", "Mean", "Max", "Min"})
    r.Register(op, [op = std::string(op)](NodeContext& ctx) { return EmitVariadic(ctx, op); });
  r.Register("Where", EmitWhere);
  r.Register("Clip", EmitClip);
  r.Register("Cast", EmitCast);
  r.Register("CastLike", EmitCast);
  r.Register("PRelu", EmitPRelu);
}

}  // namespace kiln::codegen::c
