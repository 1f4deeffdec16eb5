// C emitters for the remaining ops with static shapes: GridSample and AffineGrid, the signal
// ops (DFT and STFT through kernels/fft.c, the windows and MelWeightMatrix), Det, Trilu and
// ReverseSequence as row / block copies (k and sequence_lens read at run time, so they need no
// element-map table), and the ai.onnx.ml ops the host executor has (Binarizer,
// ArrayFeatureExtractor, numeric LabelEncoder, TreeEnsemble, Scaler, Normalizer,
// LinearRegressor, Imputer). Semantics follow the host kernels (src/ops/resize_grid.cc,
// misc.cc, misc_ml.cc, matmul.cc, shape_ops.cc, indexing.cc); float32 data is computed in
// float (the host often uses double: results agree to rounding), float64 in double and the
// 16-bit floats in float. Indices read at run time are checked: KILN_ERROR_INVALID_DATA.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <map>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/common.h"
#include "ops/ml_plans.h"
#include "ops/op.h"

namespace kiln::codegen::c {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string S(int64_t v) { return std::to_string(v); }

int64_t Prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p *= d[i];
  return p;
}

bool IsInt(DType t) { return IsSignedIntDType(t) || IsUnsignedIntDType(t); }

// A literal of type ct ("float" / "double") for v.
std::string L(DType ct, double v) { return CNumber(ct, v); }

// A static const table named <function>_<suffix> of C literals; returns its name.
std::string Table(NodeContext& ctx, const std::string& type, const std::string& suffix,
                  const std::vector<std::string>& values) {
  std::string name = ctx.function_name + "_" + suffix;
  std::string s = "static const " + type + " " + name + "[" +
                  S(static_cast<int64_t>(std::max<size_t>(values.size(), 1))) + "] = {";
  for (size_t j = 0; j < values.size(); ++j) s += (j % 8 ? " " : "\n    ") + values[j] + ",";
  if (values.empty()) s += "0";
  ctx.Table(s + "\n};\n");
  return name;
}

// The value v as the host stores it in an element of type t (ConvertValue), as a C literal.
template <class V>
std::string ValueLiteral(DType t, V v) {
  std::string out;
  ops::Dispatch<ops::kAllTypes>(t, [&]<class T>() {
    T x = ops::ConvertValue<T>(v);
    out = CLiteral(t, &x);
  });
  return out;
}

// Lines computing the host's PostTransform (misc_ml.cc) over row[0 .. n) of compute type ct.
void EmitPostTransform(NodeContext& ctx, int64_t post, DType ct, const std::string& row,
                       int64_t n) {
  if (post == ops::kPostNone) return;
  const std::string c = CType(ct), q = ctx.Temp();
  auto F = [&](const char* f) { return MathName(ct, f); };
  ctx.Line("{");
  ctx.Indent();
  ctx.Line("size_t " + q + ";");
  std::string loop = "for (" + q + " = 0; " + q + " < " + S(n) + "; ++" + q + ")";
  std::string a = row + "[" + q + "]";
  if (post == ops::kPostSoftmax || post == ops::kPostSoftmaxZero) {
    ctx.Line(c + " mx = -INFINITY, sum = " + L(ct, 0) + ";");
    ctx.Line(loop + " if (mx < " + a + ") mx = " + a + ";");
    ctx.Line(loop + " {");
    if (post == ops::kPostSoftmaxZero)
      ctx.Line("  " + a + " = " + a + " == " + L(ct, 0) + " ? " + L(ct, 0) + " : " + F("exp") +
               "(" + a + " - mx);");
    else
      ctx.Line("  " + a + " = " + F("exp") + "(" + a + " - mx);");
    ctx.Line("  sum += " + a + ";");
    ctx.Line("}");
    ctx.Line(loop + " " + a + " = sum > " + L(ct, 0) + " ? " + a + " / sum : " + L(ct, 0) + ";");
  } else if (post == ops::kPostLogistic) {
    ctx.Line(loop + " " + a + " = " + L(ct, 1) + " / (" + L(ct, 1) + " + " + F("exp") + "(-" + a +
             "));");
  } else if (post == ops::kPostProbit) {
    // probit: sqrt(2) * erfinv(2p - 1) by 60 Newton steps on erf, as the host.
    ctx.Line(loop + " {");
    ctx.Indent();
    ctx.Line(c + " y = " + L(ct, 2) + " * " + a + " - " + L(ct, 1) + ", z = " + L(ct, 0) + ";");
    ctx.Line("int it;");
    ctx.Line("if (y <= " + L(ct, -1) + " || y >= " + L(ct, 1) + ") {");
    ctx.Line("  " + a + " = y <= " + L(ct, -1) + " ? -INFINITY : INFINITY;");
    ctx.Line("  continue;");
    ctx.Line("}");
    ctx.Line("for (it = 0; it < 60; ++it) z -= (" + F("erf") + "(z) - y) / (" +
             L(ct, 2 / std::sqrt(kPi)) + " * " + F("exp") + "(-z * z));");
    ctx.Line(a + " = " + L(ct, std::sqrt(2.0)) + " * z;");
    ctx.Dedent();
    ctx.Line("}");
  }
  ctx.Dedent();
  ctx.Line("}");
}

// ---- GridSample ---------------------------------------------------------------------------------

// What GridSample's coordinate mapping along one spatial axis is emitted from.
struct GridAxis {
  int rank, mode, taps;  // mode: 0 nearest, 1 linear, 2 cubic; taps per axis: 1, 2, 4
  std::string padding;
  bool align;
  DType grid_type;
  int64_t size, stride;  // of the axis in X
};

// Grid coordinate d of the current output position mapped into X: the taps' offsets into
// ix[d * taps ...] (-1: reads zero) and, but for nearest, their weights into w[...].
void EmitGridAxisTaps(NodeContext& ctx, const GridAxis& g, int d) {
  const DType f = DType::kFloat32;
  const float len = static_cast<float>(g.size);
  const float lo = g.align ? 0.0f : -0.5f, hi = g.align ? len - 1.0f : len - 0.5f;
  const std::string LO = L(f, lo), HI = L(f, hi), LEN = L(f, len), LENM1 = L(f, len - 1.0f);
  // Maps integer index i along d through the padding mode: an offset, or -1 (reads zero).
  auto pix = [&](const std::string& i) -> std::string {
    std::string st = g.stride == 1 ? "" : " * " + S(g.stride);
    if (g.padding == "zeros")
      return "(" + i + " >= 0 && " + i + " < " + S(g.size) + " ? " + i + st + " : -1)";
    if (g.padding == "border")
      return "(" + i + " < 0 ? 0 : " + i + " > " + S(g.size - 1) + " ? " +
             S((g.size - 1) * g.stride) + " : " + i + st + ")";
    return "kiln_grid_reflect_index(" + i + ", " + LO + ", " + HI + ", " + S(g.size) + ")" + st;
  };
  ctx.Line("{");
  ctx.Indent();
  ctx.Line("float c = (float)" + Load(ctx, g.grid_type, "g[" + S(g.rank - 1 - d) + "]") + ";");
  if (g.align)
    ctx.Line("c = (c + 1.0f) / 2.0f * " + LENM1 + ";");
  else
    ctx.Line("c = ((c + 1.0f) * " + LEN + " - 1.0f) / 2.0f;");
  if (g.mode == 0) ctx.Line("c = nearbyintf(c);");
  if (g.padding == "border")
    ctx.Line("if (c < " + LO + " || c > " + HI + ") c = c < 0.0f ? 0.0f : (c > " + LENM1 + " ? " +
             LENM1 + " : c);");
  if (g.padding == "reflection")
    ctx.Line("if (c < " + LO + " || c > " + HI + ") c = kiln_grid_reflect(c, " + LO + ", " + HI +
             ");");
  ctx.Line("if (!isfinite(c)) c = -1e9f;");
  ctx.Line("c = c < -1e9f ? -1e9f : (c > 1e9f ? 1e9f : c);");
  const std::string base = S(d * g.taps);
  if (g.mode == 0) {
    ctx.Line("{");
    ctx.Line("  const int32_t i = (int32_t)c;");
    ctx.Line("  ix[" + base + "] = " + pix("i") + ";");
    ctx.Line("}");
  } else {
    ctx.Line("{");
    ctx.Indent();
    ctx.Line("const float fl = floorf(c), tt = c - fl;");
    ctx.Line("const int32_t x0 = (int32_t)fl;");
    if (g.mode == 1) {
      ctx.Line("w[" + base + "] = 1.0f - tt;");
      ctx.Line("w[" + S(d * g.taps + 1) + "] = tt;");
      ctx.Line("ix[" + base + "] = " + pix("x0") + ";");
      ctx.Line("{");
      ctx.Line("  const int32_t x1 = x0 + 1;");
      ctx.Line("  ix[" + S(d * g.taps + 1) + "] = " + pix("x1") + ";");
      ctx.Line("}");
    } else {
      // The host's CubicCoeffs (A = -0.75).
      ctx.Line("const float a = -0.75f, u = fabsf(tt);");
      ctx.Line("int q;");
      ctx.Line(
          "w[" + base +
          "] = ((a * (u + 1.0f) - 5.0f * a) * (u + 1.0f) + 8.0f * a) * (u + 1.0f) - 4.0f * a;");
      ctx.Line("w[" + S(d * g.taps + 1) + "] = ((a + 2.0f) * u - (a + 3.0f)) * u * u + 1.0f;");
      ctx.Line("w[" + S(d * g.taps + 2) +
               "] = ((a + 2.0f) * (1.0f - u) - (a + 3.0f)) * (1.0f - u) * (1.0f - u) + 1.0f;");
      ctx.Line(
          "w[" + S(d * g.taps + 3) +
          "] = ((a * (2.0f - u) - 5.0f * a) * (2.0f - u) + 8.0f * a) * (2.0f - u) - 4.0f * a;");
      ctx.Line("for (q = 0; q < 4; ++q) {");
      ctx.Line("  const int32_t xi = x0 - 1 + q;");
      ctx.Line("  ix[" + (d ? base + " + q" : std::string("q")) + "] = " + pix("xi") + ";");
      ctx.Line("}");
    }
    ctx.Dedent();
    ctx.Line("}");
  }
  ctx.Dedent();
  ctx.Line("}");
}

