// C emitters for the normalization family: BatchNormalization (inference, and training with the
// running and saved statistics), InstanceNormalization, LayerNormalization (with the Mean /
// InvStdDev outputs), GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization, and
// the axis-wise Softmax / LogSoftmax / Hardmax (RMSNormalization is emitted with the
// sequence-model ops, emit_sequence_models.cc).
// Every node becomes loops specialized to its shapes. Statistics are computed in the element
// type's compute type (float for float, float16 and bfloat16; double for double): the host
// accumulates in double, which an MCU would emulate in software. Variances use two passes
// (mean first), so float keeps its precision.
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/common.h"
#include "ops/normalization_plan.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

Status RequireFloat(NodeContext& ctx, int i) {
  if (!IsFloatingDType(ctx.input_dtype(i)))
    return ctx.error("input " + S(i) + " must be a floating-point tensor, got " +
                     std::string(DTypeName(ctx.input_dtype(i))));
  return OkStatus();
}

// Emits `<ct> mean` and `<ct> var` (biased, two passes) over the `n` elements x(i), i in [0, n).
void EmitMoments(NodeContext& ctx, DType ct, int64_t n,
                 const std::function<std::string(const std::string&)>& x) {
  std::string ctype = CType(ct), count = CNumber(ct, static_cast<double>(n > 0 ? n : 1));
  ctx.Line(ctype + " mean = " + CNumber(ct, 0) + ";");
  Loop(ctx, n, "i", [&] { ctx.Line("mean += " + x("i") + ";"); });
  ctx.Line("mean /= " + count + ";");
  ctx.Line(ctype + " var = " + CNumber(ct, 0) + ";");
  Loop(ctx, n, "i", [&] {
    ctx.Line("const " + ctype + " d = " + x("i") + " - mean;");
    ctx.Line("var += d * d;");
  });
  ctx.Line("var /= " + count + ";");
}

// ---- BatchNormalization ----

bool BatchNormTraining(const NodeContext& ctx) {
  if (ctx.opset() >= 14) return ctx.node().attr_int("training_mode", 0) != 0;
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) return true;
  return false;
}

