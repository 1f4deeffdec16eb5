// Node emitters of the CUDA backend's scalar path, by family: element-wise (through the C
// backend's expressions, so both backends spell the math alike), matrix products, layout ops,
// normalization, convolution and pooling. Each writes per-sample loops of constant trip count.
#include <algorithm>
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "codegen/cuda/cuda_emit.h"
#include "ops/normalization_plan.h"
#include "ops/op_traits.h"

namespace kiln::codegen::cuda {

c::Ix Flat(const std::vector<c::Ix>& idx, const std::vector<int64_t>& strides, int64_t base) {
  c::Ix e(base);
  for (size_t k = 0; k < idx.size(); ++k) e = e + idx[k] * strides[k];
  return e;
}

namespace {

std::string Num(double v) { return c::CNumber(DType::kFloat32, v); }

}  // namespace

Expected<std::string> EmitContext::In(int i, const c::Ix& idx) {
  KILN_ASSIGN_OR_RETURN(Loc l, locate_(node_.inputs[i]));
  switch (l.kind) {
    case Loc::Kind::kSlot:
      return l.slot + "[" + (idx + l.offset).str() + "]";
    case Loc::Kind::kWeight:
      return std::string(l.half ? "kiln_ldh(wh + " : "kiln_ld(w + ") + (idx + l.offset).str() + ")";
    case Loc::Kind::kSplat:
      return Num(l.start);
    case Loc::Kind::kArithmetic:  // exact in double, folded by the compiler once idx is constant
      return "(float)(" + c::CNumber(DType::kFloat64, l.start) + " + " +
             c::CNumber(DType::kFloat64, l.step) + " * (double)(" + idx.str() + "))";
  }
  return Error("bad location");
}

Expected<std::string> EmitContext::Out(int i, const c::Ix& idx) {
  KILN_ASSIGN_OR_RETURN(Loc l, locate_(node_.outputs[i]));
  if (l.kind != Loc::Kind::kSlot)
    return Error("output '" + graph_.values[node_.outputs[i]].name + "' has no slot");
  return l.slot + "[" + (idx + l.offset).str() + "]";
}

Expected<std::string> EmitContext::In4(int i, const c::Ix& idx) {
  KILN_ASSIGN_OR_RETURN(Loc l, locate_(node_.inputs[i]));
  if (l.kind != Loc::Kind::kWeight || l.offset % 4 != 0) return std::string();
  return std::string(l.half ? "kiln_ldh4(wh + " : "kiln_ld4(w + ") + (idx + l.offset).str() + ")";
}

c::Ix EmitContext::For(int64_t n, int64_t from, int64_t step) {
  const std::string v = Var();
  Line(unroll_ ? "KILN_UNROLL" : "KILN_NO_UNROLL");
  Open("for (int " + v + " = " + std::to_string(from) + "; " + v + " < " + std::to_string(n) +
       "; " + (step == 1 ? "++" + v : v + " += " + std::to_string(step)) + ")");
  return c::Ix::Var(v);
}

c::Ix EmitContext::Loop(int64_t n) {
  loops_.push_back(n != 1);
  return n == 1 ? c::Ix(0) : For(n);
}

void EmitContext::EndLoop() {
  if (loops_.back()) Close();
  loops_.pop_back();
}

void EmitContext::Nest(const Dims& dims,
                       const std::function<void(const std::vector<c::Ix>&)>& body) {
  std::vector<c::Ix> idx;
  for (int64_t d : dims) idx.push_back(Loop(d));
  body(idx);
  for (size_t k = 0; k < dims.size(); ++k) EndLoop();
}

namespace {

#define KILN_TRY(var, expr) KILN_ASSIGN_OR_RETURN(std::string var, expr)

int64_t Axis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

std::vector<int64_t> Strides(const Dims& d) { return c::Strides(d); }

// Strides of `in` broadcast to `out` (numpy rules): 0 where the input has size 1 or no axis.
std::vector<int64_t> BroadcastStrides(const Dims& in, const Dims& out) {
  std::vector<int64_t> s(out.size(), 0), is = Strides(in);
  size_t off = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) s[off + k] = in[k] == 1 ? 0 : is[k];
  return s;
}

Status RejectBatchAxis(EmitContext& ctx, int64_t axis, const char* what) {
  if (axis == 0)
    return ctx.error(std::string(what) +
                     " over axis 0 (the batch) mixes samples, which a per-thread kernel cannot do");
  return OkStatus();
}

// out = f(in...) element by element with broadcasting.
Status EmitMap(EmitContext& ctx,
               const std::function<Expected<std::string>(const std::vector<std::string>&)>& f) {
  const Dims& od = ctx.output_dims(0);
  Status st = OkStatus();
  ctx.Nest(od, [&](const std::vector<c::Ix>& idx) {
    std::vector<std::string> args;
    for (int i = 0; i < ctx.num_inputs() && st.ok(); ++i) {
      if (!ctx.has_input(i)) continue;
      auto a = ctx.In(i, Flat(idx, BroadcastStrides(ctx.input_dims(i), od)));
      if (!a.ok()) {
        st = a.status();
        return;
      }
      args.push_back(*a);
    }
    if (!st.ok()) return;
    auto v = f(args);
    auto o = ctx.Out(0, Flat(idx, Strides(od)));
    if (!v.ok() || !o.ok()) {
      st = !v.ok() ? v.status() : o.status();
      return;
    }
    ctx.Line(*o + " = " + *v + ";");
  });
  return st;
}

Status EmitUnary(EmitContext& ctx) {
  static const std::map<std::string, std::string> fast = {
      {"Sin", "kiln_fast_sinf"}, {"Cos", "kiln_fast_cosf"}, {"Exp", "kiln_fast_expf"}};
  auto f = fast.find(ctx.node().op_type);
  if (ctx.fast_math() && f != fast.end())
    return EmitMap(ctx, [&](const std::vector<std::string>& a) -> Expected<std::string> {
      return f->second + "(" + a[0] + ")";
    });
  c::NodeContext cctx(ctx.graph(), ctx.node(), ctx.opset());
  return EmitMap(ctx, [&](const std::vector<std::string>& a) {
    return c::UnaryExpr(cctx, DType::kFloat32, a[0]);
  });
}

Status EmitGather(EmitContext& ctx, const std::function<c::Ix(const std::vector<c::Ix>&)>& src);

// Reshape & co when the planner could not make them views: a flat copy of input 0 (the other
// inputs are shapes and axes, used at compile time).
Status EmitCopy(EmitContext& ctx) {
  const Dims& od = ctx.output_dims(0);
  return EmitGather(ctx, [&](const std::vector<c::Ix>& idx) { return Flat(idx, Strides(od)); });
}

Status EmitBinary(EmitContext& ctx, const std::string& op) {
  return EmitMap(ctx, [&](const std::vector<std::string>& a) -> Expected<std::string> {
    std::string acc = a[0];
    for (size_t k = 1; k < a.size(); ++k) {
      if (op == "Max")
        acc = "fmaxf(" + acc + ", " + a[k] + ")";
      else if (op == "Min")
        acc = "fminf(" + acc + ", " + a[k] + ")";
      else if (op == "Pow")
        acc = "powf(" + acc + ", " + a[k] + ")";
      else
        acc = "(" + acc + " " + op + " " + a[k] + ")";
    }
    return acc;
  });
}

Status EmitClip(EmitContext& ctx) {
  double lo = -INFINITY, hi = INFINITY;
  if (ctx.opset() < 11) {
    lo = ctx.node().attr_float("min", -INFINITY);
    hi = ctx.node().attr_float("max", INFINITY);
  } else {
    for (int i : {1, 2}) {
      if (!ctx.has_input(i)) continue;
      const Tensor* t = ctx.input_constant(i);
      if (!t || t->size() != 1) return ctx.error("Clip bounds must be constants");
      (i == 1 ? lo : hi) = c::ElementAsDouble(*t, 0);
    }
  }
  const Dims& od = ctx.output_dims(0);
  Status st = OkStatus();
  ctx.Nest(od, [&](const std::vector<c::Ix>& idx) {
    auto a = ctx.In(0, Flat(idx, Strides(od)));
    auto o = ctx.Out(0, Flat(idx, Strides(od)));
    if (!a.ok() || !o.ok()) {
      st = Error("clip location");
      return;
    }
    std::string v = *a;
    if (std::isfinite(lo)) v = "fmaxf(" + v + ", " + Num(lo) + ")";
    if (std::isfinite(hi)) v = "fminf(" + v + ", " + Num(hi) + ")";
    ctx.Line(*o + " = " + v + ";");
  });
  return st;
}

// y[b, m, n] = sum_k a[b, m, k] * b[b, k, n] (+ bias), with batch axes broadcast. A weight B of
// rank 2 whose rows are a multiple of 4 is read a float4 at a time into the output row.
Status EmitMatMulCore(EmitContext& ctx, bool trans_a, bool trans_b, double alpha, double beta,
                      int bias_input) {
  Dims ad = ctx.input_dims(0), bd = ctx.input_dims(1);
  const Dims& od = ctx.output_dims(0);
  if (ad.size() < 2 || bd.size() < 2)
    return ctx.error("MatMul with a 1-D operand is not supported by --target cuda");
  int64_t M = trans_a ? ad[ad.size() - 1] : ad[ad.size() - 2],
          K = trans_a ? ad[ad.size() - 2] : ad[ad.size() - 1];
  int64_t N = trans_b ? bd[bd.size() - 2] : bd[bd.size() - 1];
  ctx.SetWork(NumElements(od) * K);
  Dims batch(od.begin(), od.end() - 2);
  auto batch_strides = [&](const Dims& d) {
    Dims bdims(d.begin(), d.end() - 2);
    std::vector<int64_t> s = BroadcastStrides(bdims, batch);
    for (auto& x : s) x *= d[d.size() - 1] * d[d.size() - 2];
    return s;
  };
  std::vector<int64_t> as = batch_strides(ad), bs = batch_strides(bd), os = batch_strides(od);
  // Element (m, k) of A and (k, n) of B, row-major with the transposes.
  auto a_at = [&](const c::Ix& base, const c::Ix& m, const c::Ix& k) {
    return Flat({base, m, k}, {1, trans_a ? 1 : K, trans_a ? M : 1});
  };
  auto b_at = [&](const c::Ix& base, const c::Ix& k, const c::Ix& n) {
    return Flat({base, k, n}, {1, trans_b ? 1 : N, trans_b ? K : 1});
  };
  auto bias = [&](const c::Ix& m, const c::Ix& n) -> Expected<std::string> {
    if (bias_input < 0) return std::string();
    Dims cd = ctx.input_dims(bias_input);
    std::vector<int64_t> cs = BroadcastStrides(cd, {M, N});
    KILN_TRY(c, ctx.In(bias_input, Flat({m, n}, cs)));
    return beta == 1 ? c : Num(beta) + " * " + c;
  };
  auto scaled = [&](const std::string& acc) { return alpha == 1 ? acc : Num(alpha) + " * " + acc; };
  Status st = OkStatus();
  bool vec_rows = !trans_b && bd.size() == 2 && N % 4 == 0;  // B[k, n..n+3] contiguous
  bool vec_dots = trans_b && bd.size() == 2 && K % 4 == 0;   // B[n, k..k+3] contiguous
  KILN_TRY(probe, ctx.In4(1, 0));
  bool weight_b = !probe.empty();
  ctx.Nest(batch, [&](const std::vector<c::Ix>& bi) {
    const c::Ix ab = Flat(bi, as), bb = Flat(bi, bs), ob = Flat(bi, os);
    auto fail = [&](const Status& s) {
      if (st.ok()) st = s;
    };
    if (weight_b && vec_rows) {
      // The output row accumulates a[m, k] * B[k, :] a float4 at a time.
      const c::Ix m = ctx.Loop(M);
      auto orow = [&](const c::Ix& col) { return Flat({ob, m, col}, {1, N, 1}); };
      c::Ix n = ctx.For(N);
      auto o = ctx.Out(0, orow(n));
      if (!o.ok()) return fail(o.status());
      ctx.Line(*o + " = 0.0f;");
      ctx.Close();
      c::Ix k = ctx.For(K);
      auto a = ctx.In(0, a_at(ab, m, k));
      if (!a.ok()) return fail(a.status());
      std::string av = ctx.Temp();
      ctx.Line("const float " + av + " = " + *a + ";");
      c::Ix n4 = ctx.For(N, 0, 4);
      auto w4 = ctx.In4(1, Flat({k, n4}, {N, 1}));
      if (!w4.ok()) return fail(w4.status());
      std::string wv = ctx.Temp();
      ctx.Line("const kiln_f4 " + wv + " = " + *w4 + ";");
      const char* lanes[] = {"x", "y", "z", "w"};
      for (int l = 0; l < 4; ++l) {
        auto o4 = ctx.Out(0, Flat({ob, m, n4}, {1, N, 1}, l));
        if (!o4.ok()) return fail(o4.status());
        ctx.Line(*o4 + " += " + av + " * " + wv + "." + lanes[l] + ";");
      }
      ctx.Close();
      ctx.Close();
      if (bias_input >= 0 || alpha != 1) {
        c::Ix n2 = ctx.For(N);
        auto o2 = ctx.Out(0, orow(n2));
        auto c = bias(m, n2);
        if (!o2.ok() || !c.ok()) return fail(!o2.ok() ? o2.status() : c.status());
        ctx.Line(*o2 + " = " + scaled(*o2) + (c->empty() ? "" : " + " + *c) + ";");
        ctx.Close();
      }
      ctx.EndLoop();
      return;
    }
    // A dot product per output element; a weight B with contiguous k reads float4s.
    const c::Ix m = ctx.Loop(M), n = ctx.For(N);
    std::string acc = ctx.Temp();
    ctx.Line("float " + acc + " = 0.0f;");
    if (weight_b && vec_dots) {
      c::Ix k = ctx.For(K, 0, 4);
      auto w4 = ctx.In4(1, b_at(bb, k, n));
      if (!w4.ok()) return fail(w4.status());
      std::string wv = ctx.Temp();
      ctx.Line("const kiln_f4 " + wv + " = " + *w4 + ";");
      const char* lanes[] = {"x", "y", "z", "w"};
      for (int l = 0; l < 4; ++l) {
        auto a = ctx.In(0, a_at(ab, m, k + l));
        if (!a.ok()) return fail(a.status());
        ctx.Line(acc + " += " + *a + " * " + wv + "." + lanes[l] + ";");
      }
    } else {
      c::Ix k = ctx.For(K);
      auto a = ctx.In(0, a_at(ab, m, k));
      auto b = ctx.In(1, b_at(bb, k, n));
      if (!a.ok() || !b.ok()) return fail(!a.ok() ? a.status() : b.status());
      ctx.Line(acc + " += " + *a + " * " + *b + ";");
    }
    ctx.Close();
    auto o = ctx.Out(0, Flat({ob, m, n}, {1, N, 1}));
    auto c = bias(m, n);
    if (!o.ok() || !c.ok()) return fail(!o.ok() ? o.status() : c.status());
    ctx.Line(*o + " = " + scaled(acc) + (c->empty() ? "" : " + " + *c) + ";");
    ctx.Close();
    ctx.EndLoop();
  });
  return st;
}

Status EmitMatMul(EmitContext& ctx) { return EmitMatMulCore(ctx, false, false, 1, 1, -1); }

Status EmitGemm(EmitContext& ctx) {
  const ir::Node& n = ctx.node();
  return EmitMatMulCore(ctx, n.attr_int("transA", 0) != 0, n.attr_int("transB", 0) != 0,
                        n.attr_float("alpha", 1), n.attr_float("beta", 1),
                        ctx.has_input(2) ? 2 : -1);
}

// Copies every element of the output from the input element `src(idx)` gives.
Status EmitGather(EmitContext& ctx, const std::function<c::Ix(const std::vector<c::Ix>&)>& src) {
  const Dims& od = ctx.output_dims(0);
  Status st = OkStatus();
  ctx.Nest(od, [&](const std::vector<c::Ix>& idx) {
    auto a = ctx.In(0, src(idx));
    auto o = ctx.Out(0, Flat(idx, Strides(od)));
    if (!a.ok() || !o.ok()) {
      st = !a.ok() ? a.status() : o.status();
      return;
    }
    ctx.Line(*o + " = " + *a + ";");
  });
  return st;
}

Status EmitTranspose(EmitContext& ctx) {
  const Dims& id = ctx.input_dims(0);
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty())
    for (size_t k = 0; k < id.size(); ++k) perm.insert(perm.begin(), static_cast<int64_t>(k));
  if (perm[0] != 0)
    return ctx.error(
        "a Transpose that moves axis 0 (the batch) mixes samples, which a per-thread kernel cannot "
        "do");
  std::vector<int64_t> is = Strides(id), ps;
  for (int64_t p : perm) ps.push_back(id[p] == 1 ? 0 : is[p]);
  return EmitGather(ctx, [&](const std::vector<c::Ix>& idx) { return Flat(idx, ps); });
}

