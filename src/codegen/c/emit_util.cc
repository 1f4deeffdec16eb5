#include "codegen/c/emit_util.h"

#include <cstring>

#include "codegen/c/c_names.h"
#include "ir/half.h"
#include "kernels/reference/reference_kernels.h"
#include "ops/quantize.h"

namespace kiln::codegen::c {

DType ComputeType(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 ? DType::kFloat32 : t;
}

std::string MathName(DType t, const std::string& fn) {
  return t == DType::kFloat64 ? fn : fn + "f";
}

namespace {

// A printed formula node and its C precedence: 0 a name, literal or call, 1 a unary minus or a
// cast, 2 * /, 3 + -, 4 < <= > >=, 5 == !=, 6 ?:.
struct PrintedC {
  std::string text;
  int prec;
  // The text as an operand that may be at most `max` loose.
  std::string Operand(int max) const { return prec > max ? "(" + text + ")" : text; }
};

int BinaryPrecedence(const std::string& op) {
  if (op == "*" || op == "/") return 2;
  if (op == "+" || op == "-") return 3;
  if (op == "==" || op == "!=") return 5;
  return 4;
}

PrintedC PrintC(const ops::SymExpr& e, DType t) {
  using Kind = ops::SymExpr::Kind;
  const auto& a = e.args();
  switch (e.kind()) {
    case Kind::kVar:
      return {e.text(), 0};
    case Kind::kLiteral: {
      std::string v = CNumber(t, e.value());
      return {v, v[0] == '-' || v[0] == '(' ? 1 : 0};
    }
    case Kind::kNeg:
      return {"-" + PrintC(a[0], t).Operand(0), 1};
    case Kind::kBinary: {
      const int p = BinaryPrecedence(e.text());
      // Left to right: the right operand in parentheses at the same precedence (a - (b - c)).
      return {PrintC(a[0], t).Operand(p) + " " + e.text() + " " + PrintC(a[1], t).Operand(p - 1),
              p};
    }
    case Kind::kCall: {
      std::string call = MathName(t, e.text()) + "(";
      for (size_t i = 0; i < a.size(); ++i) call += (i ? ", " : "") + PrintC(a[i], t).text;
      return {call + ")", 0};
    }
    case Kind::kSelect:
      return {PrintC(a[0], t).Operand(5) + " ? " + PrintC(a[1], t).Operand(5) + " : " +
                  PrintC(a[2], t).Operand(5),
              6};
  }
  return {"", 0};
}

}  // namespace

std::string FormulaC(const ops::SymExpr& e, DType t) { return PrintC(e, t).Operand(1); }

std::string Load(NodeContext& ctx, DType t, const std::string& expr) {
  if (t == DType::kFloat16 || t == DType::kBFloat16) {
    ctx.UseKernel("half");
    return std::string(t == DType::kFloat16 ? "kiln_half_f16_to_f32(" : "kiln_half_bf16_to_f32(") +
           expr + ")";
  }
  return expr;
}

std::string Store(NodeContext& ctx, DType t, const std::string& expr) {
  if (t == DType::kFloat16 || t == DType::kBFloat16) {
    ctx.UseKernel("half");
    return std::string(t == DType::kFloat16 ? "kiln_half_f32_to_f16((float)("
                                            : "kiln_half_f32_to_bf16((float)(") +
           expr + "))";
  }
  if (t == DType::kBool) return "(uint8_t)((" + expr + ") != 0)";
  return "(" + CType(t) + ")(" + expr + ")";
}

std::string Store(NodeContext& ctx, DType t, const std::string& expr, DType from) {
  if (from == t && (t == DType::kFloat32 || t == DType::kFloat64)) return expr;
  return Store(ctx, t, expr);
}

std::string IndexExpr(const std::vector<std::string>& idx, const std::vector<int64_t>& strides,
                      int64_t base) {
  std::string e = base ? std::to_string(base) : "";
  for (size_t k = 0; k < idx.size(); ++k) {
    if (strides[k] == 0) continue;
    std::string term = strides[k] == 1 ? idx[k] : idx[k] + " * " + std::to_string(strides[k]);
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0" : e;
}

void EmitBroadcast(NodeContext& ctx, const std::vector<int>& inputs,
                   const std::vector<Dims>& in_dims, const Dims& out_dims,
                   const std::function<std::string(const std::vector<std::string>&)>& f,
                   const std::string& out) {
  if (NumElements(out_dims) == 0) {
    ctx.Line("/* no elements */");
    return;
  }
  const size_t rank = out_dims.size(), n = inputs.size();
  // Broadcast strides of every operand (operand n is the output) over the output's axes.
  std::vector<std::vector<int64_t>> strides(n + 1, std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k <= n; ++k) {
    const Dims& d = k < n ? in_dims[k] : out_dims;
    int64_t s = 1;
    for (size_t a = 0; a < d.size() && a < rank; ++a) {
      size_t axis = rank - 1 - a, da = d.size() - 1 - a;
      strides[k][axis] = d[da] == 1 ? 0 : s;
      s *= d[da];
    }
  }
  // Merge axes.
  Dims md;
  std::vector<std::vector<int64_t>> ms(n + 1);
  for (size_t a = 0; a < rank; ++a) {
    if (out_dims[a] == 1) continue;
    bool merge = !md.empty();
    for (size_t k = 0; merge && k <= n; ++k) merge = ms[k].back() == strides[k][a] * out_dims[a];
    if (merge) {
      md.back() *= out_dims[a];
      for (size_t k = 0; k <= n; ++k) ms[k].back() = strides[k][a];
    } else {
      md.push_back(out_dims[a]);
      for (size_t k = 0; k <= n; ++k) ms[k].push_back(strides[k][a]);
    }
  }
  LoopNest(ctx, md, [&](const std::vector<std::string>& idx) {
    std::vector<std::string> args;
    for (size_t k = 0; k < n; ++k)
      args.push_back(NodeContext::in(inputs[k]) + "[" + IndexExpr(idx, ms[k]) + "]");
    std::string value = f(args);
    ctx.Line(out + "[" + IndexExpr(idx, ms[n]) + "] = " + value + ";");
  });
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  const char* p =
      static_cast<const char*>(t.raw()) + i * static_cast<int64_t>(DTypeSize(t.dtype()));
  switch (t.dtype()) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kInt8:
      return *reinterpret_cast<const int8_t*>(p);
    case DType::kUInt8:
    case DType::kBool:
      return *reinterpret_cast<const uint8_t*>(p);
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kUInt16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kUInt32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kUInt64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kFloat16: {
      Float16 v;
      std::memcpy(&v, p, 2);
      return static_cast<float>(v);
    }
    case DType::kBFloat16: {
      BFloat16 v;
      std::memcpy(&v, p, 2);
      return static_cast<float>(v);
    }
    default:
      return 0;
  }
}

Expected<std::vector<int64_t>> ConstantInts(NodeContext& ctx, int input) {
  const Tensor* t = ctx.input_constant(input);
  if (!t) return ctx.error("input " + std::to_string(input) + " must be a compile-time constant");
  std::vector<int64_t> v(static_cast<size_t>(t->size()));
  for (int64_t i = 0; i < t->size(); ++i) {
    if (t->dtype() == DType::kInt64)
      std::memcpy(&v[i], static_cast<const char*>(t->raw()) + 8 * i, 8);
    else
      v[i] = static_cast<int64_t>(ElementAsDouble(*t, i));
  }
  return v;
}

std::string ByteCount(DType t, int64_t n) {
  return std::to_string(static_cast<size_t>(n) * DTypeSize(t));
}

Expected<std::pair<std::string, std::string>> FixedPointValues(NodeContext& ctx, int xs, int ws,
                                                               int ys, int64_t channels,
                                                               bool* right_shifts) {
  const Tensor *x = ctx.input_constant(xs), *w = ctx.input_constant(ws),
               *y = ctx.input_constant(ys);
  if (!x || !w || !y || x->size() != 1 || y->size() != 1 ||
      (w->size() != 1 && w->size() != channels))
    return ctx.error("fixed-point requantization needs constant scales (1 or " +
                     std::to_string(channels) + " weight scales)");
  std::string mults, shifts;
  if (right_shifts) *right_shifts = true;
  for (int64_t c = 0; c < channels; ++c) {
    int32_t mult = 0, shift = 0;
    kiln_requant_multiplier(ops::RequantMultiplier(*x, 0, *w, w->size() == 1 ? 0 : c, *y), &mult,
                            &shift);
    mults += (c ? ", " : "") + std::to_string(mult);
    if (right_shifts && shift > -2) *right_shifts = false;
    shifts += (c ? ", " : "") + std::to_string(shift);
  }
  return std::pair{mults, shifts};
}

Expected<std::pair<std::string, std::string>> FixedPointTables(NodeContext& ctx, int xs, int ws,
                                                               int ys, int64_t channels,
                                                               bool* right_shifts) {
  KILN_ASSIGN_OR_RETURN(auto values, FixedPointValues(ctx, xs, ws, ys, channels, right_shifts));
  const std::string n = std::to_string(channels);
  return std::pair{"static const int32_t mult[" + n + "] = {" + values.first + "};",
                   "static const int8_t shift[" + n + "] = {" + values.second + "};"};
}

}  // namespace kiln::codegen::c
