// C emitters for QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked scales; int8,
// uint8, int16, uint16 and, for DequantizeLinear, int32 data) and DynamicQuantizeLinear. The
// arithmetic is the host's (ops/quantize.cc), which follows the ONNX reference: the division in
// the precision numpy would use (float for float inputs, rounded to a 16-bit float type when x and
// the scale are one), round half to even, then the zero point and saturation. Scales and zero
// points are read at run time, so constant and computed ones are handled alike.
#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/quantize.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool IsQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}

// Where the scale element of each x element lives, as the host's QuantLayout: x is viewed as
// [outer, n_axis, inner]; per-tensor (one scale), per-axis (scale[a]) or blocked along the axis.
struct Layout {
  int kind = 0;
  int64_t outer = 1, n_axis = 1, inner = 1, block = 1, n_blocks = 1;
};

std::string MakeLayout(const Dims& x, const Dims& scale, int64_t axis, int64_t block_size,
                       Layout* l) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (NumElements(scale) == 1 && (block_size <= 0 || scale.size() <= 1)) {
    l->kind = 0;
    l->outer = NumElements(x);
    return "";
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return "axis out of range";
  for (int64_t d = 0; d < axis; ++d) l->outer *= x[d];
  for (int64_t d = axis + 1; d < rank; ++d) l->inner *= x[d];
  l->n_axis = x[axis];
  if (block_size <= 0) {
    if (scale.size() != 1 || scale[0] != x[axis])
      return "per-axis scale must be 1-D with one element per axis entry";
    l->kind = 1;
    return "";
  }
  if (static_cast<int64_t>(scale.size()) != rank) return "blocked scale must have the rank of x";
  int64_t nb = (x[axis] + block_size - 1) / block_size;
  for (int64_t d = 0; d < rank; ++d)
    if (scale[d] != (d == axis ? nb : x[d]))
      return "blocked scale shape does not match x and block_size";
  l->kind = 2;
  l->block = block_size;
  l->n_blocks = nb;
  return "";
}

// Opens the loops over x's elements (axes of extent 1 left out) and declares `e`, the element;
// returns the scale index expression. CloseLoops closes them.
std::string OpenLoops(NodeContext& ctx, const Layout& l, int* depth) {
  *depth = 0;
  if (l.kind == 0) {
    ctx.Line("for (size_t e = 0; e < " + S(l.outer) + "; ++e) {");
    ctx.Indent();
    *depth = 1;
    return "0";
  }
  const std::vector<std::string> names = {"o", "a", "i"};
  const std::vector<int64_t> extents = {l.outer, l.n_axis, l.inner};
  std::vector<std::string> idx;
  std::vector<int64_t> strides;
  const std::vector<int64_t> all = {l.n_axis * l.inner, l.inner, 1};
  for (int k = 0; k < 3; ++k) {
    if (extents[k] == 1) continue;
    ctx.Line("for (size_t " + names[k] + " = 0; " + names[k] + " < " + S(extents[k]) + "; ++" +
             names[k] + ") {");
    ctx.Indent();
    ++*depth;
    idx.push_back(names[k]);
    strides.push_back(all[k]);
  }
  ctx.Line("const size_t e = " + IndexExpr(idx, strides) + ";");
  if (l.kind == 1) return l.n_axis == 1 ? "0" : "a";
  std::vector<std::string> terms;
  if (l.outer > 1) terms.push_back("o * " + S(l.n_blocks * l.inner));
  if (l.n_blocks > 1)
    terms.push_back("(a / " + S(l.block) + ")" + (l.inner == 1 ? "" : " * " + S(l.inner)));
  if (l.inner > 1) terms.push_back("i");
  std::string si;
  for (const auto& t : terms) si += (si.empty() ? "" : " + ") + t;
  return si.empty() ? "0" : si;
}

void CloseLoops(NodeContext& ctx, int depth) {
  for (int k = 0; k < depth; ++k) {
    ctx.Dedent();
    ctx.Line("}");
  }
}

Status CheckZeroPoint(NodeContext& ctx, bool has_zp) {
  if (has_zp && ctx.input_dims(2) != ctx.input_dims(1) &&
      !(NumElements(ctx.input_dims(2)) == 1 && NumElements(ctx.input_dims(1)) == 1))
    return ctx.error("zero point shape differs from scale shape");
  return OkStatus();
}

// A float expression rounded to the 16-bit float type t (kFloat16 / kBFloat16).
std::string RoundTo16(NodeContext& ctx, DType t, const std::string& f) {
  ctx.UseKernel("half");
  return t == DType::kFloat16 ? "kiln_half_f16_to_f32(kiln_half_f32_to_f16(" + f + "))"
                              : "kiln_half_bf16_to_f32(kiln_half_f32_to_bf16(" + f + "))";
}