Status EmitTile(EmitContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto reps, [&]() -> Expected<std::vector<int64_t>> {
    const Tensor* t = ctx.input_constant(1);
    if (!t) return ctx.error("Tile repeats must be a constant");
    std::vector<int64_t> v;
    for (int64_t i = 0; i < t->size(); ++i)
      v.push_back(static_cast<int64_t>(c::ElementAsDouble(*t, i)));
    return v;
  }());
  if (!reps.empty() && reps[0] != 1)
    return ctx.error("a Tile that repeats axis 0 (the batch) mixes samples");
  const Dims& id = ctx.input_dims(0);
  std::vector<int64_t> is = Strides(id);
  return EmitGather(ctx, [&](const std::vector<c::Ix>& idx) {
    std::vector<c::Ix> ii;
    for (size_t k = 0; k < idx.size(); ++k) {
      if (id[k] == 1 || reps[k] == 1)
        ii.push_back(id[k] == 1 ? c::Ix(0) : idx[k]);
      else if (idx[k].is_constant())
        ii.push_back(idx[k].constant() % id[k]);
      else  // a repeated axis: the remainder (of a loop variable), as one opaque term
        ii.push_back(c::Ix::Var("(" + idx[k].str() + " % " + std::to_string(id[k]) + ")"));
    }
    return Flat(ii, is);
  });
}