Status EmitGridSample(NodeContext& ctx) {
  const ir::Node& node = ctx.node();
  const Dims& xd = ctx.input_dims(0);
  const Dims& gd = ctx.input_dims(1);
  DType t = ctx.input_dtype(0), gt = ctx.input_dtype(1);
  if (!IsFloatingDType(t) || !IsFloatingDType(gt))
    return ctx.error("X and grid must be float tensors");
  std::string m = node.attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  int mode;
  if (m == "nearest")
    mode = 0;
  else if (m == "linear" || m == "bilinear")
    mode = 1;
  else if (m == "cubic" || m == "bicubic")
    mode = 2;
  else
    return ctx.error("unknown mode '" + m + "'");
  std::string p = node.attr_string("padding_mode", "zeros");
  if (p != "zeros" && p != "border" && p != "reflection")
    return ctx.error("unknown padding_mode '" + p + "'");
  const bool align = node.attr_int("align_corners", 0) != 0;
  if (xd.size() < 3 || gd.size() != xd.size() || gd.back() != static_cast<int64_t>(xd.size() - 2))
    return ctx.error("grid shape does not fit X");
  const int r = static_cast<int>(xd.size()) - 2;
  const int64_t N = xd[0], C = xd[1];
  Dims sp(xd.begin() + 2, xd.end());
  std::vector<int64_t> sps = Strides(sp);
  const int64_t in_sz = NumElements(sp), n_out = NumElements(Dims(gd.begin() + 1, gd.end() - 1));
  if (N * C * n_out == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (in_sz == 0) return ctx.error("X has no spatial elements");
  if (in_sz >= (int64_t{1} << 31)) return ctx.error("X is too large");
  const int K = mode == 0 ? 1 : mode == 1 ? 2 : 4;
  if (p == "reflection") ctx.UseKernel("grid_reflect");
  ctx.Line("size_t n, o, ch;");
  ctx.Line("int32_t ix[" + S(r * K) + "];");
  if (mode != 0) ctx.Line("float w[" + S(r * K) + "];");
  std::string ks;
  for (int d = 0; d < r; ++d) ks += (d ? ", k" : "k") + S(d);
  ctx.Line("int " + ks + ";");
  ctx.Line("for (n = 0; n < " + S(N) + "; ++n) {");
  ctx.Line("  for (o = 0; o < " + S(n_out) + "; ++o) {");
  ctx.Indent();
  ctx.Indent();
  ctx.Line("const " + CType(gt) + " *g = in1 + (n * " + S(n_out) + " + o) * " + S(r) + ";");
  for (int d = 0; d < r; ++d) EmitGridAxisTaps(ctx, {r, mode, K, p, align, gt, sp[d], sps[d]}, d);
  // The taps, first spatial dim outermost; weights multiplied last dim first, as the host.
  ctx.Line("for (ch = 0; ch < " + S(C) + "; ++ch) {");
  ctx.Indent();
  ctx.Line("const " + CType(t) + " *src = in0 + (n * " + S(C) + " + ch) * " + S(in_sz) + ";");
  ctx.Line("float acc = 0.0f;");
  std::string off, wt;
  for (int d = 0; d < r; ++d) {
    std::string k = "k" + S(d), e = "ix[" + (d ? S(d * K) + " + " : "") + k + "]";
    ctx.Line("for (" + k + " = 0; " + k + " < " + S(K) + "; ++" + k + ") {");
    ctx.Indent();
    if (p == "zeros") ctx.Line("if (" + e + " < 0) continue;");
    off += (off.empty() ? "" : " + ") + e;
  }
  for (int d = r - 1; d >= 0; --d)
    wt += (wt.empty() ? "" : " * ") + std::string("w[") + (d ? S(d * K) + " + " : "") + "k" + S(d) +
          "]";
  std::string v = "(float)" + Load(ctx, t, "src[" + off + "]");
  ctx.Line(mode == 0 ? "acc += " + v + ";" : "acc += " + wt + " * " + v + ";");
  for (int d = 0; d < r; ++d) {
    ctx.Dedent();
    ctx.Line("}");
  }
  ctx.Line("out0[(n * " + S(C) + " + ch) * " + S(n_out) + " + o] = " + Store(ctx, t, "acc") + ";");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Dedent();
  ctx.Dedent();
  ctx.Line("  }");
  ctx.Line("}");
  return OkStatus();
}

// ---- AffineGrid ---------------------------------------------------------------------------------

Status EmitAffineGrid(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t)) return ctx.error("theta must be a float tensor");
  const Dims& td = ctx.input_dims(0);
  const Dims& od = ctx.output_dims(0);
  if (od.size() != 4 && od.size() != 5) return ctx.error("the output must have rank 4 or 5");
  const int r = static_cast<int>(od.size()) - 2;
  if (td.size() != 3 || td[0] != od[0] || td[1] != r || td[2] != r + 1)
    return ctx.error("theta does not fit size");
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  Dims sp(od.begin() + 1, od.end() - 1);
  const DType ct = ComputeType(t);
  const std::string c = CType(ct);
  if (NumElements(od) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<std::string> base;
  for (int d = 0; d < r; ++d) {
    std::vector<std::string> v;
    for (int64_t i = 0; i < sp[d]; ++i)
      v.push_back(L(ct, align ? (sp[d] == 1 ? -1.0 : -1.0 + 2.0 * i / (sp[d] - 1))
                              : -1.0 + (2.0 * i + 1.0) / sp[d]));
    base.push_back(Table(ctx, c, "b" + S(d), v));
  }
  const int64_t pts = NumElements(sp);
  ctx.Line("size_t n;");
  ctx.Line("for (n = 0; n < " + S(od[0]) + "; ++n) {");
  ctx.Indent();
  ctx.Line("const " + CType(t) + " *th = in0 + n * " + S(r * (r + 1)) + ";");
  ctx.Line(CType(t) + " *y = out0 + n * " + S(pts * r) + ";");
  LoopNest(ctx, sp, [&](const std::vector<std::string>& idx) {
    std::vector<std::string> h(r);
    for (int d = 0; d < r; ++d) h[r - 1 - d] = base[d] + "[" + idx[d] + "]";
    std::string p = IndexExpr(idx, Strides(sp));
    for (int i = 0; i < r; ++i) {
      std::string acc;
      for (int j = 0; j <= r; ++j) {
        std::string th = Load(ctx, t, "th[" + S(i * (r + 1) + j) + "]");
        acc = acc.empty() ? th + " * " + h[j]
                          : "(" + acc + ") + " + (j == r ? th : th + " * " + h[j]);
      }
      ctx.Line("y[(" + p + ") * " + S(r) + " + " + S(i) + "] = " + Store(ctx, t, acc) + ";");
    }
  });
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---- DFT, STFT ----------------------------------------------------------------------------------

// The transform kernel for compute type ct, its twiddle table for length n and the scratch
// buffers (buf: 2n values; tmp: 2n more unless n is a power of two). Returns the call prefix.
struct Fft {
  std::string fn, tw, buf, tmp;
};

Fft PrepareFft(NodeContext& ctx, DType ct, int64_t n, bool inverse, const std::string& suffix) {
  Fft f;
  const std::string c = CType(ct);
  f.fn = ct == DType::kFloat64 ? "kiln_fft_f64" : "kiln_fft_f32";
  ctx.UseKernel(ct == DType::kFloat64 ? "fft_f64" : "fft_f32");
  std::vector<std::string> tw;
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < n; ++k) {
    std::complex<double> w =
        std::polar(1.0, sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n));
    tw.push_back(L(ct, w.real()));
    tw.push_back(L(ct, w.imag()));
  }
  f.tw = Table(ctx, c, "tw" + suffix, tw);
  const size_t bytes = static_cast<size_t>(2 * n) * DTypeSize(ct);
  f.buf = ctx.Temp();
  ctx.Line(c + " *" + f.buf + " = (" + c + " *)" + ctx.scratch(bytes) + ";");
  if (n & (n - 1)) {
    f.tmp = ctx.Temp();
    ctx.Line(c + " *" + f.tmp + " = (" + c + " *)" + ctx.scratch(bytes) + ";");
  } else {
    f.tmp = "NULL";
  }
  return f;
}