Status EmitBatchNorm(NodeContext& ctx) {
  if (ctx.num_inputs() < 5) return ctx.error("needs 5 inputs");
  for (int i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) return ctx.error("inputs cannot be omitted");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i));
  }
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("needs X of rank >= 2");
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  const int64_t N = x[0], C = x[1];
  int64_t inner = 1;
  for (size_t i = 2; i < x.size(); ++i) inner *= x[i];
  const int64_t P = NumElements(ctx.input_dims(1));
  for (int i = 2; i < 5; ++i)
    if (NumElements(ctx.input_dims(i)) != P) return ctx.error("parameters differ in size");
  if (P != C && P != C * inner) return ctx.error("parameters must have C elements");
  const int64_t block = P == C ? inner : 1, sample = C * inner;
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const double momentum = ctx.node().attr_float("momentum", 0.9f);
  const bool training = BatchNormTraining(ctx);
  if (NumElements(x) == 0 && !training) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  auto par = [&](int i, const std::string& p) {
    return Load(ctx, ctx.input_dtype(i), NodeContext::in(i) + "[" + p + "]");
  };
  auto xat = [&](const std::string& off) { return Load(ctx, t, "in0[" + off + "]"); };
  bool constant = !training;
  for (int i = 1; i < 5; ++i) constant = constant && ctx.input_constant(i) != nullptr;
  std::string ta = ctx.function_name + "_scale", tb = ctx.function_name + "_shift";
  if (constant) {
    // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a, folded at compile time
    // (in double, as the host does) into two tables: the four parameter arrays are not needed.
    std::string a = "static const " + ctype + " " + ta + "[" + S(P) + "] = {";
    std::string b = "static const " + ctype + " " + tb + "[" + S(P) + "] = {";
    for (int64_t p = 0; p < P; ++p) {
      double scale = ElementAsDouble(*ctx.input_constant(1), p),
             bias = ElementAsDouble(*ctx.input_constant(2), p);
      double mean = ElementAsDouble(*ctx.input_constant(3), p),
             var = ElementAsDouble(*ctx.input_constant(4), p);
      double inv = 1.0 / std::sqrt(var + eps);
      a += (p % 8 ? " " : "\n    ") + CNumber(ct, scale * inv) + ",";
      b += (p % 8 ? " " : "\n    ") + CNumber(ct, bias - mean * scale * inv) + ",";
    }
    ctx.Table(a + "\n};\n" + b + "\n};\n");
  }
  std::string nb = "n * " + S(sample) + " + p * " + S(block) + " + i";
  Loop(ctx, P, "p", [&] {
    if (training) {
      // Batch statistics over the N samples and the block of each parameter.
      const int64_t count = N * block;
      ctx.Line(ctype + " mean = " + CNumber(ct, 0) + ", var = " + CNumber(ct, 0) + ";");
      Loop(ctx, N, "n",
           [&] { Loop(ctx, block, "i", [&] { ctx.Line("mean += " + xat(nb) + ";"); }); });
      ctx.Line("mean /= " + CNumber(ct, static_cast<double>(count > 0 ? count : 1)) + ";");
      Loop(ctx, N, "n", [&] {
        Loop(ctx, block, "i", [&] {
          ctx.Line("const " + ctype + " d = " + xat(nb) + " - mean;");
          ctx.Line("var += d * d;");
        });
      });
      ctx.Line("var /= " + CNumber(ct, static_cast<double>(count > 0 ? count : 1)) + ";");
      ctx.Line("{");
      ctx.Indent();
      ctx.Line("const " + ctype + " a = " + par(1, "p") + " / " + MathName(ct, "sqrt") + "(var + " +
               CNumber(ct, eps) + ");");
      ctx.Line("const " + ctype + " b = " + par(2, "p") + " - mean * a;");
    } else if (constant) {
      ctx.Line("const " + ctype + " a = " + ta + "[p], b = " + tb + "[p];");
    } else {
      ctx.Line("const " + ctype + " a = " + par(1, "p") + " / " + MathName(ct, "sqrt") + "(" +
               par(4, "p") + " + " + CNumber(ct, eps) + ");");
      ctx.Line("const " + ctype + " b = " + par(2, "p") + " - " + par(3, "p") + " * a;");
    }
    Loop(ctx, N, "n", [&] {
      Loop(ctx, block, "i", [&] {
        ctx.Line("out0[" + nb + "] = " + Store(ctx, t, xat(nb) + " * a + b", ct) + ";");
      });
    });
    if (training) {
      ctx.Dedent();
      ctx.Line("}");
      // Running statistics, and (before opset 14) the saved batch statistics.
      for (int k = 1; k < ctx.num_outputs() && k < 5; ++k) {
        if (!ctx.has_output(k)) continue;
        std::string v = k == 3 ? "mean" : k == 4 ? "var" : "";
        if (k <= 2) {
          std::string run = par(k == 1 ? 3 : 4, "p");
          v = run + " * " + CNumber(ct, momentum) + " + " + (k == 1 ? "mean" : "var") + " * " +
              CNumber(ct, 1 - momentum);
        }
        ctx.Line(NodeContext::out(k) + "[p] = " + Store(ctx, ctx.output_dtype(k), v) + ";");
      }
    }
  });
  return OkStatus();
}

// ---- InstanceNormalization ----

Status EmitInstanceNorm(NodeContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("needs input, scale and B");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i));
  }
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("needs rank >= 2");
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  const int64_t rows = x[0] * x[1], C = x[1];
  const int64_t inner = rows ? NumElements(x) / rows : 0;
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  auto xat = [&](const std::string& i) { return Load(ctx, t, "x[" + i + "]"); };
  Loop(ctx, rows, "r", [&] {
    ctx.Line("const " + CType(t) + " *x = in0 + r * " + S(inner) + ";");
    ctx.Line(CType(t) + " *y = out0 + r * " + S(inner) + ";");
    ctx.Line("const size_t c = r % " + S(C) + ";");
    EmitMoments(ctx, ct, inner, xat);
    ctx.Line("const " + ctype + " a = " + Load(ctx, ctx.input_dtype(1), "in1[c]") + " / " +
             MathName(ct, "sqrt") + "(var + " + CNumber(ct, eps) + ");");
    ctx.Line("const " + ctype + " b = " + Load(ctx, ctx.input_dtype(2), "in2[c]") + " - mean * a;");
    Loop(ctx, inner, "i",
         [&] { ctx.Line("y[i] = " + Store(ctx, t, xat("i") + " * a + b", ct) + ";"); });
  });
  return OkStatus();
}