Status EmitSlice(EmitContext& ctx) {
  const Dims& id = ctx.input_dims(0);
  const Dims& od = ctx.output_dims(0);
  std::vector<int64_t> starts, axes, steps;
  auto ints = [&](int i) -> Expected<std::vector<int64_t>> {
    const Tensor* t = ctx.input_constant(i);
    if (!t) return ctx.error("Slice bounds must be constants");
    std::vector<int64_t> v;
    for (int64_t k = 0; k < t->size(); ++k)
      v.push_back(static_cast<int64_t>(c::ElementAsDouble(*t, k)));
    return v;
  };
  if (ctx.opset() < 10) {
    starts = ctx.node().attr_ints("starts");
    axes = ctx.node().attr_ints("axes");
  } else {
    KILN_ASSIGN_OR_RETURN(starts, ints(1));
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, ints(3));
    }
    if (ctx.has_input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, ints(4));
    }
  }
  std::vector<int64_t> first(id.size(), 0), step(id.size(), 1);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes.empty() ? static_cast<int64_t>(k) : Axis(axes[k], id.size());
    int64_t s = steps.empty() ? 1 : steps[k], d = id[a];
    int64_t st = starts[k] < 0 ? starts[k] + d : starts[k];
    st = s > 0 ? std::clamp<int64_t>(st, 0, d) : std::clamp<int64_t>(st, 0, d - 1);
    first[a] = st;
    step[a] = s;
  }
  if (od[0] != id[0]) return ctx.error("a Slice over axis 0 (the batch) mixes samples");
  std::vector<int64_t> is = Strides(id), s2;
  int64_t base = 0;
  for (size_t k = 0; k < id.size(); ++k) {
    base += first[k] * is[k];
    s2.push_back(step[k] * is[k]);
  }
  return EmitGather(ctx, [&](const std::vector<c::Ix>& idx) { return Flat(idx, s2, base); });
}