Status EmitDft(NodeContext& ctx) {
  const ir::Node& node = ctx.node();
  const Dims& x = ctx.input_dims(0);
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t)) return ctx.error("input must be a float tensor");
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank < 2 || (x.back() != 1 && x.back() != 2))
    return ctx.error("input must end in a dimension of 1 or 2");
  const bool inverse = node.attr_int("inverse", 0) != 0,
             onesided = node.attr_int("onesided", 0) != 0;
  int64_t axis = 1;
  if (ctx.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> a, ConstantInts(ctx, 2));
      if (a.size() != 1) return ctx.error("axis must be a scalar");
      axis = a[0];
    }
  } else {
    axis = node.attr_int("axis", 1);
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank - 2) return ctx.error("axis is out of range");
  const int64_t n_in = x[axis];
  int64_t len = inverse && onesided ? 2 * (n_in - 1) : n_in;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> l, ConstantInts(ctx, 1));
    if (l.size() != 1) return ctx.error("dft_length must be a scalar");
    len = l[0];
  }
  if (len <= 0) return ctx.error("dft_length must be positive");
  const int64_t out_len = !inverse && onesided ? len / 2 + 1 : len;
  const int64_t cin = x.back(), cout = inverse && onesided ? 1 : 2;
  Dims od = x;
  od[axis] = out_len;
  od.back() = cout;
  if (od != ctx.output_dims(0)) return ctx.error("the output dims differ from the inferred ones");
  const int64_t outer = Prod(x, 0, axis), inner = Prod(x, axis + 1, x.size() - 1);
  if (outer * inner == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  const std::string c = CType(ct);
  Fft f = PrepareFft(ctx, ct, len, inverse, "");
  const std::string b = f.buf;
  auto in_at = [&](const std::string& k, int part) {
    return Load(ctx, t,
                "in0[((o * " + S(n_in) + " + " + k + ") * " + S(inner) + " + i) * " + S(cin) +
                    (part ? " + 1" : "") + "]");
  };
  ctx.Line("size_t o, i, k;");
  ctx.Line("for (o = 0; o < " + S(outer) + "; ++o) {");
  ctx.Line("  for (i = 0; i < " + S(inner) + "; ++i) {");
  ctx.Indent();
  ctx.Indent();
  ctx.Line("for (k = 0; k < " + S(2 * len) + "; ++k) " + b + "[k] = " + L(ct, 0) + ";");
  const int64_t copy = inverse && onesided ? std::min(len / 2 + 1, n_in) : std::min(len, n_in);
  ctx.Line("for (k = 0; k < " + S(copy) + "; ++k) {");
  ctx.Line("  " + b + "[2 * k] = " + in_at("k", 0) + ";");
  if (cin == 2) ctx.Line("  " + b + "[2 * k + 1] = " + in_at("k", 1) + ";");
  ctx.Line("}");
  if (inverse && onesided) {
    // The Hermitian full spectrum from the half one.
    ctx.Line("for (k = " + S(len / 2 + 1) + "; k < " + S(len) + "; ++k) {");
    ctx.Line("  " + b + "[2 * k] = " + b + "[2 * (" + S(len) + " - k)];");
    ctx.Line("  " + b + "[2 * k + 1] = -" + b + "[2 * (" + S(len) + " - k) + 1];");
    ctx.Line("}");
  }
  ctx.Line(f.fn + "(" + b + ", " + f.tmp + ", " + S(len) + ", " + f.tw + ", " +
           (inverse ? "1" : "0") + ");");
  ctx.Line("for (k = 0; k < " + S(out_len) + "; ++k) {");
  std::string e = "((o * " + S(out_len) + " + k) * " + S(inner) + " + i) * " + S(cout);
  ctx.Line("  out0[" + e + "] = " + Store(ctx, t, b + "[2 * k]") + ";");
  if (cout == 2) ctx.Line("  out0[" + e + " + 1] = " + Store(ctx, t, b + "[2 * k + 1]") + ";");
  ctx.Line("}");
  ctx.Dedent();
  ctx.Dedent();
  ctx.Line("  }");
  ctx.Line("}");
  return OkStatus();
}