Status EmitQuantize(NodeContext& ctx) {
  DType xt = ctx.input_dtype(0), st = ctx.input_dtype(1), yt = ctx.output_dtype(0);
  if (!IsFloatingDType(xt) && xt != DType::kInt32) return ctx.error("x must be float or int32");
  if (!IsFloatingDType(st)) return ctx.error("y_scale must be a float tensor");
  if (!IsQuantType(yt))
    return ctx.error("quantized type " + std::string(DTypeName(yt)) + " is not supported");
  const bool has_zp = ctx.has_input(2) && NumElements(ctx.input_dims(2)) > 0;
  KILN_RETURN_IF_ERROR(CheckZeroPoint(ctx, has_zp));
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  Layout l;
  std::string m =
      MakeLayout(ctx.input_dims(0), ctx.input_dims(1), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (NumElements(ctx.input_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const int64_t precision = ctx.opset() >= 23 ? ctx.node().attr_int("precision", 0) : 0;
  int depth;
  std::string si = OpenLoops(ctx, l, &depth);
  std::string zi = has_zp && NumElements(ctx.input_dims(2)) == 1 ? "0" : si;
  std::string x = Load(ctx, xt, "in0[e]"), s = Load(ctx, st, "in1[" + si + "]");
  // q: x / scale in the host's precision; double only where the host divides in double.
  bool dbl = false;
  std::string q;
  if (precision == static_cast<int64_t>(DType::kFloat32)) {
    q = "(float)" + x + " / (float)" + s;
  } else if (precision == static_cast<int64_t>(DType::kFloat64)) {
    dbl = true;
    q = "(double)" + x + " / (double)" + s;
  } else if (precision == static_cast<int64_t>(DType::kFloat16) ||
             precision == static_cast<int64_t>(DType::kBFloat16)) {
    DType p = static_cast<DType>(precision);
    q = RoundTo16(ctx, p,
                  RoundTo16(ctx, p, "(float)" + x) + " / " + RoundTo16(ctx, p, "(float)" + s));
  } else if (xt == DType::kInt32 || xt == DType::kFloat64 || st == DType::kFloat64) {
    dbl = true;
    q = "(double)" + x + " / (double)" + s;
  } else if (xt == st && (xt == DType::kFloat16 || xt == DType::kBFloat16)) {
    q = RoundTo16(ctx, xt, x + " / " + s);
  } else {
    q = "(float)" + x + " / (float)" + s;
  }
  DType ct = dbl ? DType::kFloat64 : DType::kFloat32;
  std::string ctn = CType(ct);
  double lo, hi;
  ops::QuantRange(yt, &lo, &hi);
  ctx.Line(ctn + " q = " + q + ";");
  ctx.Line("if (q != q) q = " + CNumber(ct, 0) + ";");
  if (!dbl) ctx.UseKernel("round");
  ctx.Line("q = " + std::string(dbl ? "nearbyint" : "kiln_round_even_f32") + "(q)" +
           (has_zp ? " + (" + ctn + ")in2[" + zi + "]" : "") + ";");
  ctx.Line("q = q < " + CNumber(ct, lo) + " ? " + CNumber(ct, lo) + " : (q > " + CNumber(ct, hi) +
           " ? " + CNumber(ct, hi) + " : q);");
  ctx.Line("out0[e] = (" + CType(yt) + ")q;");
  CloseLoops(ctx, depth);
  return OkStatus();
}

Status EmitDequantize(NodeContext& ctx) {
  DType xt = ctx.input_dtype(0), st = ctx.input_dtype(1), yt = ctx.output_dtype(0);
  if (!IsQuantType(xt) && xt != DType::kInt32)
    return ctx.error("x type " + std::string(DTypeName(xt)) + " is not supported");
  if (!IsFloatingDType(st) || !IsFloatingDType(yt))
    return ctx.error("x_scale and y must be float tensors");
  const bool has_zp = ctx.has_input(2) && NumElements(ctx.input_dims(2)) > 0;
  KILN_RETURN_IF_ERROR(CheckZeroPoint(ctx, has_zp));
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  Layout l;
  std::string m =
      MakeLayout(ctx.input_dims(0), ctx.input_dims(1), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (NumElements(ctx.input_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  int depth;
  std::string si = OpenLoops(ctx, l, &depth);
  std::string zi = has_zp && NumElements(ctx.input_dims(2)) == 1 ? "0" : si;
  // The reference computes in float32, in double only for double scales.
  DType ct = st == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  std::string c = "(" + CType(ct) + ")";
  std::string v = "(" + c + "in0[e]" + (has_zp ? " - " + c + "in2[" + zi + "]" : "") + ") * " + c +
                  Load(ctx, st, "in1[" + si + "]");
  ctx.Line("out0[e] = " + Store(ctx, yt, v) + ";");
  CloseLoops(ctx, depth);
  return OkStatus();
}

Status EmitDynamicQuantize(NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32) return ctx.error("x must be float32");
  const int64_t n = NumElements(ctx.input_dims(0));
  ctx.Line("float mx = 0.0f, mn = 0.0f, scale, zp;");
  if (n > 0) {
    ctx.Line("for (size_t i = 0; i < " + S(n) + "; ++i) {");
    ctx.Line("  if (mx < in0[i]) mx = in0[i];");
    ctx.Line("  if (in0[i] < mn) mn = in0[i];");
    ctx.Line("}");
  }
  ctx.Line("scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;");
  ctx.Line("zp = 0.0f - mn / scale;");
  ctx.Line("zp = zp < 255.0f ? zp : 255.0f;");
  ctx.Line("zp = nearbyintf(0.0f < zp ? zp : 0.0f);");
  if (ctx.has_output(0) && n > 0) {
    ctx.Line("for (size_t i = 0; i < " + S(n) + "; ++i) {");
    ctx.Line("  float v = nearbyintf(in0[i] / scale) + zp;");
    ctx.Line("  if (v != v) v = 0.0f;");
    ctx.Line("  v = v < 255.0f ? v : 255.0f;");
    ctx.Line("  out0[i] = (uint8_t)(0.0f < v ? v : 0.0f);");
    ctx.Line("}");
  }
  if (ctx.has_output(1)) ctx.Line("out1[0] = scale;");
  if (ctx.has_output(2)) ctx.Line("out2[0] = (uint8_t)zp;");
  return OkStatus();
}

}  // namespace

void RegisterQuantizeEmitters(EmitterRegistry& r) {
  r.Register("QuantizeLinear", EmitQuantize);
  r.Register("DequantizeLinear", EmitDequantize);
  r.Register("DynamicQuantizeLinear", EmitDynamicQuantize);
}

}  // namespace kiln::codegen::c