Status EmitConcat(EmitContext& ctx) {
  const Dims& od = ctx.output_dims(0);
  int64_t axis = Axis(ctx.node().attr_int("axis", 0), od.size());
  KILN_RETURN_IF_ERROR(RejectBatchAxis(ctx, axis, "a Concat"));
  KILN_ASSIGN_OR_RETURN(Loc ol, ctx.OutLoc(0));
  std::vector<int64_t> os = Strides(od);
  int64_t at = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Dims& id = ctx.input_dims(i);
    int64_t base = at * os[axis];
    at += id[axis];
    KILN_ASSIGN_OR_RETURN(Loc il, ctx.InLoc(i));
    // The planner may have produced this input in its place in the output already.
    if (il.kind == Loc::Kind::kSlot && il.slot == ol.slot && il.offset == ol.offset + base)
      continue;
    Status st = OkStatus();
    ctx.Nest(id, [&](const std::vector<c::Ix>& idx) {
      auto a = ctx.In(i, Flat(idx, Strides(id)));
      auto o = ctx.Out(0, Flat(idx, os, base));
      if (!a.ok() || !o.ok()) {
        st = !a.ok() ? a.status() : o.status();
        return;
      }
      ctx.Line(*o + " = " + *a + ";");
    });
    KILN_RETURN_IF_ERROR(st);
  }
  return OkStatus();
}