Status EmitStft(NodeContext& ctx) {
  const Dims& x = ctx.input_dims(0);
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t)) return ctx.error("signal must be a float tensor");
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2))
    return ctx.error("signal must be [batch, length, 1 or 2]");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> st, ConstantInts(ctx, 1));
  if (st.size() != 1 || st[0] <= 0) return ctx.error("frame_step must be a positive scalar");
  const int64_t step = st[0];
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  const bool hw = ctx.has_input(2);
  if (hw && ctx.input_dims(2).size() != 1) return ctx.error("window must be 1-D");
  if (hw && !IsFloatingDType(ctx.input_dtype(2)) && !IsInt(ctx.input_dtype(2)))
    return ctx.error("window must be numeric");
  int64_t fl;
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, ConstantInts(ctx, 3));
    if (v.size() != 1) return ctx.error("frame_length must be a scalar");
    fl = v[0];
  } else if (hw) {
    fl = ctx.input_dims(2)[0];
  } else {
    return ctx.error("one of window and frame_length must be given");
  }
  const int64_t wl = hw ? ctx.input_dims(2)[0] : fl;
  if (fl <= 0 || fl > x[1]) return ctx.error("frame_length must be in [1, signal length]");
  const int64_t B = x[0], Ls = x[1], c = x[2], frames = 1 + (x[1] - fl) / step,
                bins = onesided ? fl / 2 + 1 : fl;
  if (ctx.output_dims(0) != Dims{B, frames, bins, 2})
    return ctx.error("the output dims differ from the inferred ones");
  if (B == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  Fft f = PrepareFft(ctx, ct, fl, false, "");
  const std::string bf = f.buf;
  ctx.Line("size_t b, fr, k;");
  ctx.Line("for (b = 0; b < " + S(B) + "; ++b) {");
  ctx.Line("  for (fr = 0; fr < " + S(frames) + "; ++fr) {");
  ctx.Indent();
  ctx.Indent();
  ctx.Line("for (k = 0; k < " + S(2 * fl) + "; ++k) " + bf + "[k] = " + L(ct, 0) + ";");
  ctx.Line("for (k = 0; k < " + S(std::min(wl, fl)) + "; ++k) {");
  ctx.Indent();
  ctx.Line("const size_t s = fr * " + S(step) + " + k;");
  ctx.Line("if (s >= " + S(Ls) + ") break;");
  std::string e = "(b * " + S(Ls) + " + s) * " + S(c);
  std::string w = hw ? "(" + CType(ct) + ")" + Load(ctx, ctx.input_dtype(2), "in2[k]") : "";
  std::string re = Load(ctx, t, "in0[" + e + "]"),
              im = c == 2 ? Load(ctx, t, "in0[" + e + " + 1]") : L(ct, 0);
  ctx.Line(bf + "[2 * k] = " + (hw ? re + " * " + w : re) + ";");
  ctx.Line(bf + "[2 * k + 1] = " + (hw ? im + " * " + w : im) + ";");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Line(f.fn + "(" + bf + ", " + f.tmp + ", " + S(fl) + ", " + f.tw + ", 0);");
  ctx.Line("for (k = 0; k < " + S(bins) + "; ++k) {");
  std::string oe = "((b * " + S(frames) + " + fr) * " + S(bins) + " + k) * 2";
  ctx.Line("  out0[" + oe + "] = " + Store(ctx, t, bf + "[2 * k]") + ";");
  ctx.Line("  out0[" + oe + " + 1] = " + Store(ctx, t, bf + "[2 * k + 1]") + ";");
  ctx.Line("}");
  ctx.Dedent();
  ctx.Dedent();
  ctx.Line("  }");
  ctx.Line("}");
  return OkStatus();
}

// ---- Ops whose inputs are all constants (windows, MelWeightMatrix): evaluated at compile
// time by the host kernel, the result written as a table and copied.

Status EmitEvaluated(NodeContext& ctx) {
  const ir::Node& n = ctx.node();
  const ops::OpSchema* schema = ops::OpRegistry::Global().Find(n.domain, n.op_type);
  if (!schema) return ctx.error("no host kernel");
  ops::ComputeContext cc(n, ctx.graph(), ctx.opset());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      cc.inputs_.push_back(nullptr);
    } else if (const Tensor* c = ctx.input_constant(i)) {
      cc.inputs_.push_back(c);
    } else {
      return ctx.error("input " + std::to_string(i) + " must be a compile-time constant");
    }
  }
  if (ctx.num_outputs() != 1 || !ctx.has_output(0)) return ctx.error("needs one output");
  std::vector<Tensor> outs(n.outputs.size() + ops::kScratchOutputs);
  outs[0] = Tensor(ctx.output_dtype(0), ctx.output_dims(0));
  for (auto& o : outs) cc.outputs_.push_back(&o);
  Status st = OkStatus();
  try {
    st = schema->compute(cc);
  } catch (const std::exception& e) {
    st = Error(e.what());
  }
  if (!st.ok()) return ctx.error(st.message());
  const Tensor& y = outs[0];
  if (y.dims() != ctx.output_dims(0) || y.dtype() != ctx.output_dtype(0))
    return ctx.error("unexpected result dims");
  if (y.size() == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (y.size() > (int64_t{1} << 22)) return ctx.error("the result is too large for a table");
  std::vector<std::string> v;
  const size_t es = DTypeSize(y.dtype());
  for (int64_t i = 0; i < y.size(); ++i)
    v.push_back(CLiteral(y.dtype(), static_cast<const char*>(y.raw()) + i * es));
  std::string name = Table(ctx, CType(y.dtype()), "value", v);
  ctx.Line("memcpy(out0, " + name + ", " + ByteCount(y.dtype(), y.size()) + ");");
  return OkStatus();
}

