// C emitters for the conv family. Conv and ConvTranspose on float32 call the direct kernels of
// kernels/conv.c and kernels/conv_transpose.c (no im2col scratch), ConvInteger and QLinearConv
// the 8-bit kernel of kernels/qconv.c, each with its geometry as a constant struct. The pools
// (MaxPool with Indices, AveragePool, LpPool and the Global forms), and Conv / ConvTranspose on
// float64, float16 and bfloat16, are emitted as loops specialized to the node's window, with the
// clipping at the image borders spelled out only on the axes where some window is clipped. The
// geometry is the host's (ops/conv_geometry.h and the shape rules of ops/conv.cc), so auto_pad,
// ceil_mode, dilations and output_shape resolve exactly as in the executor, and the arithmetic
// is the host's (the compute type, the order of a window's sum, the requantization).
#include <algorithm>
#include <limits>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "kernels/reference/conv_shape_of.h"
#include "ops/conv_geometry.h"
#include "ops/quantize.h"
#include "ops/roi_align_plan.h"
#include "ops/unary_ops.h"

namespace kiln::codegen::c {
namespace {

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

using ops::Spatial;

std::string Str(int64_t v) { return std::to_string(v); }

// "v * m + a" with the trivial parts left out.
std::string Lin(const std::string& v, int64_t m, int64_t a) {
  std::string e = m == 0 ? "" : m == 1 ? v : v + " * " + Str(m);
  if (e.empty()) return Str(a);
  if (a > 0) e += " + " + Str(a);
  if (a < 0) e += " - " + Str(-a);
  return e;
}

// ---------------------------------------------------------------------------------------------
// Window loops emitted inline (pools, and Conv for the types without a kernel)

// One spatial axis of a sliding window (pool or Conv), with what its windows do at the borders
// (known at compile time, so the emitted code clips only where some window needs it).
struct WindowAxis {
  int64_t in, k, s, d, p, pe, out;
  bool lo_clipped = false, hi_clipped = false, hi_below_lo = false;  // some window is clipped
  bool padded_clipped = false;  // some window is clipped by the padded extent (count_include_pad)
  bool maybe_empty = false;     // some window has no taps inside the image
};

void TapRange(int64_t start, int64_t d, int64_t k, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = start >= 0 ? 0 : (-start + d - 1) / d;
  *hi = n - 1 - start < 0 ? 0 : std::min(k, (n - 1 - start) / d + 1);
}

WindowAxis MakeAxis(const ops::WindowGeom& g, int j) {
  WindowAxis a{g.in[j],        g.kernel[j],  g.strides[j], g.dilations[j],
               g.pad_begin[j], g.pad_end[j], g.out[j]};
  for (int64_t o = 0; o < a.out; ++o) {
    int64_t start = o * a.s - a.p, lo, hi;
    TapRange(start, a.d, a.k, a.in, &lo, &hi);
    a.lo_clipped |= lo > 0;
    a.hi_clipped |= hi < a.k;
    a.hi_below_lo |= hi < lo;
    a.maybe_empty |= hi <= lo;
    TapRange(o * a.s, a.d, a.k, a.in + a.p + a.pe, &lo, &hi);
    a.padded_clipped |= hi - lo != a.k;
  }
  return a;
}

// Emits, per axis j, the loop over output index o<j> (none for one output: o<j> is 0) with its
// window start s<j> and tap range lo<j>..hi<j> (the range is spelled out only where some window
// is clipped), then calls `window` with the output indices to emit the element's body.
void WindowLoops(NodeContext& ctx, const std::vector<WindowAxis>& axes,
                 const std::function<void(const std::vector<Ix>&)>& window) {
  std::vector<Ix> outs;
  int loops = 0;
  for (size_t j = 0; j < axes.size(); ++j) {
    const WindowAxis& a = axes[j];
    std::string o = "o" + Str(j), sj = "s" + Str(j), lo = "lo" + Str(j), hi = "hi" + Str(j);
    outs.push_back(a.out == 1 ? Ix(0) : Ix::Var(o));
    if (a.out != 1) {
      ctx.Line("for (ptrdiff_t " + o + " = 0; " + o + " < " + Str(a.out) + "; ++" + o + ") {");
      ctx.Indent();
      ++loops;
    }
    ctx.Line("const ptrdiff_t " + sj + " = " + (outs.back() * a.s - Ix(a.p)).str() + ";");
    if (a.lo_clipped || a.hi_clipped) {
      ctx.Line("ptrdiff_t " + lo + " = 0, " + hi + " = " + Str(a.k) + ";");
      if (a.lo_clipped)
        ctx.Line("if (" + sj + " < 0) " + lo + " = " +
                 (a.d == 1 ? "-" + sj : "(" + Str(a.d - 1) + " - " + sj + ") / " + Str(a.d)) + ";");
      if (a.hi_clipped)
        ctx.Line("if (" + Lin(sj, 1, (a.k - 1) * a.d) + " > " + Str(a.in - 1) + ") " + hi + " = " +
                 sj + " > " + Str(a.in - 1) + " ? 0 : " +
                 (a.d == 1 ? Str(a.in) + " - " + sj
                           : "(" + Str(a.in - 1) + " - " + sj + ") / " + Str(a.d) + " + 1") +
                 ";");
      if (a.hi_below_lo) ctx.Line("if (" + hi + " < " + lo + ") " + hi + " = " + lo + ";");
    }
  }
  window(outs);
  for (int j = 0; j < loops; ++j) {
    ctx.Dedent();
    ctx.Line("}");
  }
}

// The loops over a window's taps, i<j> being the input index on axis j (no loop for a kernel of
// one tap that no window clips); `tap` emits the body, given the tap indices k<j>.
void TapLoops(NodeContext& ctx, const std::vector<WindowAxis>& axes,
              const std::function<void(const std::vector<Ix>&)>& tap) {
  std::vector<Ix> taps;
  int loops = 0;
  for (size_t j = 0; j < axes.size(); ++j) {
    const WindowAxis& a = axes[j];
    const bool clipped = a.lo_clipped || a.hi_clipped;
    const std::string i = "const ptrdiff_t i" + Str(j) + " = ";
    if (!clipped && a.k == 1) {
      ctx.Line(i + "s" + Str(j) + ";");
      taps.push_back(Ix(0));
      continue;
    }
    taps.push_back(Ix::Var("k" + Str(j)));
    std::string k = "k" + Str(j), lo = clipped ? "lo" + Str(j) : "0",
                hi = clipped ? "hi" + Str(j) : Str(a.k);
    ctx.Line("for (ptrdiff_t " + k + " = " + lo + "; " + k + " < " + hi + "; ++" + k + ") {");
    ctx.Indent();
    ++loops;
    ctx.Line(i + Lin(k, a.d, 0) + " + s" + Str(j) + ";");
  }
  tap(taps);
  for (int j = 0; j < loops; ++j) {
    ctx.Dedent();
    ctx.Line("}");
  }
}

// ---------------------------------------------------------------------------------------------
// Conv and ConvTranspose

using ops::ConvShape;

Status CheckConvTypes(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs X and W");
  DType t = ctx.input_dtype(0);
  if (!IsFloatType(t)) return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  if (ctx.input_dtype(1) != t || (ctx.has_input(2) && ctx.input_dtype(2) != t) ||
      ctx.output_dtype(0) != t)
    return ctx.error("X, W, B and Y must have the same dtype");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 3 || x.size() > 5) return ctx.error("X must have 1 to 3 spatial dims");
  if (ctx.input_dims(1).size() != x.size()) return ctx.error("W must have the rank of X");
  return OkStatus();
}

// The node's shape (ops/conv_geometry.h); the bias is input `bias` (DeformConv: 3).
Status ShapeOf(NodeContext& ctx, bool transpose, ConvShape* s, int bias = 2) {
  const std::string err = (transpose ? ops::ConvTransposeShapeOf : ops::ConvShapeOf)(
      ctx.node(), ctx.input_dims(0), ctx.input_dims(1),
      ctx.has_input(bias) ? &ctx.input_dims(bias) : nullptr, s);
  return err.empty() ? OkStatus() : ctx.error(err);
}

}  // namespace