// The input as [outer, len, inner] around `axis` (or, for Softmax before opset 13 and
// LayerNormalization, [outer, len] with len every axis from `axis` on).
struct Rows {
  int64_t outer = 1, len = 1, inner = 1;
};
Rows RowsOf(const Dims& d, int64_t axis, bool to_end) {
  Rows r;
  for (size_t k = 0; k < d.size(); ++k) {
    int64_t kk = static_cast<int64_t>(k);
    if (kk < axis)
      r.outer *= d[k];
    else if (kk == axis || to_end)
      r.len *= d[k];
    else
      r.inner *= d[k];
  }
  return r;
}

Status EmitSoftmax(EmitContext& ctx, const std::string& op) {
  const Dims& d = ctx.input_dims(0);
  bool old = ctx.opset() < 13;
  int64_t axis = Axis(ctx.node().attr_int("axis", old ? 1 : -1), d.size());
  KILN_RETURN_IF_ERROR(RejectBatchAxis(ctx, axis, ("a " + op).c_str()));
  Rows r = RowsOf(d, axis, old);
  ctx.SetWork(NumElements(d) * 3);
  Status st = OkStatus();
  ctx.Nest({r.outer, r.inner}, [&](const std::vector<c::Ix>& oi) {
    auto at = [&](const c::Ix& k) {
      return Flat({oi[0], k, oi[1]}, {r.len * r.inner, r.inner, 1});
    };
    auto fail = [&](const Status& s) {
      if (st.ok()) st = s;
    };
    std::string mx = ctx.Temp(), sum = ctx.Temp();
    auto x0 = ctx.In(0, at(0));
    if (!x0.ok()) return fail(x0.status());
    ctx.Line("float " + mx + " = " + *x0 + ";");
    c::Ix k = ctx.For(r.len, 1);
    auto x = ctx.In(0, at(k));
    if (!x.ok()) return fail(x.status());
    ctx.Line(mx + " = fmaxf(" + mx + ", " + *x + ");");
    ctx.Close();
    ctx.Line("float " + sum + " = 0.0f;");
    c::Ix k2 = ctx.For(r.len);
    auto x2 = ctx.In(0, at(k2));
    auto o2 = ctx.Out(0, at(k2));
    if (!x2.ok() || !o2.ok()) return fail(Error("softmax location"));
    if (op == "LogSoftmax") {
      ctx.Line(*o2 + " = " + *x2 + " - " + mx + ";");
      ctx.Line(sum + " += expf(" + *o2 + ");");
    } else {
      ctx.Line(*o2 + " = expf(" + *x2 + " - " + mx + ");");
      ctx.Line(sum + " += " + *o2 + ";");
    }
    ctx.Close();
    if (op == "LogSoftmax") ctx.Line(sum + " = logf(" + sum + ");");
    c::Ix k3 = ctx.For(r.len);
    auto o3 = ctx.Out(0, at(k3));
    if (!o3.ok()) return fail(o3.status());
    ctx.Line(*o3 + (op == "LogSoftmax" ? " -= " : " /= ") + sum + ";");
    ctx.Close();
  });
  return st;
}