// ---- LayerNormalization ----

Status EmitLayerNorm(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs X and Scale");
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 1));
  const Dims& x = ctx.input_dims(0);
  ops::LayerNormPlan plan;
  const std::string err = ops::PlanLayerNorm(
      ctx.node(), x, ctx.input_dims(1), ctx.has_input(2) ? &ctx.input_dims(2) : nullptr, &plan);
  if (!err.empty()) return ctx.error(err);
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  const Dims norm(x.begin() + plan.axis, x.end());
  const int64_t rows = plan.rows, cols = plan.cols;
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const double eps = plan.epsilon;
  if (ctx.has_input(2)) KILN_RETURN_IF_ERROR(RequireFloat(ctx, 2));
  auto xat = [&](const std::string& i) { return Load(ctx, t, "x[" + i + "]"); };
  For(ctx, rows, "r", [&](const Ix& r) {
    // Scale and bias broadcast to the normalized dims (indexed by the column), or to all of X.
    auto affine = [&](int i, bool per_column) {
      const Dims& p = ctx.input_dims(i);
      const Ix at = r * cols + Ix::Var("c");
      return Load(ctx, ctx.input_dtype(i),
                  NodeContext::in(i) + "[" +
                      (per_column ? BroadcastIndex("c", p, norm)
                                  : BroadcastIndex("(" + at.str() + ")", p, x)) +
                      "]");
    };
    ctx.Line("const " + CType(t) + " *x = " + Offset("in0", r * cols) + ";");
    ctx.Line(CType(t) + " *y = " + Offset("out0", r * cols) + ";");
    EmitMoments(ctx, ct, cols, xat);
    ctx.Line("const " + ctype + " inv = " + CNumber(ct, 1) + " / " + MathName(ct, "sqrt") +
             "(var + " + CNumber(ct, eps) + ");");
    for (int k = 1; k < 3 && k < ctx.num_outputs(); ++k)
      if (ctx.has_output(k))
        ctx.Line(NodeContext::out(k) + "[" + r.str() +
                 "] = " + Store(ctx, ctx.output_dtype(k), k == 1 ? "mean" : "inv", ct) + ";");
    Loop(ctx, cols, "c", [&] {
      std::string v = "(" + xat("c") + " - mean) * inv * " + affine(1, plan.scale_per_column);
      if (ctx.has_input(2)) v += " + " + affine(2, plan.bias_per_column);
      ctx.Line("y[c] = " + Store(ctx, t, v, ct) + ";");
    });
  });
  return OkStatus();
}

// ---- GroupNormalization ----