Expected<std::string> ConvShapeInit(NodeContext& ctx, const ConvShape& s, bool transpose) {
  kiln_conv_shape k;
  if (!kernels::reference::ToKilnConvShape(s, transpose, &k))
    return ctx.error("a dimension does not fit in int32");
  auto list = [](const int32_t* v) {
    return "{" + Str(v[0]) + ", " + Str(v[1]) + ", " + Str(v[2]) + "}";
  };
  return "{" + Str(k.n) + ", " + Str(k.c) + ", " + Str(k.m) + ", " + Str(k.group) + ", " +
         list(k.in) + ", " + list(k.k) + ", " + list(k.s) + ", " + list(k.d) + ", " + list(k.p) +
         ", " + list(k.out) + "}";
}

namespace {

// Conv and ConvTranspose for float64, float16 and bfloat16 (the kernels are float32): loops
// specialized to the node, computing in float (double for float64) like the host.
Status EmitConvInline(NodeContext& ctx, const ConvShape& s, bool transpose) {
  const DType t = ctx.input_dtype(0), ct = ComputeType(t);
  const std::string T = CType(t), C = CType(ct);
  const ops::WindowGeom& g = s.geom;
  const int nd = g.nd;
  const int64_t cg = s.C / s.group, mg = s.M / s.group, ksize = NumElements(g.kernel);
  const Dims& image = transpose ? g.out : g.in;   // what X holds (ConvTranspose: the grid)
  const Dims& result = transpose ? g.in : g.out;  // what Y holds
  const int64_t x_size = NumElements(image), y_size = NumElements(result);
  std::vector<std::string> ivars, ovars, kvars;
  for (int j = 0; j < nd; ++j) {
    ivars.push_back("i" + Str(j));
    ovars.push_back("o" + Str(j));
    kvars.push_back("k" + Str(j));
  }
  const std::string x_at = "xp[" + IndexExpr(ivars, Strides(image)) + "]";
  auto w_at = [&](const std::vector<Ix>& k) {
    return "wp[" + IndexIx(k, Strides(g.kernel)).str() + "]";
  };
  auto y_at = [&](const Ix& out) {
    return "out0[" + Lin("(n * " + Str(s.M) + " + m)", y_size, 0) + " + " + out.str() + "]";
  };
  const std::string acc_init = ctx.has_input(2) ? Load(ctx, t, "in2[m]") : CNumber(ct, 0);
  auto mac = [&](const std::vector<Ix>& k) {
    ctx.Line("acc += " + Load(ctx, t, x_at) + " * " + Load(ctx, t, w_at(k)) + ";");
  };
  ctx.Line("for (ptrdiff_t n = 0; n < " + Str(s.N) + "; ++n) {");
  ctx.Indent();
  ctx.Line("for (ptrdiff_t m = 0; m < " + Str(s.M) + "; ++m) {");
  ctx.Indent();
  ctx.Line("const " + T + " *xg = in0 + (n * " + Str(s.C) + " + m / " + Str(mg) + " * " + Str(cg) +
           ") * " + Str(x_size) + ";");
  if (!transpose) {
    ctx.Line("const " + T + " *wm = in1 + m * " + Str(cg * ksize) + ";");
    std::vector<WindowAxis> axes;
    for (int j = 0; j < nd; ++j) axes.push_back(MakeAxis(g, j));
    WindowLoops(ctx, axes, [&](const std::vector<Ix>& o) {
      ctx.Line(C + " acc = " + acc_init + ";");
      ctx.Line("for (ptrdiff_t c = 0; c < " + Str(cg) + "; ++c) {");
      ctx.Indent();
      ctx.Line("const " + T + " *xp = xg + c * " + Str(x_size) + ", *wp = wm + c * " + Str(ksize) +
               ";");
      TapLoops(ctx, axes, mac);
      ctx.Dedent();
      ctx.Line("}");
      ctx.Line(y_at(IndexIx(o, Strides(result))) + " = " + Store(ctx, t, "acc", ct) + ";");
    });
  } else {
    // Gather: output o takes grid position i = (o + pad - k * dilation) / stride where exact.
    ctx.Line("const " + T + " *wm = in1 + (m / " + Str(mg) + " * " + Str(cg * mg) + " + m % " +
             Str(mg) + ") * " + Str(ksize) + ";");
    for (int j = 0; j < nd; ++j) {
      ctx.Line("for (ptrdiff_t o" + Str(j) + " = 0; o" + Str(j) + " < " + Str(result[j]) + "; ++o" +
               Str(j) + ") {");
      ctx.Indent();
    }
    ctx.Line(C + " acc = " + acc_init + ";");
    for (int j = 0; j < nd; ++j) {
      std::string sj = Str(j), tj = "t" + sj;
      ctx.Line("for (ptrdiff_t k" + sj + " = 0; k" + sj + " < " + Str(g.kernel[j]) + "; ++k" + sj +
               ") {");
      ctx.Indent();
      ctx.Line("const ptrdiff_t " + tj + " = o" + sj +
               (g.pad_begin[j] > 0   ? " + " + Str(g.pad_begin[j])
                : g.pad_begin[j] < 0 ? " - " + Str(-g.pad_begin[j])
                                     : "") +
               " - " + Lin("k" + sj, g.dilations[j], 0) + ";");
      if (g.strides[j] == 1) {
        ctx.Line("const ptrdiff_t i" + sj + " = " + tj + ";");
        ctx.Line("if (" + tj + " < 0 || " + tj + " >= " + Str(image[j]) + ") continue;");
      } else {
        ctx.Line("const ptrdiff_t i" + sj + " = " + tj + " / " + Str(g.strides[j]) + ";");
        ctx.Line("if (" + tj + " < 0 || " + tj + " % " + Str(g.strides[j]) + " != 0 || i" + sj +
                 " >= " + Str(image[j]) + ") continue;");
      }
    }
    ctx.Line("for (ptrdiff_t c = 0; c < " + Str(cg) + "; ++c) {");
    ctx.Indent();
    ctx.Line("const " + T + " *xp = xg + c * " + Str(x_size) + ", *wp = wm + c * " +
             Str(mg * ksize) + ";");
    std::vector<Ix> taps;
    for (const auto& k : kvars) taps.push_back(Ix::Var(k));
    mac(taps);
    ctx.Dedent();
    ctx.Line("}");
    for (int j = 0; j < nd; ++j) {
      ctx.Dedent();
      ctx.Line("}");
    }
    ctx.Line(y_at(IndexIx(ovars, Strides(result))) + " = " + Store(ctx, t, "acc", ct) + ";");
    for (int j = 0; j < nd; ++j) {
      ctx.Dedent();
      ctx.Line("}");
    }
  }
  ctx.Dedent();
  ctx.Line("}");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

Status EmitConvLike(NodeContext& ctx, bool transpose) {
  KILN_RETURN_IF_ERROR(CheckConvTypes(ctx));
  ConvShape s;
  KILN_RETURN_IF_ERROR(ShapeOf(ctx, transpose, &s));
  Dims want = {s.N, s.M};
  const Dims& spatial = transpose ? s.geom.in : s.geom.out;
  want.insert(want.end(), spatial.begin(), spatial.end());
  if (want != ctx.output_dims(0))
    return ctx.error("output dims " + DimsToString(ctx.output_dims(0)) +
                     " differ from the geometry's " + DimsToString(want));
  if (NumElements(want) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (ctx.input_dtype(0) != DType::kFloat32) return EmitConvInline(ctx, s, transpose);
  KILN_ASSIGN_OR_RETURN(std::string init, ConvShapeInit(ctx, s, transpose));
  std::string kernel = transpose ? "conv_transpose" : "conv";
  ctx.UseKernel(kernel);
  ctx.Line("static const kiln_conv_shape shape = " + init + ";");
  ctx.Line("kiln_" + kernel + "_f32(in0, in1, " + std::string(ctx.has_input(2) ? "in2" : "NULL") +
           ", out0, &shape);");
  return OkStatus();
}

// FusedConv (com.microsoft, made by passes/fuse_conv_activation): the Conv, then one loop for
// + Z and the activation, in the host's order (ops/conv.cc).
Status EmitFusedConv(NodeContext& ctx) {
  const std::string act = ctx.node().attr_string("activation", "");
  const std::vector<float> p = ctx.node().attr_floats("activation_params");
  if (!(act.empty() || act == "Relu" || (act == "LeakyRelu" && p.size() == 1) ||
        (act == "Clip" && p.size() == 2) || ((act == "Swish" || act == "HardSwish") && p.empty())))
    return ctx.error("unsupported activation '" + act + "'");
  const bool has_z = ctx.num_inputs() > 3 && ctx.has_input(3);
  if (has_z &&
      (ctx.input_dtype(3) != ctx.input_dtype(0) || ctx.input_dims(3) != ctx.output_dims(0)))
    return ctx.error("Z must have Y's type and shape");
  KILN_RETURN_IF_ERROR(EmitConvLike(ctx, false));
  const DType t = ctx.input_dtype(0), ct = ComputeType(t);
  const std::string C = CType(ct);
  const int64_t n = NumElements(ctx.output_dims(0));
  if (n == 0 || (!has_z && act.empty())) return OkStatus();
  ctx.Line("for (ptrdiff_t i = 0; i < " + Str(n) + "; ++i) {");
  ctx.Indent();
  ctx.Line(C + " v = " + Load(ctx, t, "out0[i]") + ";");
  if (has_z) ctx.Line("v = v + " + Load(ctx, t, "in3[i]") + ";");
  if (act == "Relu") ctx.Line("v = v < 0 ? (" + C + ")0 : v;");
  if (act == "LeakyRelu") ctx.Line("v = v < 0 ? v * " + CNumber(ct, p[0]) + " : v;");
  if (act == "Clip")
    ctx.Line("v = v < " + CNumber(ct, p[0]) + " ? " + CNumber(ct, p[0]) + " : v > " +
             CNumber(ct, p[1]) + " ? " + CNumber(ct, p[1]) + " : v;");
  const ops::SymExpr v = ops::SymExpr::Var("v");
  if (act == "Swish") ctx.Line("v = " + FormulaC(ops::unary::Swish()(v), ct) + ";");
  if (act == "HardSwish") ctx.Line("v = " + FormulaC(ops::unary::HardSwish()(v), ct) + ";");
  ctx.Line("out0[i] = " + Store(ctx, t, "v") + ";");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Pools

enum class PoolKind { kMax, kAvg, kLp };

// What a pool's window body is emitted from: X at the tap (x_at) and Y at the output (y_at).
struct PoolBody {
  NodeContext& ctx;
  const std::vector<WindowAxis>& axes;
  DType t, ct;
  std::string x_at, y_at;
};

// MaxPool of one window, and its Indices when `indices` (arg: the tap's index in the plane in
// the storage order; plane: the plane's offset).
void EmitMaxWindow(const PoolBody& b, bool indices, const std::string& arg, const Ix& plane) {
  NodeContext& ctx = b.ctx;
  const DType t = b.t, ct = b.ct;
  const std::string C = CType(ct), &x_at = b.x_at, &y_at = b.y_at;
  std::string init = IsFloatingDType(ct) ? "-INFINITY" : t == DType::kInt8 ? "-128" : "0";
  ctx.Line(C + " best = " + init + ";");
  bool fl = IsFloatingDType(ct);
  if (indices)
    ctx.Line("int64_t arg = -1;");
  else if (fl)
    ctx.Line("int any = 0;");
  TapLoops(ctx, b.axes, [&](const std::vector<Ix>&) {
    ctx.Line("const " + C + " v = " + Load(ctx, t, x_at) + ";");
    // As the host: the first tap is taken, then a larger one or any after a NaN (so NaN is
    // skipped unless every tap is NaN).
    if (indices) {
      ctx.Line(std::string("if (v > best || arg < 0") + (fl ? " || best != best" : "") + ") {");
      ctx.Line("  best = v;");
      ctx.Line("  arg = " + arg + ";");
      ctx.Line("}");
    } else if (fl) {
      ctx.Line("if (!any || v > best || best != best) {");
      ctx.Line("  best = v;");
      ctx.Line("  any = 1;");
      ctx.Line("}");
    } else {
      ctx.Line("if (v > best) best = v;");
    }
  });
  ctx.Line("out0[" + y_at + "] = " + Store(ctx, t, "best", ct) + ";");
  if (indices)
    ctx.Line("out1[" + y_at + "] = arg < 0 ? -1 : " + (plane + Ix::Var("arg")).str() + ";");
}

// AveragePool's result from `sum`: divided by the taps inside the image, or inside the padded
// extent (count_include_pad).
void EmitAverageResult(const PoolBody& b, bool cip) {
  NodeContext& ctx = b.ctx;
  const DType t = b.t, ct = b.ct;
  const std::string C = CType(ct), &y_at = b.y_at;
  int64_t fixed = 1;
  std::vector<std::string> factors;
  bool maybe_zero = false;
  for (size_t j = 0; j < b.axes.size(); ++j) {
    const WindowAxis& a = b.axes[j];
    std::string sj = Str(static_cast<int64_t>(j));
    if (cip) {
      if (!a.padded_clipped) {
        fixed *= a.k;
        continue;
      }
      // The window starts inside the padded extent; only its end can be clipped.
      ctx.Line("ptrdiff_t n" + sj + " = " +
               (a.d == 1 ? Str(a.in + a.p + a.pe) + " - " + Lin("o" + sj, a.s, 0)
                         : "(" + Str(a.in + a.p + a.pe - 1) + " - " + Lin("o" + sj, a.s, 0) +
                               ") / " + Str(a.d) + " + 1") +
               ";");
      ctx.Line("if (n" + sj + " > " + Str(a.k) + ") n" + sj + " = " + Str(a.k) + ";");
      factors.push_back("n" + sj);
    } else if (a.lo_clipped || a.hi_clipped) {
      factors.push_back("(hi" + sj + " - lo" + sj + ")");
      maybe_zero |= a.maybe_empty;
    } else {
      fixed *= a.k;
    }
  }
  std::string count;
  for (const auto& f : factors) count += (count.empty() ? "" : " * ") + f;
  if (count.empty()) {
    ctx.Line("out0[" + y_at +
             "] = " + Store(ctx, t, "sum / " + CNumber(ct, static_cast<double>(fixed)), ct) + ";");
    return;
  }
  if (fixed != 1) count += " * " + Str(fixed);
  ctx.Line("const ptrdiff_t count = " + count + ";");
  std::string q = "sum / (" + C + ")count";
  if (maybe_zero)
    q = "(count > 0 ? " + q + " : " + (ct == DType::kFloat64 ? "(double)NAN" : "NAN") + ")";
  ctx.Line("out0[" + y_at + "] = " + Store(ctx, t, q, ct) + ";");
}

Status EmitPool(NodeContext& ctx, PoolKind kind) {
  if (!ctx.has_input(0)) return ctx.error("needs input X");
  const ir::Node& node = ctx.node();
  DType t = ctx.input_dtype(0);
  bool int_ok = kind == PoolKind::kMax && (t == DType::kInt8 || t == DType::kUInt8);
  if (!IsFloatType(t) && !int_ok)
    return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  if (ctx.output_dtype(0) != t) return ctx.error("Y must have the dtype of X");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 3 || x.size() > 5) return ctx.error("X must have 1 to 3 spatial dims");
  Dims kernel = node.attr_ints("kernel_shape");
  if (kernel.empty()) return ctx.error("kernel_shape is required");
  ops::WindowGeom g;
  std::string err = ops::ComputeWindowGeom(node, Spatial(x), kernel, true,
                                           node.attr_int("ceil_mode", 0) != 0, &g);
  if (!err.empty()) return ctx.error(err);
  Dims out = {x[0], x[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  if (ctx.output_dims(0) != out)
    return ctx.error("output dims differ from the geometry's " + DimsToString(out));
  bool indices = kind == PoolKind::kMax && ctx.has_output(1);
  if (indices && (ctx.output_dtype(1) != DType::kInt64 || ctx.output_dims(1) != out))
    return ctx.error("Indices must be int64 of the output's dims");
  if (NumElements(out) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  double p = node.attr_float("p", 2.0f);
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive");
  const bool cip = node.attr_int("count_include_pad", 0) != 0;
  const bool col_major = node.attr_int("storage_order", 0) == 1;

  const int nd = g.nd;
  std::vector<WindowAxis> axes;
  for (int j = 0; j < nd; ++j) axes.push_back(MakeAxis(g, j));
  const Dims in_sp = Spatial(x), out_sp = g.out;
  const int64_t in_size = NumElements(in_sp), out_size = NumElements(out_sp), planes = x[0] * x[1];
  std::vector<std::string> ivars;
  for (int j = 0; j < nd; ++j) ivars.push_back("i" + Str(j));
  std::vector<int64_t> cm_strides(nd, 1);  // column-major strides (storage_order = 1)
  for (int j = 1; j < nd; ++j) cm_strides[j] = cm_strides[j - 1] * in_sp[j - 1];
  const DType ct = ComputeType(t);
  const std::string C = CType(ct), T = CType(t);
  const std::string x_at = "xp[" + IndexExpr(ivars, Strides(in_sp)) + "]";
  For(
      ctx, planes, "pl",
      [&](const Ix& pl) {
        ctx.Line("const " + T + " *xp = " + Offset("in0", pl * in_size) + ";");
        WindowLoops(ctx, axes, [&](const std::vector<Ix>& o) {
          const std::string y_at = (pl * out_size + IndexIx(o, Strides(out_sp))).str();
          const PoolBody body{ctx, axes, t, ct, x_at, y_at};
          if (kind == PoolKind::kMax) {
            EmitMaxWindow(body, indices, IndexExpr(ivars, col_major ? cm_strides : Strides(in_sp)),
                          pl * in_size);
            return;
          }
          ctx.Line(C + " sum = " + CNumber(ct, 0) + ";");
          TapLoops(ctx, axes, [&](const std::vector<Ix>&) {
            std::string v = Load(ctx, t, x_at);
            if (kind == PoolKind::kAvg) {
              ctx.Line("sum += " + v + ";");
            } else if (p == 1) {
              ctx.Line("sum += " + MathName(ct, "fabs") + "(" + v + ");");
            } else if (p == 2) {
              ctx.Line("const " + C + " v = " + v + ";");
              ctx.Line("sum += v * v;");
            } else {
              ctx.Line("sum += " + MathName(ct, "pow") + "(" + MathName(ct, "fabs") + "(" + v +
                       "), " + CNumber(ct, p) + ");");
            }
          });
          if (kind == PoolKind::kLp) {
            std::string r = p == 1   ? "sum"
                            : p == 2 ? MathName(ct, "sqrt") + "(sum)"
                                     : MathName(ct, "pow") + "(sum, " + CNumber(ct, 1.0 / p) + ")";
            ctx.Line("out0[" + y_at + "] = " + Store(ctx, t, r, ct) + ";");
            return;
          }
          EmitAverageResult(body, cip);
        });
      },
      "ptrdiff_t");
  return OkStatus();
}

Status EmitGlobalPool(NodeContext& ctx, PoolKind kind) {
  if (!ctx.has_input(0)) return ctx.error("needs input X");
  DType t = ctx.input_dtype(0);
  if (!IsFloatType(t)) return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  if (ctx.output_dtype(0) != t) return ctx.error("Y must have the dtype of X");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("X must have rank 2 or more");
  double p = ctx.node().attr_float("p", 2.0f);
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive");
  const int64_t planes = x[0] * x[1];
  if (planes == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const int64_t n = NumElements(x) / planes;
  const DType ct = ComputeType(t);
  const std::string C = CType(ct);
  if (n == 0) {  // as the host: an empty mean is NaN, an empty max -inf, an empty Lp norm 0
    std::string v = kind == PoolKind::kAvg   ? (ct == DType::kFloat64 ? "(double)NAN" : "NAN")
                    : kind == PoolKind::kMax ? "-INFINITY"
                                             : CNumber(ct, 0);
    ctx.Line("for (ptrdiff_t pl = 0; pl < " + Str(planes) +
             "; ++pl) out0[pl] = " + Store(ctx, t, v) + ";");
    return OkStatus();
  }
  std::string step, result = "acc";  // acc updated by one element v; the result from acc
  if (kind == PoolKind::kMax) {
    step = "if (v > acc || v != v) acc = v;";
  } else if (kind == PoolKind::kAvg) {
    step = "acc += v;";
    result = "acc / " + CNumber(ct, static_cast<double>(n));
  } else if (p == 1) {
    step = "acc += " + MathName(ct, "fabs") + "(v);";
  } else if (p == 2) {
    step = "acc += v * v;";
    result = MathName(ct, "sqrt") + "(acc)";
  } else {
    step = "acc += " + MathName(ct, "pow") + "(" + MathName(ct, "fabs") + "(v), " + CNumber(ct, p) +
           ");";
    result = MathName(ct, "pow") + "(acc, " + CNumber(ct, 1.0 / p) + ")";
  }
  For(
      ctx, planes, "pl",
      [&](const Ix& pl) {
        ctx.Line(C + " acc = " +
                 (kind == PoolKind::kMax ? std::string("-INFINITY") : CNumber(ct, 0)) + ";");
        For(
            ctx, n, "i",
            [&](const Ix& i) {
              ctx.Line("const " + C + " v = " + Load(ctx, t, "in0[" + (pl * n + i).str() + "]") +
                       ";");
              ctx.Line(step);
            },
            "ptrdiff_t");
        ctx.Line("out0[" + pl.str() + "] = " + Store(ctx, t, result, ct) + ";");
      },
      "ptrdiff_t");
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// MaxUnpool, Col2Im, DeformConv, RoiAlign, MaxRoiPool

// MaxUnpool: zeros, then each X element at its flat index of the unpooled shape (which sits at
// the start of a larger output_shape); an index outside it makes run() fail.
Status EmitMaxUnpool(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs X and I");
  DType t = ctx.input_dtype(0);
  if (!IsFloatType(t) || ctx.output_dtype(0) != t)
    return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("I must be int64");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 3 || ctx.input_dims(1) != x)
    return ctx.error("I must have the shape of X, of rank 3 or more");
  const ir::Node& node = ctx.node();
  const int nd = static_cast<int>(x.size()) - 2;
  Dims kernel = node.attr_ints("kernel_shape"), strides = node.attr_ints("strides"),
       pads = node.attr_ints("pads");
  if (strides.empty()) strides.assign(nd, 1);
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (static_cast<int>(kernel.size()) != nd || static_cast<int>(strides.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    return ctx.error("kernel_shape, strides and pads need one value (pads two) per spatial dim");
  Dims inferred = {x[0], x[1]};
  for (int j = 0; j < nd; ++j)
    inferred.push_back(strides[j] * (x[j + 2] - 1) + kernel[j] - pads[j] - pads[j + nd]);
  const Dims& out = ctx.output_dims(0);
  if (out.size() != inferred.size()) return ctx.error("output_shape has the wrong rank");
  for (size_t j = 0; j < out.size(); ++j)
    if (out[j] < inferred[j])
      return ctx.error("output_shape is smaller than the unpooled shape " + DimsToString(inferred));
  const int64_t total = NumElements(inferred);
  ctx.SetCanFail();
  ctx.Line("memset(out0, 0, " + ByteCount(t, NumElements(out)) + ");");
  if (NumElements(x) == 0) return OkStatus();
  ctx.Line("for (ptrdiff_t i = 0; i < " + Str(NumElements(x)) + "; ++i) {");
  ctx.Indent();
  ctx.Line("const int64_t j = in1[i];");
  ctx.Line("if (j < 0 || j >= " + Str(total) + ") return KILN_ERROR_INVALID_DATA;");
  std::string at = "j";
  if (out != inferred) {  // the unpooled coordinates of j, at the output's strides
    std::vector<int64_t> inner = Strides(inferred), os = Strides(out);
    at.clear();
    for (size_t d = 0; d < out.size(); ++d) {
      std::string q = inner[d] == 1 ? "j" : "j / " + Str(inner[d]);
      if (d > 0) q = "(" + q + ") % " + Str(inferred[d]);
      at += (at.empty() ? "" : " + ") + (os[d] == 1 ? q : "(" + q + ") * " + Str(os[d]));
    }
  }
  ctx.Line("out0[" + at + "] = in0[i];");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// Col2Im as a gather: each image element sums, in the host's order (tap by tap), the columns
// whose block covers it.
Status EmitCol2Im(NodeContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs input input");
  DType t = ctx.input_dtype(0);
  if (t == DType::kBool || CType(t).empty() || ctx.output_dtype(0) != t)
    return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> image, ConstantInts(ctx, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> block, ConstantInts(ctx, 2));
  const Dims& x = ctx.input_dims(0);
  if (x.size() != 3 || image.empty() || image.size() != block.size() || image.size() > 3)
    return ctx.error("needs an input of rank 3 and image_shape, block_shape of 1 to 3 values");
  ops::WindowGeom g;
  std::string err = ops::ComputeWindowGeom(ctx.node(), image, block, true, false, &g);
  if (!err.empty()) return ctx.error(err);
  const int64_t kprod = NumElements(block), grid = NumElements(g.out), img = NumElements(image);
  if (kprod == 0 || x[1] % kprod != 0 || x[2] != grid)
    return ctx.error("the input does not match the block geometry");
  const int64_t n = x[0], c = x[1] / kprod;
  Dims want = {n, c};
  want.insert(want.end(), image.begin(), image.end());
  if (ctx.output_dims(0) != want) return ctx.error("output dims differ from " + DimsToString(want));
  if (NumElements(want) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const bool fl = IsFloatingDType(ComputeType(t));
  const std::string A = fl ? CType(ComputeType(t)) : "uint64_t";  // integers wrap, as the host's
  const int nd = g.nd;
  std::vector<std::string> ovars, ivars, kvars;
  for (int j = 0; j < nd; ++j) {
    ovars.push_back("o" + Str(j));
    ivars.push_back("i" + Str(j));
    kvars.push_back("k" + Str(j));
  }
  ctx.Line("for (ptrdiff_t p = 0; p < " + Str(n * c) + "; ++p) {");
  ctx.Indent();
  ctx.Line("const " + CType(t) + " *xp = in0 + " + Lin("p", kprod * grid, 0) + ";");
  for (int j = 0; j < nd; ++j) {
    ctx.Line("for (ptrdiff_t o" + Str(j) + " = 0; o" + Str(j) + " < " + Str(image[j]) + "; ++o" +
             Str(j) + ") {");
    ctx.Indent();
  }
  ctx.Line(A + " acc = 0;");
  for (int j = 0; j < nd; ++j) {
    std::string sj = Str(j), tj = "t" + sj;
    ctx.Line("for (ptrdiff_t k" + sj + " = 0; k" + sj + " < " + Str(block[j]) + "; ++k" + sj +
             ") {");
    ctx.Indent();
    ctx.Line("const ptrdiff_t " + tj + " = " + Lin("o" + sj, 1, g.pad_begin[j]) + " - " +
             Lin("k" + sj, g.dilations[j], 0) + ";");
    ctx.Line("const ptrdiff_t i" + sj + " = " +
             (g.strides[j] == 1 ? tj : tj + " / " + Str(g.strides[j])) + ";");
    ctx.Line("if (" + tj + " < 0" +
             (g.strides[j] == 1 ? "" : " || " + tj + " % " + Str(g.strides[j]) + " != 0") +
             " || i" + sj + " >= " + Str(g.out[j]) + ") continue;");
  }
  std::string v = "xp[(" + IndexExpr(kvars, Strides(block)) + ") * " + Str(grid) + " + " +
                  IndexExpr(ivars, Strides(g.out)) + "]";
  ctx.Line("acc += " + (fl ? Load(ctx, t, v) : "(uint64_t)" + v) + ";");
  for (int j = 0; j < nd; ++j) {
    ctx.Dedent();
    ctx.Line("}");
  }
  ctx.Line("out0[" + Lin("p", img, 0) + " + " +
           IndexExpr(ovars, Strides(Dims(image.begin(), image.end()))) +
           "] = " + Store(ctx, t, "acc") + ";");
  for (int j = 0; j < nd; ++j) {
    ctx.Dedent();
    ctx.Line("}");
  }
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// DeformConv (2-D, float32 and float64): per input channel and tap, the bilinear sample at the
// offset position (times the mask) is computed once and added, times the weights, to every
// output channel of the group, which start at the bias.
Status EmitDeformConv(NodeContext& ctx) {
  for (int i : {0, 1, 2})
    if (!ctx.has_input(i)) return ctx.error("needs inputs X, W and offset");
  DType t = ctx.input_dtype(0);
  if (t != DType::kFloat32 && t != DType::kFloat64)
    return ctx.error("the C backend supports DeformConv on float32 and float64, not " +
                     std::string(DTypeName(t)));
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != t)
      return ctx.error("all inputs must have the same dtype");
  const Dims& x = ctx.input_dims(0);
  const Dims& w = ctx.input_dims(1);
  if (x.size() != 4 || w.size() != 4) return ctx.error("only 2-D DeformConv is supported");
  ConvShape s;
  KILN_RETURN_IF_ERROR(ShapeOf(ctx, false, &s, 3));
  const ops::WindowGeom& g = s.geom;
  const int64_t og = ctx.node().attr_int("offset_group", 1);
  if (og <= 0 || s.C % og != 0)
    return ctx.error("offset_group must be positive and divide the input channels");
  const int64_t H = g.in[0], W = g.in[1], KH = g.kernel[0], KW = g.kernel[1], OH = g.out[0],
                OW = g.out[1];
  const int64_t kprod = KH * KW, osz = OH * OW, cg = s.C / s.group, mg = s.M / s.group,
                c_per_og = s.C / og;
  if (ctx.input_dims(2) != Dims{s.N, og * kprod * 2, OH, OW})
    return ctx.error("offset has the wrong dims");
  const bool mask = ctx.has_input(4);
  if (mask && ctx.input_dims(4) != Dims{s.N, og * kprod, OH, OW})
    return ctx.error("mask has the wrong dims");
  if (ctx.output_dims(0) != Dims{s.N, s.M, OH, OW})
    return ctx.error("output dims differ from the geometry's");
  if (NumElements(ctx.output_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const std::string T = CType(t);
  auto L = [&](double v) { return CNumber(t, v); };
  ctx.Line("for (ptrdiff_t n = 0; n < " + Str(s.N) + "; ++n) {");
  ctx.Indent();
  ctx.Line(T + " *yn = out0 + " + Lin("n", s.M * osz, 0) + ";");
  ctx.Line("for (ptrdiff_t m = 0; m < " + Str(s.M) + "; ++m)");
  ctx.Line("  for (ptrdiff_t p = 0; p < " + Str(osz) + "; ++p) yn[m * " + Str(osz) +
           " + p] = " + (ctx.has_input(3) ? "in3[m]" : L(0)) + ";");
  ctx.Line("for (ptrdiff_t ic = 0; ic < " + Str(s.C) + "; ++ic) {");
  ctx.Indent();
  ctx.Line("const " + T + " *img = in0 + (n * " + Str(s.C) + " + ic) * " + Str(H * W) + ";");
  ctx.Line("const ptrdiff_t og = ic / " + Str(c_per_og) + ", gi = ic / " + Str(cg) + ", c = ic % " +
           Str(cg) + ";");
  ctx.Line("for (ptrdiff_t i = 0; i < " + Str(KH) + "; ++i) {");
  ctx.Line("  for (ptrdiff_t j = 0; j < " + Str(KW) + "; ++j) {");
  ctx.Indent();
  ctx.Indent();
  ctx.Line("const " + T + " *dy = in2 + ((n * " + Str(og) + " + og) * " + Str(kprod * 2) +
           " + (i * " + Str(KW) + " + j) * 2) * " + Str(osz) + ";");
  ctx.Line("const " + T + " *dx = dy + " + Str(osz) + ";");
  if (mask)
    ctx.Line("const " + T + " *mk = in4 + ((n * " + Str(og) + " + og) * " + Str(kprod) + " + i * " +
             Str(KW) + " + j) * " + Str(osz) + ";");
  ctx.Line("for (ptrdiff_t p = 0; p < " + Str(osz) + "; ++p) {");
  ctx.Indent();
  ctx.Line("const ptrdiff_t oy = p / " + Str(OW) + ", ox = p % " + Str(OW) + ";");
  ctx.Line("const " + T + " h = (" + T + ")(oy * " + Str(g.strides[0]) + " - " +
           Str(g.pad_begin[0]) + " + i * " + Str(g.dilations[0]) + ") + dy[p];");
  ctx.Line("const " + T + " w = (" + T + ")(ox * " + Str(g.strides[1]) + " - " +
           Str(g.pad_begin[1]) + " + j * " + Str(g.dilations[1]) + ") + dx[p];");
  ctx.Line(T + " v = " + L(0) + ";");
  // As the host: zero outside (-1, H) x (-1, W), else bilinear with zero outside the image.
  ctx.Line("if (h > " + L(-1) + " && h < " + L(static_cast<double>(H)) + " && w > " + L(-1) +
           " && w < " + L(static_cast<double>(W)) + ") {");
  ctx.Indent();
  ctx.Line("const ptrdiff_t h0 = (ptrdiff_t)" + MathName(t, "floor") + "(h), w0 = (ptrdiff_t)" +
           MathName(t, "floor") + "(w);");
  ctx.Line("const " + T + " lh = h - (" + T + ")h0, lw = w - (" + T + ")w0;");
  auto at = [&](const std::string& i, const std::string& j) {
    return "(" + i + " >= 0 && " + i + " < " + Str(H) + " && " + j + " >= 0 && " + j + " < " +
           Str(W) + " ? img[(" + i + ") * " + Str(W) + " + " + j + "] : " + L(0) + ")";
  };
  ctx.Line("v += (1 - lh) * (1 - lw) * " + at("h0", "w0") + " + (1 - lh) * lw * " +
           at("h0", "w0 + 1") + " +");
  ctx.Line("     lh * (1 - lw) * " + at("h0 + 1", "w0") + " + lh * lw * " + at("h0 + 1", "w0 + 1") +
           ";");
  ctx.Dedent();
  ctx.Line("}");
  if (mask) ctx.Line("v *= mk[p];");
  ctx.Line("for (ptrdiff_t mm = 0; mm < " + Str(mg) + "; ++mm) {");
  ctx.Line("  const ptrdiff_t m = gi * " + Str(mg) + " + mm;");
  ctx.Line("  yn[m * " + Str(osz) + " + p] += in1[((m * " + Str(cg) + " + c) * " + Str(KH) +
           " + i) * " + Str(KW) + " + j] * v;");
  ctx.Line("}");
  for (int k = 0; k < 5; ++k) {
    ctx.Dedent();
    ctx.Line("}");
  }
  return OkStatus();
}

// RoiAlign: the host's sampling grid per region (its size may depend on the region, so it is
// computed at run time), bilinear taps clamped at the image border, avg or max.
Status EmitRoiAlign(NodeContext& ctx) {
  for (int i : {0, 1, 2})
    if (!ctx.has_input(i)) return ctx.error("needs inputs X, rois and batch_indices");
  DType t = ctx.input_dtype(0);
  if (!IsFloatType(t) || ctx.input_dtype(1) != t || ctx.output_dtype(0) != t)
    return ctx.error("unsupported dtype");
  const Dims& x = ctx.input_dims(0);
  const Dims& r = ctx.input_dims(1);
  if (x.size() != 4 || r.size() != 2 || r[1] != 4 || ctx.input_dims(2) != Dims{r[0]})
    return ctx.error("unexpected input dims");
  ops::RoiAlignPlan plan;
  KILN_RETURN_IF_ERROR(Checked(ctx, ops::MakeRoiAlignPlan(ctx.node(), ctx.opset(), &plan)));
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  const int64_t PH = plan.out_h, PW = plan.out_w, sampling = plan.sampling;
  const float scale = plan.spatial_scale;
  const bool max_mode = plan.max_mode, half_pixel = plan.half_pixel;
  if (ctx.output_dims(0) != Dims{r[0], C, PH, PW}) return ctx.error("output dims differ");
  if (NumElements(ctx.output_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  const std::string A = CType(ct), T = CType(t);
  auto L = [&](double v) { return CNumber(ct, v); };
  auto mx = [](const std::string& a, const std::string& b) {
    return "(" + a + " < " + b + " ? " + b + " : " + a + ")";
  };
  ctx.SetCanFail();
  ctx.Line("for (ptrdiff_t r = 0; r < " + Str(r[0]) + "; ++r) {");
  ctx.Indent();
  ctx.Line("const int64_t b = (int64_t)in2[r];");
  ctx.Line("const " + T + " *roi = in1 + r * 4;");
  ctx.Line("if (b < 0 || b >= " + Str(N) + ") return KILN_ERROR_INVALID_DATA;");
  ctx.Line("{");
  ctx.Indent();
  std::string off = half_pixel ? " - " + L(0.5) : "";
  for (int k = 0; k < 4; ++k) {
    const char* name[] = {"x0", "y0", "x1", "y1"};
    ctx.Line("const " + A + " " + name[k] + " = " + Load(ctx, t, "roi[" + Str(k) + "]") + " * " +
             L(scale) + off + ";");
  }
  ctx.Line(A + " rw = x1 - x0, rh = y1 - y0;");
  if (!half_pixel) {
    ctx.Line("rw = " + mx("rw", L(1)) + ";");
    ctx.Line("rh = " + mx("rh", L(1)) + ";");
  }
  ctx.Line("{");
  ctx.Indent();
  ctx.Line("const " + A + " bh = rh / " + L(static_cast<double>(PH)) + ", bw = rw / " +
           L(static_cast<double>(PW)) + ";");
  if (sampling > 0) {
    ctx.Line("const int64_t gh = " + Str(sampling) + ", gw = " + Str(sampling) + ";");
  } else {
    ctx.Line("const int64_t gh = (int64_t)" + MathName(ct, "ceil") + "(rh / " +
             L(static_cast<double>(PH)) + ");");
    ctx.Line("const int64_t gw = (int64_t)" + MathName(ct, "ceil") + "(rw / " +
             L(static_cast<double>(PW)) + ");");
  }
  if (!max_mode) ctx.Line("const " + A + " count = (" + A + ")(gh * gw > 1 ? gh * gw : 1);");
  ctx.Line("for (ptrdiff_t c = 0; c < " + Str(C) + "; ++c) {");
  ctx.Indent();
  ctx.Line("const " + T + " *img = in0 + (b * " + Str(C) + " + c) * " + Str(H * W) + ";");
  ctx.Line(T + " *y = out0 + (r * " + Str(C) + " + c) * " + Str(PH * PW) + ";");
  ctx.Line("for (ptrdiff_t ph = 0; ph < " + Str(PH) + "; ++ph) {");
  ctx.Line("  for (ptrdiff_t pw = 0; pw < " + Str(PW) + "; ++pw) {");
  ctx.Indent();
  ctx.Indent();
  ctx.Line(A + " out = " + L(0) + ";");
  if (max_mode) ctx.Line("int first = 1;");
  ctx.Line("for (int64_t iy = 0; iy < gh; ++iy) {");
  ctx.Indent();
  ctx.Line("const " + A + " yy = y0 + (" + A + ")ph * bh + ((" + A + ")iy + " + L(0.5) +
           ") * bh / (" + A + ")gh;");
  ctx.Line("for (int64_t ix = 0; ix < gw; ++ix) {");
  ctx.Indent();
  ctx.Line("const " + A + " xx = x0 + (" + A + ")pw * bw + ((" + A + ")ix + " + L(0.5) +
           ") * bw / (" + A + ")gw;");
  ctx.Line("ptrdiff_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;");
  ctx.Line(A + " w0 = " + L(0) + ", w1 = " + L(0) + ", w2 = " + L(0) + ", w3 = " + L(0) +
           ", v0, v1, v2, v3;");
  ctx.Line("if (!(yy < " + L(-1) + " || yy > " + L(static_cast<double>(H)) + " || xx < " + L(-1) +
           " || xx > " + L(static_cast<double>(W)) + ")) {");
  ctx.Indent();
  ctx.Line(A + " yv = " + mx("yy", L(0)) + ", xv = " + mx("xx", L(0)) + ";");
  ctx.Line("ptrdiff_t yl = (ptrdiff_t)yv, xl = (ptrdiff_t)xv, yh, xh;");
  ctx.Line(A + " ly, lx;");
  ctx.Line("if (yl >= " + Str(H - 1) + ") { yh = yl = " + Str(H - 1) + "; yv = (" + A +
           ")yl; } else { yh = yl + 1; }");
  ctx.Line("if (xl >= " + Str(W - 1) + ") { xh = xl = " + Str(W - 1) + "; xv = (" + A +
           ")xl; } else { xh = xl + 1; }");
  ctx.Line("ly = yv - (" + A + ")yl;");
  ctx.Line("lx = xv - (" + A + ")xl;");
  ctx.Line("p0 = yl * " + Str(W) + " + xl; p1 = yl * " + Str(W) + " + xh; p2 = yh * " + Str(W) +
           " + xl; p3 = yh * " + Str(W) + " + xh;");
  ctx.Line("w0 = (1 - ly) * (1 - lx); w1 = (1 - ly) * lx; w2 = ly * (1 - lx); w3 = ly * lx;");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Line("v0 = w0 * " + Load(ctx, t, "img[p0]") + ";");
  ctx.Line("v1 = w1 * " + Load(ctx, t, "img[p1]") + ";");
  ctx.Line("v2 = w2 * " + Load(ctx, t, "img[p2]") + ";");
  ctx.Line("v3 = w3 * " + Load(ctx, t, "img[p3]") + ";");
  if (!max_mode) {
    ctx.Line("out += v0 + v1 + v2 + v3;");
  } else {  // as the host: the largest weighted corner
    ctx.Line("{");
    ctx.Line("  const " + A + " m01 = " + mx("v0", "v1") + ", m23 = " + mx("v2", "v3") +
             ", m = " + mx("m01", "m23") + ";");
    ctx.Line("  out = first ? m : " + mx("out", "m") + ";");
    ctx.Line("  first = 0;");
    ctx.Line("}");
  }
  ctx.Dedent();
  ctx.Line("}");
  ctx.Dedent();
  ctx.Line("}");
  ctx.Line("y[ph * " + Str(PW) + " + pw] = " + Store(ctx, t, max_mode ? "out" : "out / count") +
           ";");
  for (int k = 0; k < 6; ++k) {
    ctx.Dedent();
    ctx.Line("}");
  }
  return OkStatus();
}

// MaxRoiPool: the host's (Caffe's) rounding of the regions, in double like the host.
Status EmitMaxRoiPool(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs X and rois");
  DType t = ctx.input_dtype(0);
  if (!IsFloatType(t) || ctx.input_dtype(1) != t || ctx.output_dtype(0) != t)
    return ctx.error("unsupported dtype");
  const Dims& x = ctx.input_dims(0);
  const Dims& r = ctx.input_dims(1);
  if (x.size() != 4 || r.size() != 2 || r[1] != 5) return ctx.error("unexpected input dims");
  Dims ps = ctx.node().attr_ints("pooled_shape");
  if (ps.size() != 2 || ps[0] <= 0 || ps[1] <= 0)
    return ctx.error("pooled_shape must hold two positive values");
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], PH = ps[0], PW = ps[1];
  const float scale = ctx.node().attr_float("spatial_scale", 1.0f);
  if (ctx.output_dims(0) != Dims{r[0], C, PH, PW}) return ctx.error("output dims differ");
  if (NumElements(ctx.output_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const DType ct = ComputeType(t);
  const std::string A = CType(ct), T = CType(t);
  ctx.SetCanFail();
  ctx.Line("for (ptrdiff_t r = 0; r < " + Str(r[0]) + "; ++r) {");
  ctx.Indent();
  ctx.Line("const " + T + " *roi = in1 + r * 5;");
  ctx.Line("const double bid = (double)" + Load(ctx, t, "roi[0]") + ";");
  ctx.Line("if (!(bid >= 0 && bid < " + Str(N) + ")) return KILN_ERROR_INVALID_DATA;");
  ctx.Line("{");
  ctx.Indent();
  ctx.Line("const ptrdiff_t b = (ptrdiff_t)bid;");
  for (int k = 1; k <= 4; ++k) {
    const char* name[] = {"", "ws", "hs", "we", "he"};
    ctx.Line("const ptrdiff_t " + std::string(name[k]) + " = (ptrdiff_t)" + MathName(ct, "round") +
             "(" + Load(ctx, t, "roi[" + Str(k) + "]") + " * " + CNumber(ct, scale) + ");");
  }
  ctx.Line("const double bh = (double)(he - hs + 1 > 1 ? he - hs + 1 : 1) / " + Str(PH) + ".0;");
  ctx.Line("const double bw = (double)(we - ws + 1 > 1 ? we - ws + 1 : 1) / " + Str(PW) + ".0;");
  ctx.Line("for (ptrdiff_t c = 0; c < " + Str(C) + "; ++c) {");
  ctx.Indent();
  ctx.Line("const " + T + " *img = in0 + (b * " + Str(C) + " + c) * " + Str(H * W) + ";");
  ctx.Line(T + " *y = out0 + (r * " + Str(C) + " + c) * " + Str(PH * PW) + ";");
  auto clamp = [](const std::string& v, int64_t hi) {
    return "(" + v + " < 0 ? 0 : " + v + " > " + Str(hi) + " ? " + Str(hi) + " : " + v + ")";
  };
  ctx.Line("for (ptrdiff_t ph = 0; ph < " + Str(PH) + "; ++ph) {");
  ctx.Indent();
  ctx.Line(
      "const ptrdiff_t hf = (ptrdiff_t)floor((double)ph * bh) + hs, hc = "
      "(ptrdiff_t)ceil((double)(ph + 1) * bh) + hs;");
  ctx.Line("const ptrdiff_t h0 = " + clamp("hf", H) + ", h1 = " + clamp("hc", H) + ";");
  ctx.Line("for (ptrdiff_t pw = 0; pw < " + Str(PW) + "; ++pw) {");
  ctx.Indent();
  ctx.Line(
      "const ptrdiff_t wf = (ptrdiff_t)floor((double)pw * bw) + ws, wc = "
      "(ptrdiff_t)ceil((double)(pw + 1) * bw) + ws;");
  ctx.Line("const ptrdiff_t w0 = " + clamp("wf", W) + ", w1 = " + clamp("wc", W) + ";");
  ctx.Line(A + " best = -INFINITY;");
  ctx.Line("for (ptrdiff_t i = h0; i < h1; ++i)");
  ctx.Line("  for (ptrdiff_t j = w0; j < w1; ++j) {");
  ctx.Line("    const " + A + " v = " + Load(ctx, t, "img[i * " + Str(W) + " + j]") + ";");
  ctx.Line("    if (best < v) best = v;");
  ctx.Line("  }");
  ctx.Line("y[ph * " + Str(PW) + " + pw] = h1 <= h0 || w1 <= w0 ? " +
           Store(ctx, t, CNumber(ct, 0)) + " : " + Store(ctx, t, "best") + ";");
  for (int k = 0; k < 5; ++k) {
    ctx.Dedent();
    ctx.Line("}");
  }
  return OkStatus();
}

}  // namespace

void RegisterConvEmitters(EmitterRegistry& r) {
  r.Register("Conv", [](NodeContext& c) { return EmitConvLike(c, false); });
  r.Register("FusedConv", EmitFusedConv, "com.microsoft");
  r.Register("ConvTranspose", [](NodeContext& c) { return EmitConvLike(c, true); });
  r.Register("MaxPool", [](NodeContext& c) { return EmitPool(c, PoolKind::kMax); });
  r.Register("AveragePool", [](NodeContext& c) { return EmitPool(c, PoolKind::kAvg); });
  r.Register("LpPool", [](NodeContext& c) { return EmitPool(c, PoolKind::kLp); });
  r.Register("GlobalMaxPool", [](NodeContext& c) { return EmitGlobalPool(c, PoolKind::kMax); });
  r.Register("GlobalAveragePool", [](NodeContext& c) { return EmitGlobalPool(c, PoolKind::kAvg); });
  r.Register("GlobalLpPool", [](NodeContext& c) { return EmitGlobalPool(c, PoolKind::kLp); });
  r.Register("MaxUnpool", EmitMaxUnpool);
  r.Register("Col2Im", EmitCol2Im);
  r.Register("DeformConv", EmitDeformConv);
  r.Register("RoiAlign", EmitRoiAlign);
  r.Register("MaxRoiPool", EmitMaxRoiPool);
}

}  // namespace kiln::codegen::c