Status EmitLayerNorm(EmitContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  ops::LayerNormPlan plan;
  const std::string err = ops::PlanLayerNorm(
      ctx.node(), d, ctx.input_dims(1), ctx.has_input(2) ? &ctx.input_dims(2) : nullptr, &plan);
  if (!err.empty()) return ctx.error(err);
  const int64_t axis = plan.axis;
  KILN_RETURN_IF_ERROR(RejectBatchAxis(ctx, axis, "a LayerNormalization"));
  const double eps = plan.epsilon;
  Rows r = RowsOf(d, axis, true);
  ctx.SetWork(NumElements(d) * 3);
  Dims tail(d.begin() + axis, d.end());
  Status st = OkStatus();
  ctx.Nest({r.outer}, [&](const std::vector<c::Ix>& oi) {
    auto fail = [&](const Status& s) {
      if (st.ok()) st = s;
    };
    const c::Ix row = oi[0] * r.len;
    std::string mean = ctx.Temp(), var = ctx.Temp(), inv = ctx.Temp();
    ctx.Line("float " + mean + " = 0.0f, " + var + " = 0.0f;");
    c::Ix k = ctx.For(r.len);
    auto x = ctx.In(0, row + k);
    if (!x.ok()) return fail(x.status());
    ctx.Line(mean + " += " + *x + ";");
    ctx.Close();
    ctx.Line(mean + " /= " + Num(static_cast<double>(r.len)) + ";");
    c::Ix k2 = ctx.For(r.len);
    auto x2 = ctx.In(0, row + k2);
    if (!x2.ok()) return fail(x2.status());
    ctx.Line("{ const float dx = " + *x2 + " - " + mean + "; " + var + " += dx * dx; }");
    ctx.Close();
    ctx.Line("const float " + inv + " = 1.0f / sqrtf(" + var + " / " +
             Num(static_cast<double>(r.len)) + " + " + Num(eps) + ");");
    c::Ix k3 = ctx.For(r.len);
    auto x3 = ctx.In(0, row + k3);
    auto o = ctx.Out(0, row + k3);
    auto sc = ctx.In(1, k3);
    if (!x3.ok() || !o.ok() || !sc.ok()) return fail(Error("layernorm location"));
    std::string v = "(" + *x3 + " - " + mean + ") * " + inv + " * " + *sc;
    if (ctx.has_input(2)) {
      auto b = ctx.In(2, k3);
      if (!b.ok()) return fail(b.status());
      v += " + " + *b;
    }
    ctx.Line(*o + " = " + v + ";");
    ctx.Close();
  });
  if (NumElements(ctx.input_dims(1)) != r.len)
    return ctx.error("LayerNormalization scale must have the normalized dims");
  return st;
}

// "if (ih >= 0 && ih < H && ...) " for the input coordinates at[k] of a window, leaving out the
// bounds no tap can cross (a coordinate's lowest value is -pad_lo[k], its highest highest[k]);
// "" when every tap is inside.
std::string Inside(const std::vector<c::Ix>& at, const std::vector<int64_t>& pad_lo,
                   const std::vector<int64_t>& highest, const std::vector<int64_t>& extent) {
  std::string cond;
  for (size_t k = 0; k < at.size(); ++k) {
    std::string v = at[k].is_constant() ? at[k].str() : "(" + at[k].str() + ")";
    if (pad_lo[k] > 0) cond += (cond.empty() ? "" : " && ") + v + " >= 0";
    if (highest[k] >= extent[k])
      cond += (cond.empty() ? "" : " && ") + v + " < " + std::to_string(extent[k]);
  }
  return cond.empty() ? "" : "if (" + cond + ") ";
}

// 1-D or 2-D Conv over one sample (N = 1), with groups, pads, strides and dilations.
Status EmitConv(EmitContext& ctx) {
  Dims xd = ctx.input_dims(0), wd = ctx.input_dims(1), od = ctx.output_dims(0);
  if (xd.size() == 3) {  // 1-D as 2-D with height 1
    xd.insert(xd.begin() + 2, 1);
    wd.insert(wd.begin() + 2, 1);
    od.insert(od.begin() + 2, 1);
  }
  if (xd.size() != 4) return ctx.error("only 1-D and 2-D Conv are supported by --target cuda");
  const ir::Node& n = ctx.node();
  std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID")
    return ctx.error("Conv auto_pad " + ap + " is not supported by --target cuda");
  bool one_d = ctx.input_dims(0).size() == 3;
  auto two = [&](const char* key, int64_t def) {
    std::vector<int64_t> v = n.attr_ints(key);
    if (v.empty()) return std::vector<int64_t>(one_d ? 1 : 2, def);
    return v;
  };
  std::vector<int64_t> st = two("strides", 1), dl = two("dilations", 1), pads = n.attr_ints("pads");
  if (pads.empty()) pads.assign(one_d ? 2 : 4, 0);
  if (one_d) {
    st.insert(st.begin(), 1);
    dl.insert(dl.begin(), 1);
    pads = {0, pads[0], 0, pads[1]};
  }
  int64_t group = n.attr_int("group", 1), C = xd[1], H = xd[2], W = xd[3], M = od[1], OH = od[2],
          OW = od[3];
  int64_t CG = C / group, MG = M / group, KH = wd[2], KW = wd[3];
  ctx.SetWork(NumElements(od) * CG * KH * KW);
  std::string acc = ctx.Temp();
  c::Ix m = ctx.Loop(M), oh = ctx.Loop(OH), ow = ctx.Loop(OW);
  if (ctx.has_input(2)) {
    KILN_TRY(b, ctx.In(2, m));
    ctx.Line("float " + acc + " = " + b + ";");
  } else {
    ctx.Line("float " + acc + " = 0.0f;");
  }
  // The input channel: c of group m / MG.
  c::Ix group_base;
  if (group > 1 && MG == 1) {
    group_base = m * CG;
  } else if (group > 1) {
    std::string g = ctx.Temp();
    ctx.Line("const int " + g + " = " + m.str() + " / " + std::to_string(MG) + ";");
    group_base = c::Ix::Var(g) * CG;
  }
  c::Ix c = ctx.Loop(CG), kh = ctx.Loop(KH), kw = ctx.Loop(KW);
  c::Ix ih = oh * st[0] + kh * dl[0] - pads[0], iw = ow * st[1] + kw * dl[1] - pads[1];
  KILN_TRY(x, ctx.In(0, (group_base + c) * (H * W) + ih * W + iw));
  KILN_TRY(w, ctx.In(1, m * (CG * KH * KW) + c * (KH * KW) + kh * KW + kw));
  std::string inside = Inside({ih, iw}, {pads[0], pads[1]},
                              {(OH - 1) * st[0] + (KH - 1) * dl[0] - pads[0],
                               (OW - 1) * st[1] + (KW - 1) * dl[1] - pads[1]},
                              {H, W});
  ctx.Line(inside + acc + " += " + x + " * " + w + ";");
  ctx.EndLoop();
  ctx.EndLoop();
  ctx.EndLoop();
  KILN_TRY(o, ctx.Out(0, m * (OH * OW) + oh * OW + ow));
  ctx.Line(o + " = " + acc + ";");
  ctx.EndLoop();
  ctx.EndLoop();
  ctx.EndLoop();
  return OkStatus();
}