Status EmitGroupNorm(NodeContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("needs X, scale and bias");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i));
  }
  const Dims& x = ctx.input_dims(0);
  ops::GroupNormPlan plan;
  const std::string err =
      ops::PlanGroupNorm(ctx.node(), x, ctx.input_dims(1), ctx.input_dims(2), &plan);
  if (!err.empty()) return ctx.error(err);
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  const int64_t groups = plan.groups, inner = plan.inner, cpg = plan.channels_per_group;
  const int64_t gsize = cpg * inner, rows = plan.batch * groups;
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const double eps = plan.epsilon;
  auto param = [&](int i, bool per_group) {
    return Load(ctx, ctx.input_dtype(i), NodeContext::in(i) + (per_group ? "[g]" : "[c]"));
  };
  const std::string scale = param(1, plan.scale_per_group), bias = param(2, plan.bias_per_group);
  auto xat = [&](const std::string& i) { return Load(ctx, t, "x[" + i + "]"); };
  Loop(ctx, rows, "r", [&] {
    ctx.Line("const " + CType(t) + " *x = in0 + r * " + S(gsize) + ";");
    ctx.Line(CType(t) + " *y = out0 + r * " + S(gsize) + ";");
    ctx.Line("const size_t g = r % " + S(groups) + ";");
    EmitMoments(ctx, ct, gsize, xat);
    ctx.Line("const " + ctype + " inv = " + CNumber(ct, 1) + " / " + MathName(ct, "sqrt") +
             "(var + " + CNumber(ct, eps) + ");");
    ctx.Line("(void)g;");
    Loop(ctx, cpg, "cc", [&] {
      ctx.Line("const size_t c = g * " + S(cpg) + " + cc;");
      ctx.Line("const " + ctype + " a = " + scale + " * inv;");
      ctx.Line("const " + ctype + " b = " + bias + " - mean * a;");
      ctx.Line("(void)c;");
      Loop(ctx, inner, "i", [&] {
        std::string k = "cc * " + S(inner) + " + i";
        ctx.Line("y[" + k + "] = " + Store(ctx, t, xat(k) + " * a + b", ct) + ";");
      });
    });
  });
  return OkStatus();
}

// ---- LRN ----

Status EmitLrn(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("needs rank >= 2");
  const ir::Node& n = ctx.node();
  const int64_t size = n.attr_int("size", 0);
  if (size <= 0) return ctx.error("needs a positive size");
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f),
               bias = n.attr_float("bias", 1.0f);
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  const int64_t N = x[0], C = x[1], inner = C && N ? NumElements(x) / (N * C) : 0;
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Loop(ctx, N, "b", [&] {
    Loop(ctx, C, "c", [&] {
      // The channel window [c - lo, c + hi], clipped to [0, C - 1].
      ctx.Line("const size_t c0 = " +
               (lo == 0 ? std::string("c") : "c >= " + S(lo) + " ? c - " + S(lo) + " : 0") + ";");
      ctx.Line("const size_t c1 = c + " + S(hi + 1) + " < " + S(C) + " ? c + " + S(hi) + " : " +
               S(C - 1) + ";");
      Loop(ctx, inner, "i", [&] {
        ctx.Line(ctype + " sq = " + CNumber(ct, 0) + ";");
        ctx.Line("for (size_t k = c0; k <= c1; ++k) {");
        ctx.Line("  const " + ctype + " v = " +
                 Load(ctx, t, "in0[(b * " + S(C) + " + k) * " + S(inner) + " + i]") + ";");
        ctx.Line("  sq += v * v;");
        ctx.Line("}");
        std::string o = "(b * " + S(C) + " + c) * " + S(inner) + " + i";
        ctx.Line("out0[" + o + "] = " +
                 Store(ctx, t,
                       Load(ctx, t, "in0[" + o + "]") + " / " + MathName(ct, "pow") + "(" +
                           CNumber(ct, bias) + " + " +
                           CNumber(ct, alpha / static_cast<double>(size)) + " * sq, " +
                           CNumber(ct, beta) + ")") +
                 ";");
      });
    });
  });
  return OkStatus();
}

// ---- LpNormalization ----

Status EmitLpNorm(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const Dims& x = ctx.input_dims(0);
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormAxis(&axis, x.size())) return ctx.error("axis out of range");
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.error("p must be 1 or 2");
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  AxisSplit s = SplitAround(x, axis);
  For(ctx, s.outer, "o", [&](const Ix& o) {
    For(ctx, s.inner, "i", [&](const Ix& i) {
      auto at = [&](const Ix& k) { return (o * (s.len * s.inner) + i + k * s.inner).str(); };
      ctx.Line(ctype + " norm = " + CNumber(ct, 0) + ";");
      For(ctx, s.len, "k", [&](const Ix& k) {
        ctx.Line("const " + ctype + " v = " + Load(ctx, t, "in0[" + at(k) + "]") + ";");
        ctx.Line(p == 1 ? "norm += " + MathName(ct, "fabs") + "(v);" : "norm += v * v;");
      });
      if (p == 2) ctx.Line("norm = " + MathName(ct, "sqrt") + "(norm);");
      // An all-zero slice stays zero.
      For(ctx, s.len, "k", [&](const Ix& k) {
        ctx.Line("out0[" + at(k) + "] = " +
                 Store(ctx, t,
                       "norm == " + CNumber(ct, 0) + " ? " + CNumber(ct, 0) + " : " +
                           Load(ctx, t, "in0[" + at(k) + "]") + " / norm",
                       ct) +
                 ";");
      });
    });
  });
  return OkStatus();
}