// MelWeightMatrix with sample_rate or the edge frequencies known only at run time (the sizes,
// num_mel_bins and dft_length, are constants since the output dims are static). The host's
// arithmetic: mel edges in float, bin positions in double (they are floored, so this keeps the
// same bins); a bin outside the spectrum fails the run as it fails the host.
Status EmitMelWeightMatrix(NodeContext& ctx) {
  bool all = true;
  for (int i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) return ctx.error("needs 5 inputs");
    all = all && ctx.input_constant(i);
  }
  if (all) return EmitEvaluated(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> nb, ConstantInts(ctx, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dl, ConstantInts(ctx, 1));
  if (nb.size() != 1 || dl.size() != 1 || nb[0] <= 0 || dl[0] <= 0)
    return ctx.error("num_mel_bins and dft_length must be positive scalars");
  const int64_t nmel = nb[0], nspec = dl[0] / 2 + 1;
  DType t = ctx.output_dtype(0);
  if (ctx.output_dims(0) != Dims{nspec, nmel})
    return ctx.error("the output dims differ from the inferred ones");
  if (t == DType::kBool || (!IsFloatingDType(t) && !IsInt(t)))
    return ctx.error("unsupported output_datatype");
  for (int i = 2; i < 5; ++i)
    if (NumElements(ctx.input_dims(i)) < 1 ||
        !(IsFloatingDType(ctx.input_dtype(i)) || IsInt(ctx.input_dtype(i))))
      return ctx.error("sample_rate and the edge frequencies must be numeric scalars");
  ctx.SetCanFail();
  auto dbl = [&](int i) {
    return "(double)" + Load(ctx, ctx.input_dtype(i), NodeContext::in(i) + "[0]");
  };
  std::string rate = IsInt(ctx.input_dtype(2)) ? "(int64_t)in2[0]" : "(int64_t)" + dbl(2);
  if (!IsInt(ctx.input_dtype(2))) {
    ctx.Line("if (!(" + dbl(2) + " >= 1.0 && " + dbl(2) +
             " < 9.2e18)) return KILN_ERROR_INVALID_DATA;");
  }
  ctx.Line("const int64_t rate = " + rate + ";");
  ctx.Line("const float lo = (float)" + dbl(3) + ", hi = (float)" + dbl(4) + ";");
  ctx.Line("const float lmel = 2595.0f * log10f(1.0f + lo / 700.0f);");
  ctx.Line("const float hmel = 2595.0f * log10f(1.0f + hi / 700.0f);");
  ctx.Line("const float step = (hmel - lmel) / " +
           L(DType::kFloat32, static_cast<double>(nmel + 2)) + ";");
  ctx.Line("int32_t *bins = (int32_t *)" + ctx.scratch(static_cast<size_t>(nmel + 2) * 4) + ";");
  ctx.Line("size_t i;");
  ctx.Line("int32_t j;");
  ctx.Line("if (rate <= 0) return KILN_ERROR_INVALID_DATA;");
  ctx.Line("for (i = 0; i < " + S(nmel + 2) + "; ++i) {");
  ctx.Line("  double f = (double)i * (double)step + (double)lmel;");
  ctx.Line("  f = 700.0 * (pow(10.0, f / 2595.0) - 1.0);");
  ctx.Line("  f = floor(" + S(dl[0] + 1) + ".0 * f / (double)rate);");
  ctx.Line("  if (!(f >= 0.0 && f <= " + S(nspec) + ".0)) return KILN_ERROR_INVALID_DATA;");
  ctx.Line("  bins[i] = (int32_t)f;");
  ctx.Line("}");
  ctx.Line("memset(out0, 0, " + ByteCount(t, nspec * nmel) + ");");
  ctx.Line("for (i = 0; i < " + S(nmel) + "; ++i) {");
  ctx.Indent();
  ctx.Line("const int32_t l = bins[i], c = bins[i + 1], h = bins[i + 2];");
  ctx.Line("if (c < l || h < c || c >= " + S(nspec) + ") return KILN_ERROR_INVALID_DATA;");
  auto at = [&](const std::string& row) {
    return "out0[(size_t)" + row + " * " + S(nmel) + " + i]";
  };
  ctx.Line("if (c == l) " + at("c") + " = " + Store(ctx, t, "1.0") + ";");
  ctx.Line("else for (j = l; j <= c; ++j) " + at("j") + " = " +
           Store(ctx, t, "(double)(j - l) / (double)(c - l)") + ";");
  ctx.Line("for (j = c; j < h; ++j) " + at("j") + " = " +
           Store(ctx, t, "(double)(h - j) / (double)(h - c)") + ";");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---- Det ----------------------------------------------------------------------------------------

Status EmitDet(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t)) return ctx.error("needs a floating-point input");
  const Dims& d = ctx.input_dims(0);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return ctx.error("needs [..., M, M] input");
  const int64_t n = d.back(), count = NumElements(ctx.output_dims(0));
  if (count == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  const std::string c = CType(ct), Z = L(ct, 0);
  if (n == 0) {
    ctx.Line("size_t b;");
    ctx.Line("for (b = 0; b < " + S(count) + "; ++b) out0[b] = " + Store(ctx, t, L(ct, 1)) + ";");
    return OkStatus();
  }
  // Gaussian elimination with partial pivoting on a copy, as the host.
  ctx.Line(c + " *a = (" + c + " *)" + ctx.scratch(static_cast<size_t>(n * n) * DTypeSize(ct)) +
           ";");
  ctx.Line("size_t b, i, j, r, col, piv;");
  ctx.Line("for (b = 0; b < " + S(count) + "; ++b) {");
  ctx.Indent();
  ctx.Line(c + " det = " + L(ct, 1) + ";");
  ctx.Line("for (i = 0; i < " + S(n * n) +
           "; ++i) a[i] = " + Load(ctx, t, "in0[b * " + S(n * n) + " + i]") + ";");
  ctx.Line("for (col = 0; col < " + S(n) + " && det != " + Z + "; ++col) {");
  ctx.Indent();
  const std::string N = S(n), fabs_ = MathName(ct, "fabs");
  ctx.Line("piv = col;");
  ctx.Line("for (r = col + 1; r < " + N + "; ++r)");
  ctx.Line("  if (" + fabs_ + "(a[r * " + N + " + col]) > " + fabs_ + "(a[piv * " + N +
           " + col])) piv = r;");
  ctx.Line("if (a[piv * " + N + " + col] == " + Z + ") {");
  ctx.Line("  det = " + Z + ";");
  ctx.Line("  break;");
  ctx.Line("}");
  ctx.Line("if (piv != col) {");
  ctx.Line("  for (j = 0; j < " + N + "; ++j) {");
  ctx.Line("    const " + c + " s = a[col * " + N + " + j];");
  ctx.Line("    a[col * " + N + " + j] = a[piv * " + N + " + j];");
  ctx.Line("    a[piv * " + N + " + j] = s;");
  ctx.Line("  }");
  ctx.Line("  det = -det;");
  ctx.Line("}");
  ctx.Line("det *= a[col * " + N + " + col];");
  ctx.Line("for (r = col + 1; r < " + N + "; ++r) {");
  ctx.Line("  const " + c + " f = a[r * " + N + " + col] / a[col * " + N + " + col];");
  ctx.Line("  for (j = col; j < " + N + "; ++j) a[r * " + N + " + j] -= f * a[col * " + N +
           " + j];");
  ctx.Line("}");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Line("out0[b] = " + Store(ctx, t, "det") + ";");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---- Trilu, ReverseSequence ---------------------------------------------------------------------

// Trilu as row copies over a zeroed output: k is a constant or read at run time (clamped to
// [-(m + 1), n + 1] as the host), so no element-map table is needed.
Status EmitTrilu(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  if (d.size() < 2) return ctx.error("input must have rank >= 2");
  if (ctx.output_dtype(0) != ctx.input_dtype(0)) return ctx.error("changes the element type");
  DType t = ctx.input_dtype(0);
  const int64_t m = d[d.size() - 2], n = d.back(), total = NumElements(d);
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::string k = "0";
  if (ctx.has_input(1)) {
    if (NumElements(ctx.input_dims(1)) != 1 || !IsInt(ctx.input_dtype(1)))
      return ctx.error("k must be an integer scalar");
    if (const Tensor* c = ctx.input_constant(1))
      k = S(std::clamp<int64_t>(c->GetInt(0), -(m + 1), n + 1));
    else
      k = "k";
  }
  const int64_t mats = total / (m * n);
  ctx.Line("size_t b, i;");
  if (k == "k") {
    ctx.Line("int64_t k = (int64_t)in1[0];");
    ctx.Line("if (k < " + S(-(m + 1)) + ") k = " + S(-(m + 1)) + ";");
    ctx.Line("if (k > " + S(n + 1) + ") k = " + S(n + 1) + ";");
  }
  ctx.Line("memset(out0, 0, " + ByteCount(t, total) + ");");
  ctx.Line("for (b = 0; b < " + S(mats) + "; ++b) {");
  ctx.Line("  for (i = 0; i < " + S(m) + "; ++i) {");
  ctx.Indent();
  ctx.Indent();
  // upper keeps j >= i + k, lower keeps j <= i + k.
  auto clamp = [&](const std::string& e) {
    return "(" + e + " < 0 ? 0 : " + e + " > " + S(n) + " ? " + S(n) + " : " + e + ")";
  };
  std::string ik = "((int64_t)i + " + k + ")", ik1 = "((int64_t)i + " + k + " + 1)";
  ctx.Line("const int64_t lo = " + (upper ? clamp(ik) : std::string("0")) + ";");
  ctx.Line("const int64_t hi = " + (upper ? S(n) : clamp(ik1)) + ";");
  ctx.Line("const size_t row = (b * " + S(m) + " + i) * " + S(n) + ";");
  ctx.Line(
      "if (hi > lo) memcpy(out0 + row + lo, in0 + row + lo, (size_t)(hi - lo) * sizeof(out0[0]));");
  ctx.Dedent();
  ctx.Dedent();
  ctx.Line("  }");
  ctx.Line("}");
  return OkStatus();
}

Status EmitReverseSequence(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  if (d.size() < 2) return ctx.error("input must have rank >= 2");
  if (ctx.output_dtype(0) != ctx.input_dtype(0)) return ctx.error("changes the element type");
  const int64_t ba = ctx.node().attr_int("batch_axis", 1), ta = ctx.node().attr_int("time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return ctx.error("batch_axis and time_axis must be 0 and 1");
  if (ctx.input_dtype(1) != DType::kInt64 || ctx.input_dims(1).size() != 1 ||
      ctx.input_dims(1)[0] != d[ba])
    return ctx.error("sequence_lens must be int64 with one entry per batch");
  DType t = ctx.input_dtype(0);
  const int64_t total = NumElements(d);
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<int64_t> s = Strides(d);
  const int64_t batch = d[ba], steps = d[ta], block = Prod(d, 2, d.size());
  ctx.SetCanFail();
  ctx.Line("size_t b, i;");
  ctx.Line("for (b = 0; b < " + S(batch) + "; ++b)");
  ctx.Line("  if (in1[b] < 0 || in1[b] > " + S(steps) + ") return KILN_ERROR_INVALID_DATA;");
  ctx.Line("memcpy(out0, in0, " + ByteCount(t, total) + ");");
  ctx.Line("for (b = 0; b < " + S(batch) + "; ++b) {");
  ctx.Line("  const size_t len = (size_t)in1[b];");
  ctx.Line("  for (i = 0; i < len; ++i)");
  std::string dst = "b * " + S(s[ba]) + " + i * " + S(s[ta]),
              src = "b * " + S(s[ba]) + " + (len - 1 - i) * " + S(s[ta]);
  if (block == 1)
    ctx.Line("    out0[" + dst + "] = in0[" + src + "];");
  else
    ctx.Line("    memcpy(out0 + " + dst + ", in0 + " + src + ", " + ByteCount(t, block) + ");");
  ctx.Line("}");
  return OkStatus();
}

// ---- ai.onnx.ml ---------------------------------------------------------------------------------

bool IsMlNumeric(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt64 || t == DType::kInt32;
}

// The type the ml ops compute an input of type t in: float for float32, double otherwise
// (double and integer inputs, which the host reads as double).
DType MlCompute(DType t) { return t == DType::kFloat32 ? DType::kFloat32 : DType::kFloat64; }

Status EmitBinarizer(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!IsMlNumeric(t)) return ctx.error("X must be float, double, int64 or int32");
  const float th = ctx.node().attr_float("threshold", 0.0f);
  DType ct = MlCompute(t);
  const std::string one = "(" + CType(t) + ")1", zero = "(" + CType(t) + ")0";
  EmitBroadcast(ctx, {0}, {ctx.input_dims(0)}, ctx.output_dims(0),
                [&](const std::vector<std::string>& a) {
                  return "(" + std::string(ct == t ? "" : "(double)") + a[0] + " > " + L(ct, th) +
                         " ? " + one + " : " + zero + ")";
                });
  return OkStatus();
}

Status EmitArrayFeatureExtractor(NodeContext& ctx) {
  const Dims& x = ctx.input_dims(0);
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("Y must be int64");
  if (x.empty()) return ctx.error("X must have rank >= 1");
  const int64_t last = x.back(), rows = last ? NumElements(x) / last : 0,
                n = NumElements(ctx.input_dims(1));
  if (n == 0 || NumElements(ctx.output_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  ctx.SetCanFail();
  ctx.Line("size_t r, k;");
  ctx.Line("for (k = 0; k < " + S(n) + "; ++k)");
  ctx.Line("  if (in1[k] < 0 || in1[k] >= " + S(last) + ") return KILN_ERROR_INVALID_DATA;");
  ctx.Line("for (r = 0; r < " + S(rows) + "; ++r)");
  ctx.Line("  for (k = 0; k < " + S(n) + "; ++k) out0[r * " + S(n) + " + k] = in0[r * " + S(last) +
           " + (size_t)in1[k]];");
  return OkStatus();
}

// Keys or values of LabelEncoder from *_floats / *_int64s / *_tensor.
struct NumList {
  DType dtype = DType::kUndefined;
  std::vector<double> f;
  std::vector<int64_t> i;
  size_t size() const { return IsFloatingDType(dtype) ? f.size() : i.size(); }
};

std::string ReadList(const ir::Node& node, const std::string& prefix, NumList* l) {
  const ir::Attribute* a;
  if ((a = node.attr(prefix + "_strings")) || (a = node.attr("classes_strings")))
    return "string keys or values are not supported";
  if ((a = node.attr(prefix + "_floats"))) {
    l->dtype = DType::kFloat32;
    l->f.assign(a->floats.begin(), a->floats.end());
  } else if ((a = node.attr(prefix + "_int64s"))) {
    l->dtype = DType::kInt64;
    l->i = a->ints;
  } else if ((a = node.attr(prefix + "_tensor"))) {
    const Tensor& t = a->t;
    if (!t.defined() || DTypeSize(t.dtype()) == 0 || !IsSupportedDType(t.dtype()))
      return prefix + "_tensor has an unsupported type";
    l->dtype = t.dtype();
    for (int64_t k = 0; k < t.size(); ++k) {
      if (IsFloatingDType(t.dtype()))
        l->f.push_back(t.GetDouble(k));
      else
        l->i.push_back(t.GetInt(k));
    }
  }
  return "";
}

Status EmitLabelEncoder(NodeContext& ctx) {
  const ir::Node& node = ctx.node();
  NumList k, v;
  std::string err = ReadList(node, "keys", &k);
  if (err.empty()) err = ReadList(node, "values", &v);
  if (!err.empty()) return ctx.error(err);
  if (k.dtype == DType::kUndefined || v.dtype == DType::kUndefined)
    return ctx.error("needs keys and values");
  if (k.size() != v.size()) return ctx.error("keys and values differ in length");
  DType xt = ctx.input_dtype(0), yt = ctx.output_dtype(0);
  if (xt != k.dtype || yt != v.dtype)
    return ctx.error("X or Y type differs from the keys or values");
  if (xt == DType::kBool || yt == DType::kBool || CType(xt).empty() || CType(yt).empty())
    return ctx.error("unsupported key or value type");
  const bool kf = IsFloatingDType(k.dtype), vf = IsFloatingDType(v.dtype);
  // The default.
  std::string def;
  if (const ir::Attribute* d = node.attr("default_tensor");
      d && d->t.defined() && d->t.size() > 0) {
    def = vf ? ValueLiteral(yt, d->t.GetDouble(0)) : ValueLiteral(yt, d->t.GetInt(0));
  } else if (vf) {
    def = ValueLiteral(yt, static_cast<double>(node.attr_float("default_float", -0.0f)));
  } else {
    def = ValueLiteral(yt, node.attr_int("default_int64", -1));
  }
  // Sorted unique keys (the first of equal keys wins, as std::map::emplace), the NaN key apart.
  std::vector<size_t> order;
  std::string nan_value;
  for (size_t e = 0; e < k.size(); ++e) {
    if (kf && std::isnan(k.f[e])) {
      nan_value = vf ? ValueLiteral(yt, v.f[e]) : ValueLiteral(yt, v.i[e]);
      continue;
    }
    order.push_back(e);
  }
  auto less = [&](size_t a, size_t b) { return kf ? k.f[a] < k.f[b] : k.i[a] < k.i[b]; };
  std::stable_sort(order.begin(), order.end(), less);
  std::vector<size_t> uniq;
  for (size_t e : order)
    if (uniq.empty() || less(uniq.back(), e)) uniq.push_back(e);
  const DType kct = kf ? ComputeType(k.dtype) : DType::kInt64;
  std::vector<std::string> keys, vals;
  for (size_t e : uniq) {
    keys.push_back(kf ? L(kct, k.f[e]) : CLiteral(DType::kInt64, &k.i[e]));
    vals.push_back(vf ? ValueLiteral(yt, v.f[e]) : ValueLiteral(yt, v.i[e]));
  }
  const int64_t nk = static_cast<int64_t>(uniq.size()), total = NumElements(ctx.input_dims(0));
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::string kt, vt;
  if (nk > 0) {
    kt = Table(ctx, CType(kct), "keys", keys);
    vt = Table(ctx, CType(yt), "values", vals);
  }
  ctx.Line("size_t e;");
  ctx.Line("for (e = 0; e < " + S(total) + "; ++e) {");
  ctx.Indent();
  ctx.Line("const " + CType(kct) + " x = (" + CType(kct) + ")" + Load(ctx, xt, "in0[e]") + ";");
  if (nk == 0) {
    ctx.Line("(void)x;");
  } else {
    ctx.Line("size_t lo = 0, hi = " + S(nk) + ";");
    ctx.Line("while (lo < hi) {");
    ctx.Line("  const size_t mid = lo + (hi - lo) / 2;");
    ctx.Line("  if (" + kt + "[mid] < x) lo = mid + 1;");
    ctx.Line("  else hi = mid;");
    ctx.Line("}");
  }
  std::string found =
      nk == 0 ? def : "(lo < " + S(nk) + " && " + kt + "[lo] == x ? " + vt + "[lo] : " + def + ")";
  if (kf)
    ctx.Line("out0[e] = x != x ? " + (nan_value.empty() ? def : nan_value) + " : " + found + ";");
  else
    ctx.Line("out0[e] = " + found + ";");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// One node's test of a tree walk: `go` from row x's feature against the node's split (the
// tables named as given; `member*` empty where no node tests set membership).
void EmitTreeNodeTest(NodeContext& ctx, DType t, DType st, const std::string& Tf,
                      const std::string& Ts, const std::string& Tm, const std::string& Tmb,
                      const std::string& Tme, const std::string& Tmv) {
  std::string xv = Load(ctx, t, "x[" + Tf + "[node]]");
  ctx.Line("const " + CType(st) + " v = (" + CType(st) + ")" + xv + ", s = " + Ts + "[node];");
  ctx.Line("const unsigned fl = " + Tm + "[node];");
  ctx.Line("int go;");
  ctx.Line("switch (fl & 7u) {");
  ctx.Line("  case 0: go = v <= s; break;");
  ctx.Line("  case 1: go = v < s; break;");
  ctx.Line("  case 2: go = v >= s; break;");
  ctx.Line("  case 3: go = v > s; break;");
  ctx.Line("  case 4: go = v == s; break;");
  ctx.Line("  case 5: go = v != s; break;");
  if (!Tmv.empty()) {
    ctx.Line("  default: {");
    ctx.Line("    int32_t mi;");
    ctx.Line("    go = 0;");
    ctx.Line("    for (mi = " + Tmb + "[node]; mi < " + Tme + "[node]; ++mi)");
    ctx.Line("      if (" + Tmv + "[mi] == v) go = 1;");
    ctx.Line("  }");
  } else {
    ctx.Line("  default: go = 0;");
  }
  ctx.Line("}");
}

Status EmitTreeEnsemble(NodeContext& ctx) {
  const ir::Node& n = ctx.node();
  DType t = ctx.input_dtype(0);
  const Dims& xd = ctx.input_dims(0);
  if (!IsFloatingDType(t) || xd.size() != 2) return ctx.error("X must be a 2-D float tensor");
  ops::TreeEnsemblePlan e;
  KILN_RETURN_IF_ERROR(Checked(ctx, ops::MakeTreeEnsemblePlan(n, &e)));
  const auto &splits = e.splits, &weights = e.weights;
  const auto &features = e.features, &modes = e.modes, &tid = e.true_ids, &fid = e.false_ids;
  const auto &tleaf = e.true_leaf, &fleaf = e.false_leaf, &targets = e.targets, &roots = e.roots;
  const auto& missing = e.missing_true;
  const int64_t nt = e.n_targets, agg = e.aggregate, post = e.post;
  const size_t nn = splits.size();
  for (size_t i = 0; i < nn; ++i)
    if (features[i] >= xd[1]) return ctx.error("feature id " + S(features[i]) + " is out of range");
  if (nn >= (size_t{1} << 31) || weights.size() >= (size_t{1} << 31))
    return ctx.error("the ensemble is too large");
  // The set members of every MEMBER node in one table, node i's at [mbeg[i], mend[i]).
  std::vector<int64_t> mbeg(nn, 0), mend(nn, 0);
  std::vector<double> members;
  for (size_t i = 0; i < nn; ++i) {
    if (modes[i] != 6) continue;
    mbeg[i] = static_cast<int64_t>(members.size());
    members.insert(members.end(), e.members[i].begin(), e.members[i].end());
    mend[i] = static_cast<int64_t>(members.size());
  }
  const int64_t N = xd[0], F = xd[1];
  if (N == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  const std::string c = CType(ct);
  // Thresholds compare in the compute type when every split and member is exact in it (the
  // host compares in double); otherwise in double.
  bool exact = true;
  for (double s : splits)
    exact = exact && (std::isnan(s) || static_cast<double>(static_cast<float>(s)) == s);
  for (double s : members) exact = exact && static_cast<double>(static_cast<float>(s)) == s;
  const DType st = ct == DType::kFloat64 || !exact ? DType::kFloat64 : DType::kFloat32;
  std::vector<std::string> sv, fv, mdv, tv, fl, flags, mb, me, wv, tg, rv, memv;
  for (size_t i = 0; i < nn; ++i) {
    sv.push_back(L(st, splits[i]));
    fv.push_back(S(features[i]));
    tv.push_back(S(tid[i]));
    fl.push_back(S(fid[i]));
    flags.push_back(S(modes[i] | (tleaf[i] ? 8 : 0) | (fleaf[i] ? 16 : 0) |
                      (!missing.empty() && missing[i] ? 32 : 0)));
    mb.push_back(S(mbeg[i]));
    me.push_back(S(mend[i]));
  }
  const double nroots = static_cast<double>(roots.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    wv.push_back(L(ct, agg == 0 ? weights[i] / nroots : weights[i]));
    tg.push_back(S(targets[i]));
  }
  for (int64_t rt : roots) rv.push_back(S(rt));
  for (double m : members) memv.push_back(L(st, m));
  const std::string Ts = Table(ctx, CType(st), "split", sv),
                    Tf = Table(ctx, "int32_t", "feature", fv);
  const std::string Tt = Table(ctx, "int32_t", "true_id", tv),
                    Tfa = Table(ctx, "int32_t", "false_id", fl);
  const std::string Tm = Table(ctx, "uint8_t", "flags", flags);
  const std::string Tw = Table(ctx, c, "weight", wv), Tg = Table(ctx, "int32_t", "target", tg);
  const std::string Tr = Table(ctx, "int32_t", "root", rv);
  std::string Tmb, Tme, Tmv;
  if (!members.empty() || std::count(modes.begin(), modes.end(), 6)) {
    Tmb = Table(ctx, "int32_t", "member_begin", mb);
    Tme = Table(ctx, "int32_t", "member_end", me);
    Tmv = Table(ctx, CType(st), "member", memv);
  }
  ctx.SetCanFail();
  // The row accumulates in the output when it holds the compute type, else in scratch.
  const bool direct = ct == t;
  std::string row = "row";
  ctx.Line("size_t n, q, tr;");
  if (!direct)
    ctx.Line(c + " *row = (" + c + " *)" + ctx.scratch(static_cast<size_t>(nt) * DTypeSize(ct)) +
             ";");
  const bool minmax = agg == 2 || agg == 3;
  if (minmax) ctx.Line("uint8_t *hit = " + ctx.scratch(static_cast<size_t>(nt)) + ";");
  ctx.Line("for (n = 0; n < " + S(N) + "; ++n) {");
  ctx.Indent();
  ctx.Line("const " + CType(t) + " *x = in0 + n * " + S(F) + ";");
  if (direct) ctx.Line(c + " *row = out0 + n * " + S(nt) + ";");
  std::string init = agg == 2 ? "INFINITY" : agg == 3 ? "-INFINITY" : L(ct, 0);
  ctx.Line("for (q = 0; q < " + S(nt) + "; ++q) row[q] = " + init + ";");
  if (minmax) ctx.Line("memset(hit, 0, " + S(nt) + ");");
  ctx.Line("for (tr = 0; tr < " + S(static_cast<int64_t>(roots.size())) + "; ++tr) {");
  ctx.Indent();
  ctx.Line("int32_t node = " + Tr + "[tr], leaf = -1;");
  ctx.Line("size_t steps;");
  ctx.Line("for (steps = 0; steps <= " + S(static_cast<int64_t>(nn)) + "; ++steps) {");
  ctx.Indent();
  EmitTreeNodeTest(ctx, t, st, Tf, Ts, Tm, Tmb, Tme, Tmv);
  ctx.Line("if ((fl & 32u) && v != v) go = 1;");
  ctx.Line("if (go ? (fl & 8u) : (fl & 16u)) {");
  ctx.Line("  leaf = go ? " + Tt + "[node] : " + Tfa + "[node];");
  ctx.Line("  break;");
  ctx.Line("}");
  ctx.Line("node = go ? " + Tt + "[node] : " + Tfa + "[node];");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Line("if (leaf < 0) return KILN_ERROR_INVALID_DATA; /* a cycle */");
  ctx.Line("{");
  ctx.Indent();
  ctx.Line("const int32_t tg = " + Tg + "[leaf];");
  ctx.Line("const " + c + " w = " + Tw + "[leaf];");
  if (minmax) ctx.Line("hit[tg] = 1;");
  if (agg == 0 || agg == 1)
    ctx.Line("row[tg] += w;");
  else if (agg == 2)
    ctx.Line("if (w < row[tg]) row[tg] = w;");
  else
    ctx.Line("if (row[tg] < w) row[tg] = w;");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Dedent();
  ctx.Line("}");
  if (minmax)
    ctx.Line("for (q = 0; q < " + S(nt) + "; ++q) if (!hit[q]) row[q] = " + L(ct, 0) + ";");
  EmitPostTransform(ctx, post, ct, "row", nt);
  if (!direct)
    ctx.Line("for (q = 0; q < " + S(nt) + "; ++q) out0[n * " + S(nt) +
             " + q] = " + Store(ctx, t, "row[q]") + ";");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

Status EmitScaler(NodeContext& ctx) {
  ops::ScalerPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, ops::MakeScalerPlan(ctx.node(), ctx.input_dims(0), &p)));
  const int64_t C = p.features;
  if (p.rows * C == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  DType ct = MlCompute(ctx.input_dtype(0));
  const std::string c = CType(ct);
  std::vector<std::string> ov, sv;
  for (int64_t f = 0; f < C; ++f) {
    ov.push_back(L(ct, p.Offset(f)));
    sv.push_back(L(ct, p.Scale(f)));
  }
  std::string o = p.offset.size() > 1 ? Table(ctx, c, "offset", ov) + "[f]" : ov[0];
  std::string s = p.scale.size() > 1 ? Table(ctx, c, "scale", sv) + "[f]" : sv[0];
  ctx.Line("size_t r, f;");
  ctx.Line("for (r = 0; r < " + S(p.rows) + "; ++r)");
  ctx.Line("  for (f = 0; f < " + S(C) + "; ++f)");
  ctx.Line("    out0[r * " + S(C) + " + f] = (float)(((" + c + ")in0[r * " + S(C) + " + f] - " + o +
           ") * " + s + ");");
  if (p.offset.size() <= 1 && p.scale.size() <= 1) ctx.Line("(void)f;");
  return OkStatus();
}

Status EmitNormalizer(NodeContext& ctx) {
  ops::NormalizerPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, ops::MakeNormalizerPlan(ctx.node(), ctx.input_dims(0), &p)));
  const int64_t C = p.features, rows = p.rows;
  if (rows == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  DType ct = MlCompute(ctx.input_dtype(0));
  const std::string c = CType(ct), Z = L(ct, 0), v = "(" + c + ")in0[r * " + S(C) + " + f]";
  ctx.Line("size_t r, f;");
  ctx.Line("for (r = 0; r < " + S(rows) + "; ++r) {");
  ctx.Indent();
  if (p.norm == ops::MlNorm::kMax) {
    ctx.Line(c + " acc = (" + c + ")in0[r * " + S(C) + "];");
    ctx.Line("for (f = 1; f < " + S(C) + "; ++f) if (acc < " + v + ") acc = " + v + ";");
  } else {
    ctx.Line(c + " acc = " + Z + ";");
    if (p.norm == ops::MlNorm::kL1)
      ctx.Line("for (f = 0; f < " + S(C) + "; ++f) acc += " + MathName(ct, "fabs") + "(" + v +
               ");");
    else
      ctx.Line("for (f = 0; f < " + S(C) + "; ++f) acc += " + v + " * " + v + ";");
    if (p.norm == ops::MlNorm::kL2) ctx.Line("acc = " + MathName(ct, "sqrt") + "(acc);");
  }
  ctx.Line("for (f = 0; f < " + S(C) + "; ++f) out0[r * " + S(C) + " + f] = (float)(acc == " + Z +
           " ? " + v + " : " + v + " / acc);");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

Status EmitLinearRegressor(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  ops::LinearRegressorPlan p;
  KILN_RETURN_IF_ERROR(
      Checked(ctx, ops::MakeLinearRegressorPlan(ctx.node(), ctx.input_dims(0), &p)));
  const int64_t T = p.targets, N = p.rows, F = p.features;
  if (N == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  DType ct = MlCompute(t);
  const std::string c = CType(ct);
  std::vector<std::string> cv, iv;
  for (float v : p.coefficients) cv.push_back(L(ct, v));
  for (float v : p.intercepts) iv.push_back(L(ct, v));
  std::string Tc = Table(ctx, c, "coef", cv), Ti = Table(ctx, c, "intercept", iv);
  const bool direct = ct == DType::kFloat32;
  ctx.Line("size_t n, q, f;");
  if (!direct)
    ctx.Line(c + " *row = (" + c + " *)" + ctx.scratch(static_cast<size_t>(T) * DTypeSize(ct)) +
             ";");
  ctx.Line("for (n = 0; n < " + S(N) + "; ++n) {");
  ctx.Indent();
  if (direct) ctx.Line("float *row = out0 + n * " + S(T) + ";");
  ctx.Line("for (q = 0; q < " + S(T) + "; ++q) {");
  ctx.Line("  " + c + " acc = " + Ti + "[q];");
  ctx.Line("  for (f = 0; f < " + S(F) + "; ++f) acc += " + Tc + "[q * " + S(F) + " + f] * (" + c +
           ")in0[n * " + S(F) + " + f];");
  ctx.Line("  row[q] = acc;");
  ctx.Line("}");
  EmitPostTransform(ctx, p.post, ct, "row", T);
  if (!direct)
    ctx.Line("for (q = 0; q < " + S(T) + "; ++q) out0[n * " + S(T) + " + q] = (float)row[q];");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

Status EmitImputer(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  ops::ImputerPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, ops::MakeImputerPlan(ctx.node(), t, ctx.input_dims(0), &p)));
  const int64_t total = NumElements(ctx.input_dims(0)), C = p.features;
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<std::string> lit;
  for (double v : p.values) lit.push_back(ValueLiteral(t, v));
  std::string val =
      lit.size() == 1 ? lit[0] : Table(ctx, CType(t), "value", lit) + "[i % " + S(C) + "]";
  DType ct = MlCompute(t);
  std::string v = ct == t ? "in0[i]" : "(double)in0[i]";
  std::string miss = std::isnan(p.replaced) ? v + " != " + v : v + " == " + L(ct, p.replaced);
  ctx.Line("size_t i;");
  ctx.Line("for (i = 0; i < " + S(total) + "; ++i) out0[i] = " + miss + " ? " + val + " : in0[i];");
  return OkStatus();
}

}  // namespace

void RegisterMiscEmitters(EmitterRegistry& r) {
  r.Register("GridSample", EmitGridSample);
  r.Register("AffineGrid", EmitAffineGrid);
  r.Register("DFT", EmitDft);
  r.Register("STFT", EmitStft);
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    r.Register(op, EmitEvaluated);
  r.Register("MelWeightMatrix", EmitMelWeightMatrix);
  r.Register("Det", EmitDet);
  // These replace emit_shape.cc's element maps (registered before): row / block copies need
  // no table and also take k / sequence_lens at run time.
  r.Register("Trilu", EmitTrilu);
  r.Register("ReverseSequence", EmitReverseSequence);
  const std::string ml = "ai.onnx.ml";
  r.Register("Binarizer", EmitBinarizer, ml);
  r.Register("ArrayFeatureExtractor", EmitArrayFeatureExtractor, ml);
  r.Register("LabelEncoder", EmitLabelEncoder, ml);
  r.Register("TreeEnsemble", EmitTreeEnsemble, ml);
  r.Register("Scaler", EmitScaler, ml);
  r.Register("Normalizer", EmitNormalizer, ml);
  r.Register("LinearRegressor", EmitLinearRegressor, ml);
  r.Register("Imputer", EmitImputer, ml);
}

}  // namespace kiln::codegen::c