// MaxPool / AveragePool (2-D, N = 1) and GlobalAveragePool / GlobalMaxPool.
Status EmitPool(EmitContext& ctx, const std::string& op) {
  Dims xd = ctx.input_dims(0), od = ctx.output_dims(0);
  if (xd.size() != 4) return ctx.error("only 2-D pooling is supported by --target cuda");
  const ir::Node& n = ctx.node();
  bool global = op.rfind("Global", 0) == 0, is_max = op.find("Max") != std::string::npos;
  int64_t C = xd[1], H = xd[2], W = xd[3], OH = od[2], OW = od[3];
  std::vector<int64_t> k = global ? std::vector<int64_t>{H, W} : n.attr_ints("kernel_shape");
  std::vector<int64_t> st = global ? std::vector<int64_t>{1, 1} : n.attr_ints("strides", {1, 1});
  std::vector<int64_t> pads =
      global ? std::vector<int64_t>{0, 0, 0, 0} : n.attr_ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> dl = global ? std::vector<int64_t>{1, 1} : n.attr_ints("dilations", {1, 1});
  std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID")
    return ctx.error(op + " auto_pad " + ap + " is not supported by --target cuda");
  if (ctx.has_output(1))
    return ctx.error("MaxPool's Indices output is not supported by --target cuda");
  bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  ctx.SetWork(NumElements(od) * k[0] * k[1]);
  std::string acc = ctx.Temp(), cnt = ctx.Temp();
  c::Ix c = ctx.Loop(C), oh = ctx.Loop(OH), ow = ctx.Loop(OW);
  ctx.Line("float " + acc + " = " + (is_max ? "-INFINITY" : "0.0f") + ";");
  bool count = !is_max && !include_pad && !global;  // divide by the taps inside the input
  if (count) ctx.Line("int " + cnt + " = 0;");
  c::Ix kh = ctx.Loop(k[0]), kw = ctx.Loop(k[1]);
  c::Ix ih = oh * st[0] + kh * dl[0] - pads[0], iw = ow * st[1] + kw * dl[1] - pads[1];
  KILN_TRY(x, ctx.In(0, c * (H * W) + ih * W + iw));
  std::string inside = Inside({ih, iw}, {pads[0], pads[1]},
                              {(OH - 1) * st[0] + (k[0] - 1) * dl[0] - pads[0],
                               (OW - 1) * st[1] + (k[1] - 1) * dl[1] - pads[1]},
                              {H, W});
  if (is_max) {
    ctx.Line(inside + acc + " = fmaxf(" + acc + ", " + x + ");");
  } else {
    ctx.Line(inside + "{ " + acc + " += " + x + ";" + (count ? " ++" + cnt + ";" : "") + " }");
  }
  ctx.EndLoop();
  ctx.EndLoop();
  KILN_TRY(o, ctx.Out(0, c * (OH * OW) + oh * OW + ow));
  if (is_max) {
    ctx.Line(o + " = " + acc + ";");
  } else if (include_pad || global) {
    // Taps inside the padded input count (all taps for a global pool).
    std::string total =
        global ? Num(static_cast<double>(H * W)) : Num(static_cast<double>(k[0] * k[1]));
    ctx.Line(o + " = " + acc + " / " + total + ";");
  } else {
    ctx.Line(o + " = " + acc + " / (float)" + cnt + ";");
  }
  ctx.EndLoop();
  ctx.EndLoop();
  ctx.EndLoop();
  return OkStatus();
}