// ---- MeanVarianceNormalization ----

Status EmitMvn(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const Dims& x = ctx.input_dims(0);
  const ir::Node& n = ctx.node();
  std::vector<int64_t> axes;
  if (ctx.opset() >= 9)
    axes = n.attr_ints("axes", {0, 2, 3});
  else if (n.attr_int("across_channels", 0))
    axes = {1, 2, 3};
  else
    axes = {2, 3};
  const bool variance = ctx.opset() >= 9 || n.attr_int("normalize_variance", 1) != 0;
  std::vector<char> reduced(x.size(), 0);
  for (int64_t a : axes) {
    if (!NormAxis(&a, x.size())) return ctx.error("axis out of range");
    reduced[a] = 1;
  }
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<int64_t> st = Strides(x);
  Dims kd, rd;
  std::vector<int64_t> ks, rs;
  for (size_t a = 0; a < x.size(); ++a) {
    (reduced[a] ? rd : kd).push_back(x[a]);
    (reduced[a] ? rs : ks).push_back(st[a]);
  }
  MergedAxes km = MergeAxes(kd, {ks}), rm = MergeAxes(rd, {rs});
  const int64_t count = NumElements(rd);
  Nest(ctx, km.dims, "k", [&](const std::vector<std::string>& kidx) {
    ctx.Line("const size_t base = " + IndexExpr(kidx, km.strides[0]) + ";");
    auto over = [&](const std::function<void(const std::string& at)>& f) {
      Nest(ctx, rm.dims, "r", [&](const std::vector<std::string>& ridx) {
        f("base + " + IndexExpr(ridx, rm.strides[0]));
      });
    };
    ctx.Line(ctype + " mean = " + CNumber(ct, 0) + ";");
    over([&](const std::string& at) {
      ctx.Line("mean += " + Load(ctx, t, "in0[" + at + "]") + ";");
    });
    ctx.Line("mean /= " + CNumber(ct, static_cast<double>(count)) + ";");
    std::string den = "";
    if (variance) {
      ctx.Line(ctype + " var = " + CNumber(ct, 0) + ";");
      over([&](const std::string& at) {
        ctx.Line("const " + ctype + " d = " + Load(ctx, t, "in0[" + at + "]") + " - mean;");
        ctx.Line("var += d * d;");
      });
      ctx.Line("const " + ctype + " den = " + MathName(ct, "sqrt") + "(var / " +
               CNumber(ct, static_cast<double>(count)) + ") + " + CNumber(ct, 1e-9) + ";");
      den = " / den";
    }
    over([&](const std::string& at) {
      ctx.Line("out0[" + at + "] = " +
               Store(ctx, t, "(" + Load(ctx, t, "in0[" + at + "]") + " - mean)" + den, ct) + ";");
    });
  });
  return OkStatus();
}

// ---- Softmax / LogSoftmax / Hardmax ----

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