// ReduceSum / Mean / Max / Min / Prod / SumSquare / L1 / L2 / LogSum / LogSumExp over constant
// axes other than the batch.
Status EmitReduce(EmitContext& ctx, const std::string& op) {
  const Dims& d = ctx.input_dims(0);
  const ir::Node& n = ctx.node();
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (ctx.has_input(1)) {
    const Tensor* t = ctx.input_constant(1);
    if (!t) return ctx.error(op + " axes must be a constant");
    axes.clear();
    for (int64_t k = 0; k < t->size(); ++k)
      axes.push_back(static_cast<int64_t>(c::ElementAsDouble(*t, k)));
  }
  std::vector<bool> reduced(d.size(), axes.empty() && n.attr_int("noop_with_empty_axes", 0) == 0);
  for (int64_t a : axes) reduced[Axis(a, d.size())] = true;
  if (!d.empty() && reduced[0])
    return ctx.error("a " + op +
                     " over axis 0 (the batch) mixes samples, which a per-thread kernel cannot do");
  Dims kept = d, inner = d;
  int64_t count = 1;
  for (size_t k = 0; k < d.size(); ++k) {
    if (reduced[k])
      kept[k] = 1, count *= d[k];
    else
      inner[k] = 1;
  }
  ctx.SetWork(NumElements(d) * (op == "ReduceLogSumExp" ? 2 : 1));
  std::vector<int64_t> is = Strides(d), ks = Strides(kept);
  Status st = OkStatus();
  ctx.Nest(kept, [&](const std::vector<c::Ix>& outer) {
    auto fail = [&](const Status& e) {
      if (st.ok()) st = e;
    };
    std::string acc = ctx.Temp(), mx = ctx.Temp();
    auto pass = [&](const std::function<std::string(const std::string&)>& update) {
      ctx.Nest(inner, [&](const std::vector<c::Ix>& in) {
        std::vector<c::Ix> idx(d.size());
        for (size_t k = 0; k < d.size(); ++k) idx[k] = reduced[k] ? in[k] : outer[k];
        auto x = ctx.In(0, Flat(idx, is));
        if (!x.ok()) return fail(x.status());
        ctx.Line(update(*x));
      });
    };
    if (op == "ReduceLogSumExp") {
      ctx.Line("float " + mx + " = -INFINITY;");
      pass([&](const std::string& x) { return mx + " = fmaxf(" + mx + ", " + x + ");"; });
    }
    std::string init = op == "ReduceMax"    ? "-INFINITY"
                       : op == "ReduceMin"  ? "INFINITY"
                       : op == "ReduceProd" ? "1.0f"
                                            : "0.0f";
    ctx.Line("float " + acc + " = " + init + ";");
    pass([&](const std::string& x) {
      if (op == "ReduceMax") return acc + " = fmaxf(" + acc + ", " + x + ");";
      if (op == "ReduceMin") return acc + " = fminf(" + acc + ", " + x + ");";
      if (op == "ReduceProd") return acc + " *= " + x + ";";
      if (op == "ReduceSumSquare" || op == "ReduceL2")
        return "{ const float v = " + x + "; " + acc + " += v * v; }";
      if (op == "ReduceL1") return acc + " += fabsf(" + x + ");";
      if (op == "ReduceLogSumExp") return acc + " += expf(" + x + " - " + mx + ");";
      return acc + " += " + x + ";";
    });
    std::string r = acc;
    if (op == "ReduceMean")
      r = acc + " / " + Num(static_cast<double>(count));
    else if (op == "ReduceL2")
      r = "sqrtf(" + acc + ")";
    else if (op == "ReduceLogSum")
      r = "logf(" + acc + ")";
    else if (op == "ReduceLogSumExp")
      r = mx + " + logf(" + acc + ")";
    auto o = ctx.Out(0, Flat(outer, ks));
    if (!o.ok()) return fail(o.status());
    ctx.Line(*o + " = " + r + ";");
  });
  return st;
}

const std::map<std::string, EmitFn>& Emitters() {
  static const auto* m = [] {
    auto* r = new std::map<std::string, EmitFn>;
    for (const std::string& op : ops::OpsWithTrait(ops::kCudaUnary)) (*r)[op] = EmitUnary;
    for (const std::string& op : ops::OpsWithTrait(ops::kView)) (*r)[op] = EmitCopy;
    const std::map<std::string, std::string> binary = {
        {"Add", "+"},   {"Sub", "-"},   {"Mul", "*"},   {"Div", "/"},
        {"Pow", "Pow"}, {"Max", "Max"}, {"Min", "Min"}, {"Sum", "+"}};
    for (const auto& [op, sym] : binary)
      (*r)[op] = [sym = sym](EmitContext& ctx) { return EmitBinary(ctx, sym); };
    (*r)["Clip"] = EmitClip;
    (*r)["MatMul"] = EmitMatMul;
    (*r)["Gemm"] = EmitGemm;
    (*r)["Transpose"] = EmitTranspose;
    (*r)["Tile"] = EmitTile;
    (*r)["Slice"] = EmitSlice;
    (*r)["Concat"] = EmitConcat;
    (*r)["Softmax"] = [](EmitContext& ctx) { return EmitSoftmax(ctx, "Softmax"); };
    (*r)["LogSoftmax"] = [](EmitContext& ctx) { return EmitSoftmax(ctx, "LogSoftmax"); };
    (*r)["LayerNormalization"] = EmitLayerNorm;
    (*r)["Conv"] = EmitConv;
    for (const char* op :
         {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
          "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"})
      (*r)[op] = [op = std::string(op)](EmitContext& ctx) { return EmitReduce(ctx, op); };
    for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
      (*r)[op] = [op = std::string(op)](EmitContext& ctx) { return EmitPool(ctx, op); };
    return r;
  }();
  return *m;
}

}  // namespace

std::vector<std::string> EmittedOps() {
  std::vector<std::string> n;
  for (const auto& [op, fn] : Emitters()) n.push_back(op);
  return n;
}

const EmitFn* FindEmitter(const std::string& domain, const std::string& op_type) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  auto it = Emitters().find(op_type);
  return it == Emitters().end() ? nullptr : &it->second;
}

}  // namespace kiln::codegen::cuda