Status EmitSoft(NodeContext& ctx, SoftKind kind) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const Dims& x = ctx.input_dims(0);
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  std::string ctype = CType(ct);
  if (NumElements(x) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  // Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 the op runs along
  // the one axis (default -1).
  AxisSplit s;
  if (!x.empty()) {
    int64_t axis = ctx.node().attr_int("axis", ctx.opset() >= 13 ? -1 : 1);
    if (!NormAxis(&axis, x.size())) return ctx.error("axis out of range");
    s = SplitAround(x, axis);
    if (ctx.opset() < 13) {
      s.len *= s.inner;
      s.inner = 1;
    }
  }
  // The row of (o, i) starts at base; its element k lies k * inner further.
  Ix base;
  auto at = [&](const Ix& k) { return (base + k * s.inner).str(); };
  auto xat = [&](const Ix& k) { return Load(ctx, t, "in0[" + at(k) + "]"); };
  const Ix k_rest = Ix::Var("k");
  auto rest = [&](const std::function<void()>& body) {  // k over [1, len)
    if (s.len > 1) {
      ctx.Line("for (size_t k = 1; k < " + S(s.len) + "; ++k) {");
      ctx.Indent();
      body();
      ctx.Dedent();
      ctx.Line("}");
    }
  };
  For(ctx, s.outer, "o", [&](const Ix& o) {
    For(ctx, s.inner, "i", [&](const Ix& i) {
      base = o * (s.len * s.inner) + i;
      if (!base.is_constant()) {
        ctx.Line("const size_t base = " + base.str() + ";");
        base = Ix::Var("base");
      }
      ctx.Line(ctype + " mx = " + xat(0) + ";");
      if (kind == SoftKind::kHardmax) {
        // The first maximum wins; NaN never compares greater.
        ctx.Line("size_t arg = 0;");
        rest([&] {
          ctx.Line("const " + ctype + " v = " + xat(k_rest) + ";");
          ctx.Line("if (v > mx) {");
          ctx.Line("  mx = v;");
          ctx.Line("  arg = k;");
          ctx.Line("}");
        });
        For(ctx, s.len, "k", [&](const Ix& k) {
          ctx.Line(
              "out0[" + at(k) + "] = " +
              Store(ctx, t, k.str() + " == arg ? " + CNumber(ct, 1) + " : " + CNumber(ct, 0), ct) +
              ";");
        });
        return;
      }
      rest([&] {
        ctx.Line("const " + ctype + " v = " + xat(k_rest) + ";");
        ctx.Line("mx = mx < v ? v : mx;");
      });
      ctx.Line(ctype + " sum = " + CNumber(ct, 0) + ";");
      const bool keep =
          kind == SoftKind::kSoftmax && t == ct;  // exp(x - max) kept in y, rescaled in place
      For(ctx, s.len, "k", [&](const Ix& k) {
        ctx.Line("const " + ctype + " e = " + MathName(ct, "exp") + "(" + xat(k) + " - mx);");
        ctx.Line("sum += e;");
        if (keep) ctx.Line("out0[" + at(k) + "] = e;");
      });
      if (kind == SoftKind::kSoftmax) {
        ctx.Line("sum = " + CNumber(ct, 1) + " / sum;");
        For(ctx, s.len, "k", [&](const Ix& k) {
          if (keep)
            ctx.Line("out0[" + at(k) + "] *= sum;");
          else
            ctx.Line("out0[" + at(k) + "] = " +
                     Store(ctx, t, MathName(ct, "exp") + "(" + xat(k) + " - mx) * sum", ct) + ";");
        });
      } else {
        ctx.Line("sum = mx + " + MathName(ct, "log") + "(sum);");
        For(ctx, s.len, "k", [&](const Ix& k) {
          ctx.Line("out0[" + at(k) + "] = " + Store(ctx, t, xat(k) + " - sum", ct) + ";");
        });
      }
    });
  });
  return OkStatus();
}

}  // namespace

void RegisterNormalizationEmitters(EmitterRegistry& r) {
  r.Register("BatchNormalization", EmitBatchNorm);
  r.Register("InstanceNormalization", EmitInstanceNorm);
  r.Register("LayerNormalization", EmitLayerNorm);
  r.Register("GroupNormalization", EmitGroupNorm);
  r.Register("LRN", EmitLrn);
  r.Register("LpNormalization", EmitLpNorm);
  r.Register("MeanVarianceNormalization", EmitMvn);
  r.Register("Softmax", [](NodeContext& ctx) { return EmitSoft(ctx, SoftKind::kSoftmax); });
  r.Register("LogSoftmax", [](NodeContext& ctx) { return EmitSoft(ctx, SoftKind::kLogSoftmax); });
  r.Register("Hardmax", [](NodeContext& ctx) { return EmitSoft(ctx, SoftKind::kHardmax); });
}

}  // namespace kiln::codegen::c
