// C emitters for sequence models: Attention (opset 23: masks, causal, grouped heads, KV cache,
// softcap, the qk_matmul outputs), RotaryEmbedding, RMSNormalization, the losses
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, and the recurrent layers RNN, GRU and
// LSTM. Every shape and attribute is known at compile time, so each node becomes loops
// specialized for it (activations, clip, layouts and directions folded in), written the way the
// host kernels (src/ops/matmul_attention.cc, recurrent.cc, reduce_loss.cc, normalization.cc)
// compute: in float for float and the 16-bit floats, in double for double. Data that only arrives
// at run time (labels, sequence lengths, position ids, nonpad_kv_seqlen) is range-checked and an
// out-of-range value returns KILN_ERROR_INVALID_DATA. Scratch memory is a few rows at most.
#include <algorithm>
#include <cmath>
#include <functional>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/attention_shape.h"
#include "ops/common.h"
#include "ops/normalization_plan.h"
#include "ops/recurrent_plan.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

// `for (size_t v = 0; v < n; ++v) {` (a zero bound is written `!=`, which compilers do not flag
// as always false).
void Open(NodeContext& ctx, const std::string& v, int64_t n) {
  ctx.Line("for (size_t " + v + " = 0; " + v + (n == 0 ? " != " : " < ") + S(n) + "; ++" + v +
           ") {");
  ctx.Indent();
}
void Open(NodeContext& ctx, const std::string& v, const std::string& bound) {
  ctx.Line("for (size_t " + v + " = 0; " + v + " < " + bound + "; ++" + v + ") {");
  ctx.Indent();
}
void Close(NodeContext& ctx) {
  ctx.Dedent();
  ctx.Line("}");
}

// "a * s" with the trivial cases folded ("0", "a").
std::string Mul(const std::string& a, int64_t s) {
  if (s == 0) return "0";
  return s == 1 ? a : a + " * " + S(s);
}
// "a + b" with zeros left out.
std::string Add(const std::string& a, const std::string& b) {
  if (a == "0") return b;
  if (b == "0") return a;
  return a + " + " + b;
}

std::string NegInf(DType ct) {
  return ct == DType::kFloat64 ? "(-(double)INFINITY)" : "(-INFINITY)";
}

// The scratch region for n elements of type ct, as a typed pointer declaration.
void ScratchArray(NodeContext& ctx, DType ct, const std::string& name, int64_t n) {
  ctx.Line(CType(ct) + " *" + name + " = (" + CType(ct) + " *)(" +
           ctx.scratch(static_cast<size_t>(std::max<int64_t>(n, 1)) * DTypeSize(ct)) + ");");
}

// Merges adjacent axes that every stride list walks contiguously (and drops size-1 axes).
void MergeAxes(const Dims& dims, const std::vector<std::vector<int64_t>>& strides, Dims* md,
               std::vector<std::vector<int64_t>>* ms) {
  md->clear();
  ms->assign(strides.size(), {});
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] == 1) continue;
    bool merge = !md->empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = (*ms)[k].back() == strides[k][a] * dims[a];
    if (merge) {
      md->back() *= dims[a];
      for (size_t k = 0; k < strides.size(); ++k) (*ms)[k].back() = strides[k][a];
    } else {
      md->push_back(dims[a]);
      for (size_t k = 0; k < strides.size(); ++k) (*ms)[k].push_back(strides[k][a]);
    }
  }
}

// Opens loops over dims named prefix0, prefix1, ...; returns the names.
std::vector<std::string> OpenNest(NodeContext& ctx, const Dims& dims, const std::string& prefix) {
  std::vector<std::string> idx;
  for (size_t a = 0; a < dims.size(); ++a) {
    idx.push_back(prefix + S(static_cast<int64_t>(a)));
    Open(ctx, idx.back(), dims[a]);
  }
  return idx;
}
void CloseNest(NodeContext& ctx, size_t n) {
  for (size_t a = 0; a < n; ++a) Close(ctx);
}

Status RequireFloat(NodeContext& ctx, int i, const char* what) {
  if (!IsFloatingDType(ctx.input_dtype(i)) || CType(ctx.input_dtype(i)).empty())
    return ctx.error(std::string(what) + " must be floating point, got " +
                     std::string(DTypeName(ctx.input_dtype(i))));
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Attention. Per (batch, q head, query row): the scores against every key (past keys first),
// then scale, mask, softcap, softmax and the weighted sum of the values, one row at a time
// (scratch: one row of scores and one output row).

// The element offset of row (b, head h, position s) of Q / K / V in their 3-D or 4-D layouts.
std::string QkvRow(bool is3d, int64_t H, int64_t Sl, int64_t Dl, const std::string& b,
                   const std::string& h, const std::string& s) {
  return is3d ? "((" + b + " * " + S(Sl) + " + " + s + ") * " + S(H) + " + " + h + ") * " + S(Dl)
              : "((" + b + " * " + S(H) + " + " + h + ") * " + S(Sl) + " + " + s + ") * " + S(Dl);
}

// present_key / present_value (outputs 1 and 2): the past followed by the new keys and values.
void EmitPresentKeysAndValues(NodeContext& ctx, const ops::AttentionShape& sh, DType t) {
  const bool is3d = sh.is3d;
  const int64_t B = sh.B, Hkv = sh.Hkv, Skv = sh.Skv, P = sh.P, T = sh.T, D = sh.D, Dv = sh.Dv;
  auto row = [&](int64_t H, int64_t Sl, int64_t Dl, const std::string& b, const std::string& h,
                 const std::string& s) { return QkvRow(is3d, H, Sl, Dl, b, h, s); };
  for (int o : {1, 2}) {
    if (!ctx.has_output(o)) continue;
    int64_t Dl = o == 1 ? D : Dv;
    std::string src = o == 1 ? "in1" : "in2", past = o == 1 ? "in4" : "in5",
                out = NodeContext::out(o);
    if (B * Hkv * T * Dl == 0) continue;
    Open(ctx, "b", B);
    Open(ctx, "h", Hkv);
    ctx.Line("size_t bh = b * " + S(Hkv) + " + h;");
    if (P > 0)
      ctx.Line("memcpy(" + out + " + bh * " + S(T * Dl) + ", " + past + " + bh * " + S(P * Dl) +
               ", " + ByteCount(t, P * Dl) + ");");
    if (Skv > 0) {
      if (!is3d) {
        ctx.Line("memcpy(" + out + " + bh * " + S(T * Dl) + " + " + S(P * Dl) + ", " + src +
                 " + bh * " + S(Skv * Dl) + ", " + ByteCount(t, Skv * Dl) + ");");
      } else {
        Open(ctx, "j", Skv);
        ctx.Line("memcpy(" + out + " + (bh * " + S(T) + " + " + S(P) + " + j) * " + S(Dl) + ", " +
                 src + " + " + row(Hkv, Skv, Dl, "b", "h", "j") + ", " + ByteCount(t, Dl) + ");");
        Close(ctx);
      }
    }
    Close(ctx);
    Close(ctx);
  }
}

// The input types the emitter supports: Q, K, V and the past of one float type, a bool or float
// mask, int64 lengths.
Status CheckAttentionTypes(NodeContext& ctx) {
  for (int i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return ctx.error("needs Q, K and V");
  DType t = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "Q"));
  if (ctx.input_dtype(1) != t || ctx.input_dtype(2) != t)
    return ctx.error("Q, K and V of different types are not supported");
  if (ctx.has_input(4) != ctx.has_input(5))
    return ctx.error("past_key and past_value come together");
  if (ctx.has_input(4) && (ctx.input_dtype(4) != t || ctx.input_dtype(5) != t))
    return ctx.error("past_key / past_value must have Q's type");
  if (ctx.has_input(3) && ctx.input_dtype(3) != DType::kBool &&
      !IsFloatingDType(ctx.input_dtype(3)))
    return ctx.error("attn_mask must be bool or floating point");
  if (ctx.has_input(6) && ctx.input_dtype(6) != DType::kInt64)
    return ctx.error("nonpad_kv_seqlen must be int64");
  return OkStatus();
}

Status EmitAttention(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckAttentionTypes(ctx));
  const DType t = ctx.input_dtype(0);
  const bool has_past = ctx.has_input(4) && ctx.has_input(5);
  const DType ct = ComputeType(t);
  const std::string CT = CType(ct);
  std::vector<const Dims*> in;
  for (int i = 0; i < 7; ++i) in.push_back(ctx.has_input(i) ? &ctx.input_dims(i) : nullptr);
  ops::AttentionShape sh;
  const std::string bad = ops::MakeAttentionShape(ctx.node(), in, &sh);
  if (!bad.empty()) return ctx.error(bad);
  const bool is3d = sh.is3d;
  const int64_t B = sh.B, Hq = sh.Hq, Hkv = sh.Hkv, Sq = sh.Sq, Skv = sh.Skv, D = sh.D, Dv = sh.Dv;
  const int64_t P = sh.P, T = sh.T, group = Hq / Hkv;
  const int64_t mode = sh.qk_output_mode;
  const bool causal = sh.causal;
  const double scale = sh.scale, softcap = sh.softcap;
  const bool has_mask = ctx.has_input(3), has_nonpad = ctx.has_input(6);
  std::vector<int64_t> mstride;
  int64_t mcols = 0;
  DType mt = DType::kFloat32;
  if (has_mask) {
    mt = ctx.input_dtype(3);
    mcols = sh.mask.back();
    mstride = ops::BroadcastStrides(sh.mask, {B, Hq, Sq, mcols});
  }
  const bool qk_out = ctx.has_output(3);
  const bool out_y = ctx.has_output(0) && NumElements(ctx.output_dims(0)) > 0;
  if (!out_y && !ctx.has_output(1) && !ctx.has_output(2) && !qk_out) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }

  auto row = [&](int64_t H, int64_t Sl, int64_t Dl, const std::string& b, const std::string& h,
                 const std::string& s) { return QkvRow(is3d, H, Sl, Dl, b, h, s); };
  auto load = [&](const std::string& e) { return Load(ctx, t, e); };

  if (has_nonpad) {
    ctx.SetCanFail();
    Open(ctx, "b", B);
    ctx.Line("if (in6[b] < 0 || in6[b] > " + S(T) + ") return KILN_ERROR_INVALID_DATA;");
    Close(ctx);
  }
  EmitPresentKeysAndValues(ctx, sh, t);
  if (!out_y && !qk_out) return OkStatus();

  ScratchArray(ctx, ct, "sc", T + (out_y ? Dv : 0));
  if (out_y) ctx.Line(CT + " *acc = sc + " + S(T) + ";");
  const std::string inf = NegInf(ct);
  Open(ctx, "b", B);
  Open(ctx, "h", Hq);
  ctx.Line("size_t kh = " + (group == 1 ? std::string("h") : "h / " + S(group)) + ";");
  std::string offset = S(P);
  if (causal && !has_past && has_nonpad) {
    ctx.Line("int64_t off = in6[b] - " + S(Sq) + ";");
    offset = "off";
  }
  Open(ctx, "i", Sq);
  ctx.Line("const " + CType(t) + " *qr = in0 + " + row(Hq, Sq, D, "b", "h", "i") + ";");
  const std::string qk_row =
      "out3[((b * " + S(Hq) + " + h) * " + S(Sq) + " + i) * " + S(T) + " + j]";
  ctx.Line(CT + " mx = " + inf + ", sum = " + CNumber(ct, 0) + ";");
  Open(ctx, "j", T);
  std::string kr_new =
      "in1 + " + row(Hkv, Skv, D, "b", "kh", has_past ? "(j - " + S(P) + ")" : "j");
  if (has_past)
    ctx.Line("const " + CType(t) + " *kr = j < " + S(P) + " ? in4 + ((b * " + S(Hkv) + " + kh) * " +
             S(P) + " + j) * " + S(D) + " : " + kr_new + ";");
  else
    ctx.Line("const " + CType(t) + " *kr = " + kr_new + ";");
  ctx.Line(CT + " s = " + CNumber(ct, 0) + ";");
  Open(ctx, "d", D);
  ctx.Line("s += " + load("qr[d]") + " * " + load("kr[d]") + ";");
  Close(ctx);
  ctx.Line("s *= " + CNumber(ct, scale) + ";");
  auto emit_qk = [&](int64_t m) {
    if (qk_out && mode == m) ctx.Line(qk_row + " = " + Store(ctx, t, "s") + ";");
  };
  emit_qk(0);
  if (has_mask) {
    std::string mi = Add(Add(Mul("b", mstride[0]), Mul("h", mstride[1])),
                         Add(Mul("i", mstride[2]), Mul("j", mstride[3])));
    std::string apply = mt == DType::kBool ? "if (!in3[" + mi + "]) s += " + inf + ";"
                                           : "s += " + std::string(mt == ct ? "" : "(" + CT + ")") +
                                                 Load(ctx, mt, "in3[" + mi + "]") + ";";
    if (mcols < T) {
      ctx.Line("if (j >= " + S(mcols) + ") {");
      ctx.Line("  s += " + inf + ";");
      ctx.Line("} else {");
      ctx.Line("  " + apply);
      ctx.Line("}");
    } else {
      ctx.Line(apply);
    }
  }
  if (causal) ctx.Line("if ((int64_t)j > (int64_t)i + " + offset + ") s += " + inf + ";");
  if (has_nonpad) ctx.Line("if ((int64_t)j >= in6[b]) s += " + inf + ";");
  emit_qk(1);
  if (softcap > 0) {
    ctx.Line("s = " + CNumber(ct, softcap) + " * " + MathName(ct, "tanh") + "(s / " +
             CNumber(ct, softcap) + ");");
  }
  emit_qk(2);
  ctx.Line("sc[j] = s;");
  ctx.Line("if (s > mx) mx = s;");
  Close(ctx);
  // Softmax (a fully masked row gives NaN, as the reference does).
  Open(ctx, "j", T);
  ctx.Line("sc[j] = " + MathName(ct, "exp") + "(sc[j] - mx);");
  ctx.Line("sum += sc[j];");
  Close(ctx);
  Open(ctx, "j", T);
  ctx.Line("sc[j] /= sum;");
  if (qk_out && mode == 3) ctx.Line(qk_row + " = " + Store(ctx, t, "sc[j]") + ";");
  Close(ctx);
  if (out_y) {
    Open(ctx, "d", Dv);
    ctx.Line("acc[d] = " + CNumber(ct, 0) + ";");
    Close(ctx);
    Open(ctx, "j", T);
    std::string vr_new =
        "in2 + " + row(Hkv, Skv, Dv, "b", "kh", has_past ? "(j - " + S(P) + ")" : "j");
    if (has_past)
      ctx.Line("const " + CType(t) + " *vr = j < " + S(P) + " ? in5 + ((b * " + S(Hkv) +
               " + kh) * " + S(P) + " + j) * " + S(Dv) + " : " + vr_new + ";");
    else
      ctx.Line("const " + CType(t) + " *vr = " + vr_new + ";");
    ctx.Line(CT + " p = sc[j];");
    Open(ctx, "d", Dv);
    ctx.Line("acc[d] += p * " + load("vr[d]") + ";");
    Close(ctx);
    Close(ctx);
    Open(ctx, "d", Dv);
    ctx.Line("out0[" + row(Hq, Sq, Dv, "b", "h", "i") + " + d] = " + Store(ctx, t, "acc[d]") + ";");
    Close(ctx);
  }
  Close(ctx);
  Close(ctx);
  Close(ctx);
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding: a copy of X, then the first rotary_embedding_dim features of every head
// rotated by the position's angle.

Status EmitRotaryEmbedding(NodeContext& ctx) {
  const ir::Node& n = ctx.node();
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("needs X, cos_cache and sin_cache");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i, "X and the caches"));
  }
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  const std::string CT = CType(ct);
  const Dims& x = ctx.input_dims(0);
  int64_t B, H, Sl, D;
  bool is3d = x.size() == 3;
  if (x.size() == 4) {
    B = x[0], H = x[1], Sl = x[2], D = x[3];
  } else if (is3d) {
    H = n.attr_int("num_heads", 0);
    if (H <= 0 || x[2] % H)
      return ctx.error("3-D RotaryEmbedding needs num_heads dividing the hidden size");
    B = x[0], Sl = x[1], D = x[2] / H;
  } else {
    return ctx.error("the input must be 3-D or 4-D");
  }
  int64_t rot = n.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot < 0 || rot > D || rot % 2)
    return ctx.error("rotary_embedding_dim must be even and at most the head size");
  const int64_t half = rot / 2;
  const bool interleaved = n.attr_int("interleaved", 0) != 0;
  const bool has_pos = ctx.has_input(3);
  const Dims& cd = ctx.input_dims(1);
  if (has_pos) {
    if (!IsSignedIntDType(ctx.input_dtype(3))) return ctx.error("position_ids must be integers");
    if (cd.size() != 2 || cd[1] != half)
      return ctx.error("cos_cache must be [max_position, rot/2]");
  } else if (cd != Dims{B, Sl, half}) {
    return ctx.error("without position_ids, cos_cache must be [batch, seq, rot/2]");
  }
  if (ctx.input_dims(2) != cd) return ctx.error("cos_cache and sin_cache shapes differ");
  const int64_t total = NumElements(x);
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  ctx.Line("memcpy(out0, in0, " + ByteCount(t, total) + ");");
  if (half == 0 || H == 0) return OkStatus();
  if (has_pos) {
    ctx.SetCanFail();
    Open(ctx, "p", B * Sl);
    ctx.Line("if (in3[p] < 0 || in3[p] >= " + S(cd[0]) + ") return KILN_ERROR_INVALID_DATA;");
    Close(ctx);
  }
  Open(ctx, "b", B);
  Open(ctx, "s", Sl);
  ctx.Line("size_t r = " +
           (has_pos ? "(size_t)in3[b * " + S(Sl) + " + s]" : "b * " + S(Sl) + " + s") + ";");
  Open(ctx, "h", H);
  ctx.Line("size_t base = " +
           (is3d ? "((b * " + S(Sl) + " + s) * " + S(H) + " + h) * " + S(D)
                 : "((b * " + S(H) + " + h) * " + S(Sl) + " + s) * " + S(D)) +
           ";");
  Open(ctx, "i", half);
  std::string i1 = interleaved ? "2 * i" : "i", i2 = interleaved ? "2 * i + 1" : "i + " + S(half);
  auto cvt = [&](int in, const std::string& e) {
    DType it = ctx.input_dtype(in);
    std::string l = Load(ctx, it, e);
    return ComputeType(it) == ct ? l : "(" + CT + ")" + l;
  };
  ctx.Line(CT + " c = " + cvt(1, "in1[r * " + S(half) + " + i]") +
           ", sn = " + cvt(2, "in2[r * " + S(half) + " + i]") + ";");
  ctx.Line(CT + " x1 = " + Load(ctx, t, "in0[base + " + i1 + "]") +
           ", x2 = " + Load(ctx, t, "in0[base + " + i2 + "]") + ";");
  ctx.Line("out0[base + " + i1 + "] = " + Store(ctx, t, "c * x1 - sn * x2") + ";");
  ctx.Line("out0[base + " + i2 + "] = " + Store(ctx, t, "sn * x1 + c * x2") + ";");
  Close(ctx);
  Close(ctx);
  Close(ctx);
  Close(ctx);
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// RMSNormalization: y = x / sqrt(mean(x^2 over the trailing dims from axis) + epsilon) * scale,
// scale broadcast to those dims (or to the whole input).

Status EmitRmsNormalization(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs X and Scale");
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 1, "Scale"));
  for (int o = 1; o < ctx.num_outputs(); ++o)
    if (ctx.has_output(o)) return ctx.error("has only one output");
  DType t = ctx.input_dtype(0), ct = ComputeType(t), st = ctx.input_dtype(1);
  const std::string CT = CType(ct);
  const Dims& x = ctx.input_dims(0);
  const Dims& sd = ctx.input_dims(1);
  ops::LayerNormPlan plan;
  const std::string err = ops::PlanLayerNorm(ctx.node(), x, sd, nullptr, &plan);
  if (!err.empty()) return ctx.error(err);
  const int64_t axis = plan.axis, cols = plan.cols;
  const double eps = plan.epsilon;
  Dims rdims(x.begin(), x.begin() + axis), cdims(x.begin() + axis, x.end());
  if (plan.rows * cols == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<int64_t> sstr = ops::BroadcastStrides(sd, x), xstr = Strides(x);
  std::vector<int64_t> rs_s(sstr.begin(), sstr.begin() + axis),
      cs_s(sstr.begin() + axis, sstr.end());
  std::vector<int64_t> rs_x(xstr.begin(), xstr.begin() + axis),
      cs_x(xstr.begin() + axis, xstr.end());
  Dims mr, mc;
  std::vector<std::vector<int64_t>> msr, msc;
  MergeAxes(rdims, {rs_x, rs_s}, &mr, &msr);
  MergeAxes(cdims, {cs_x, cs_s}, &mc, &msc);
  auto ridx = OpenNest(ctx, mr, "r");
  std::string xbase = IndexExpr(ridx, msr[0]), sbase = IndexExpr(ridx, msr[1]);
  ctx.Line("const " + CType(t) + " *xr = in0 + " + xbase + ";");
  ctx.Line(CType(t) + " *yr = out0 + " + xbase + ";");
  ctx.Line(CT + " ss = " + CNumber(ct, 0) + ", inv;");
  Open(ctx, "c", cols);
  ctx.Line(CT + " v = " + Load(ctx, t, "xr[c]") + ";");
  ctx.Line("ss += v * v;");
  Close(ctx);
  ctx.Line("inv = " + CNumber(ct, 1) + " / " + MathName(ct, "sqrt") + "(ss / " +
           CNumber(ct, static_cast<double>(cols)) + " + " + CNumber(ct, eps) + ");");
  auto cidx = OpenNest(ctx, mc, "c");
  std::string xo = IndexExpr(cidx, msc[0]), so = Add(sbase, IndexExpr(cidx, msc[1]));
  std::string sv = Load(ctx, st, "in1[" + so + "]");
  if (ComputeType(st) != ct) sv = "(" + CT + ")" + sv;
  ctx.Line("yr[" + xo + "] = " + Store(ctx, t, Load(ctx, t, "xr[" + xo + "]") + " * inv * " + sv) +
           ";");
  CloseNest(ctx, mc.size());
  CloseNest(ctx, mr.size());
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over [N, C, D...] with labels [N, D...].
// The log-softmax of a position is only materialized when log_prob is an output; otherwise the
// loss reads the labelled class alone.

Status EmitLoss(NodeContext& ctx, bool sce) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs scores and labels");
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "the input"));
  DType t = ctx.input_dtype(0), ct = ComputeType(t), lt = ctx.input_dtype(1);
  if (lt != DType::kInt32 && lt != DType::kInt64) return ctx.error("labels must be int32 or int64");
  const bool weighted = ctx.has_input(2);
  if (weighted && ctx.input_dtype(2) != t) return ctx.error("weight must have the input's type");
  const std::string CT = CType(ct);
  std::string red = ctx.node().attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return ctx.error("reduction must be none, sum or mean");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("input must have rank >= 2");
  const int64_t N = x[0], C = x[1], D = NumElements(Dims(x.begin() + 2, x.end()));
  if (NumElements(ctx.input_dims(1)) != N * D) return ctx.error("labels do not match the input");
  const bool has_ignore = ctx.node().attr("ignore_index") != nullptr;
  const int64_t ignore = ctx.node().attr_int("ignore_index", 0);
  const bool log_prob = sce && ctx.has_output(1);
  const std::string zero = CNumber(ct, 0), inf = NegInf(ct);
  if (red != "none")
    ctx.Line(CT + " total = " + zero + (red == "mean" ? ", wsum = " + zero : "") + ";");
  if (N * D > 0) {
    ctx.SetCanFail();
    Open(ctx, "n", N);
    std::string d = "0";
    if (D != 1) {
      Open(ctx, "d", D);
      d = "d";
    }
    ctx.Line("size_t pos = " + Add(Mul("n", D), d) + ", base = " + Add(Mul("n", C * D), d) + ";");
    if (sce) {
      ctx.Line(CT + " mx = " + inf + ", sum = " + zero + ", lse;");
      Open(ctx, "c", C);
      ctx.Line(CT + " v = " + Load(ctx, t, "in0[base + " + Mul("c", D) + "]") + ";");
      ctx.Line("if (v > mx) mx = v;");
      Close(ctx);
      Open(ctx, "c", C);
      ctx.Line("sum += " + MathName(ct, "exp") + "(" +
               Load(ctx, t, "in0[base + " + Mul("c", D) + "]") + " - mx);");
      Close(ctx);
      ctx.Line("lse = mx + " + MathName(ct, "log") + "(sum);");
      if (log_prob) {
        Open(ctx, "c", C);
        ctx.Line("out1[base + " + Mul("c", D) + "] = " +
                 Store(ctx, t, Load(ctx, t, "in0[base + " + Mul("c", D) + "]") + " - lse") + ";");
        Close(ctx);
      }
    }
    ctx.Line("{");
    ctx.Indent();
    ctx.Line("int64_t k = (int64_t)in1[pos];");
    ctx.Line(CT + " loss = " + zero + (red == "mean" ? ", w = " + zero : "") + ";");
    if (has_ignore) {
      ctx.Line("if (k != " + CNumber(DType::kInt64, static_cast<double>(ignore)) + ") {");
      ctx.Indent();
    }
    ctx.Line("if (k < 0 || k >= " + S(C) + ") return KILN_ERROR_INVALID_DATA;");
    std::string lp = sce ? "(" + Load(ctx, t, "in0[base + " + Mul("(size_t)k", D) + "]") + " - lse)"
                         : Load(ctx, t, "in0[base + " + Mul("(size_t)k", D) + "]");
    std::string w = weighted ? Load(ctx, t, "in2[k]") : CNumber(ct, 1);
    if (red == "mean") {
      ctx.Line("w = " + w + ";");
      ctx.Line("loss = -" + lp + " * w;");
    } else {
      ctx.Line("loss = -" + lp + (weighted ? " * " + w : "") + ";");
    }
    if (has_ignore) {
      ctx.Dedent();
      ctx.Line("}");
    }
    if (red == "none") {
      ctx.Line("out0[pos] = " + Store(ctx, t, "loss") + ";");
    } else {
      ctx.Line("total += loss;");
      if (red == "mean") ctx.Line("wsum += w;");
    }
    ctx.Dedent();
    ctx.Line("}");
    if (D != 1) Close(ctx);
    Close(ctx);
  }
  if (red == "sum") ctx.Line("out0[0] = " + Store(ctx, t, "total") + ";");
  if (red == "mean") ctx.Line("out0[0] = " + Store(ctx, t, "total / wsum") + ";");
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// RNN, GRU, LSTM. Per direction and batch entry, the state is carried through the steps in
// scratch rows; every gate row is computed with its input and recurrent dot products at once.

using Cell = ops::RnnCell;
using Act = ops::RnnActivation;

// dst = activation(src), src a variable; the sigmoid binds exp(-|src|) once, which is the host's
// exp(-x) or exp(x) on the two sides of 0.
void SetAct(NodeContext& ctx, const Act& a, DType ct, const std::string& dst,
            const std::string& src) {
  if (a.kind == ops::RnnAct::kSigmoid) {
    std::string one = CNumber(ct, 1);
    ctx.Line("{");
    ctx.Line("  " + CType(ct) + " e = " + MathName(ct, "exp") + "(-" + MathName(ct, "fabs") + "(" +
             src + "));");
    ctx.Line("  " + dst + " = " + src + " >= " + CNumber(ct, 0) + " ? " + one + " / (" + one +
             " + e) : e / (" + one + " + e);");
    ctx.Line("}");
    return;
  }
  ctx.Line(dst + " = " + FormulaC(a(ops::SymExpr::Var(src)), ct) + ";");
}

// What the step of one direction is emitted from: the sizes and options of the cell and the
// helpers EmitRecurrent builds (a gate's sums, a clipped pre-activation, a load).
struct RecurrentStep {
  NodeContext& ctx;
  DType ct;
  std::string CT;
  int64_t H, GH;
  bool has_b, has_p, lbr, input_forget;
  std::function<std::string(const std::string&)> load;
  std::function<void(int, const std::vector<int>&, bool, const std::string&,
                     const std::vector<int>&)>
      gate_sums;
  std::function<void(const std::string&, const std::string&)> set_clipped;
};

// One step of a GRU direction d: z and r first (the h gate needs r for every unit), then the h
// gate and the new hidden state.
void EmitGruStep(const RecurrentStep& s, int d, const Act* act) {
  NodeContext& ctx = s.ctx;
  const DType ct = s.ct;
  const std::string& CT = s.CT;
  const int64_t H = s.H, GH = s.GH;
  const auto& L = s.load;
  const auto& gate_sums = s.gate_sums;
  const auto& set_clipped = s.set_clipped;
  const bool has_b = s.has_b, lbr = s.lbr;
  Open(ctx, "k", H);
  gate_sums(d, {0, 1}, true, "hp", {0, 1});
  set_clipped("a0", "a0");
  set_clipped("a1", "a1");
  SetAct(ctx, act[0], ct, "zr[k]", "a0");
  SetAct(ctx, act[0], ct, "zr[" + S(H) + " + k]", "a1");
  if (!lbr) ctx.Line("rh[k] = zr[" + S(H) + " + k] * hp[k];");
  Close(ctx);
  Open(ctx, "k", H);
  if (lbr) {
    // x . Wh + Wbh + r * (h . Rh + Rbh)
    gate_sums(d, {2}, true, "hp", {});
    ctx.Line(CT + " hr = " +
             (has_b ? L("in3[" + S(d * 2 * GH + GH + 2 * H) + " + k]") : CNumber(ct, 0)) + ";");
    Open(ctx, "m", H);
    ctx.Line("hr += hp[m] * " + L("in2[(" + S(d * GH + 2 * H) + " + k) * " + S(H) + " + m]") + ";");
    Close(ctx);
    ctx.Line("a2 += zr[" + S(H) + " + k] * hr;");
  } else {
    gate_sums(d, {2}, true, "rh", {2});
  }
  set_clipped("a2", "a2");
  SetAct(ctx, act[1], ct, "a2", "a2");
  ctx.Line("hn[k] = (" + CNumber(ct, 1) + " - zr[k]) * a2 + zr[k] * hp[k];");
  Close(ctx);
}

// One step of an LSTM direction d: gates i, o, f, c; peepholes P = [Pi, Po, Pf].
void EmitLstmStep(const RecurrentStep& s, int d, const Act* act) {
  NodeContext& ctx = s.ctx;
  const DType ct = s.ct;
  const std::string& CT = s.CT;
  const int64_t H = s.H;
  const auto& L = s.load;
  const auto& gate_sums = s.gate_sums;
  const auto& set_clipped = s.set_clipped;
  const bool has_p = s.has_p, input_forget = s.input_forget;
  Open(ctx, "k", H);
  std::vector<int> gates = input_forget ? std::vector<int>{0, 1, 3} : std::vector<int>{0, 1, 2, 3};
  gate_sums(d, gates, true, "hp", gates);
  auto peep = [&](int which, const std::string& c) {
    return has_p ? " + " + L("in7[" + Add(S(d * 3 * H + which * H), "k") + "]") + " * " + c
                 : std::string();
  };
  ctx.Line(CT + " ig, fg, cg, og, c, hc;");
  set_clipped("a0", "a0" + peep(0, "cp[k]"));
  SetAct(ctx, act[0], ct, "ig", "a0");
  if (input_forget) {
    ctx.Line("fg = " + CNumber(ct, 1) + " - ig;");
  } else {
    set_clipped("a2", "a2" + peep(2, "cp[k]"));
    SetAct(ctx, act[0], ct, "fg", "a2");
  }
  set_clipped("a3", "a3");
  SetAct(ctx, act[1], ct, "cg", "a3");
  ctx.Line("c = fg * cp[k] + ig * cg;");
  set_clipped("a1", "a1" + peep(1, "c"));
  ctx.Line("cp[k] = c;");
  SetAct(ctx, act[0], ct, "og", "a1");
  SetAct(ctx, act[2], ct, "hc", "c");
  ctx.Line("hn[k] = og * hc;");
  Close(ctx);
}

// Sequence lengths (input 4), checked at compile time when constant (all_full: every one is the
// whole sequence), else by the generated code at run time.
Status CheckSequenceLengths(NodeContext& ctx, int64_t S_, int64_t B, bool has_lens,
                            bool* all_full) {
  if (const Tensor* lc = ctx.input_constant(4)) {
    *all_full = true;
    for (int64_t i = 0; i < lc->size(); ++i) {
      int64_t l = static_cast<int64_t>(ElementAsDouble(*lc, i));
      if (l < 0 || l > S_)
        return ctx.error("sequence length " + S(l) + " is outside [0, " + S(S_) + "]");
      *all_full = *all_full && l == S_;
    }
  } else if (has_lens) {
    ctx.SetCanFail();
    Open(ctx, "b", B);
    ctx.Line("if (in4[b] < 0 || in4[b] > " + S(S_) + ") return KILN_ERROR_INVALID_DATA;");
    Close(ctx);
  }
  return OkStatus();
}

Status EmitRecurrent(NodeContext& ctx, Cell cell) {
  std::vector<const Dims*> dims(8, nullptr);
  for (int i = 0; i < ctx.num_inputs() && i < 8; ++i)
    if (ctx.has_input(i)) dims[i] = &ctx.input_dims(i);
  ops::RecurrentPlan plan;
  Status planned = ops::PlanRecurrent(ctx.node(), ctx.opset(), cell, dims, &plan);
  if (!planned.ok()) return ctx.error(planned.message());
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  const DType t = ctx.input_dtype(0), ct = ComputeType(t);
  for (int i : {1, 2, 3, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input_dtype(i) != t)
      return ctx.error("inputs of different types are not supported");
  const std::string CT = CType(ct);
  const int nd = plan.num_dir;
  const bool reverse_only = plan.reverse_only;
  const int64_t layout = plan.layout;
  const int64_t S_ = plan.seq, B = plan.batch, I = plan.input, H = plan.hidden;
  const int64_t GH = plan.gates() * H;
  const std::vector<Act>& acts = plan.acts;
  const float clip = plan.clip;
  const bool input_forget = plan.input_forget, lbr = plan.linear_before_reset;
  const bool lstm = cell == Cell::kLstm, gru = cell == Cell::kGru;
  const bool has_b = ctx.has_input(3), has_lens = ctx.has_input(4), has_h0 = ctx.has_input(5);
  const bool has_c0 = lstm && ctx.has_input(6), has_p = lstm && ctx.has_input(7);
  if (has_lens && ctx.input_dtype(4) != DType::kInt32)
    return ctx.error("sequence_lens must be int32");
  const bool out_y = ctx.has_output(0), out_h = ctx.has_output(1),
             out_c = lstm && ctx.has_output(2);
  if (!out_y && !out_h && !out_c) return OkStatus();
  if (I == 0) return ctx.error("an input size of 0 is not supported");
  if (B == 0 || H == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }

  bool all_full = !has_lens;
  KILN_RETURN_IF_ERROR(CheckSequenceLengths(ctx, S_, B, has_lens, &all_full));
  if (out_y && !all_full && S_ > 0)
    ctx.Line("memset(out0, 0, " + ByteCount(t, S_ * nd * B * H) + ");");

  // Scratch: the previous and the new hidden state, the cell state, GRU's z and r gates and r * h.
  const int64_t rows = 2 + (lstm ? 1 : 0) + (gru ? 2 + (lbr ? 0 : 1) : 0);
  ScratchArray(ctx, ct, "hp", rows * H);
  ctx.Line(CT + " *hn = hp + " + S(H) + ";");
  int64_t next = 2;
  if (lstm) ctx.Line(CT + " *cp = hp + " + S(H * next++) + ";");
  if (gru) {
    ctx.Line(CT + " *zr = hp + " + S(H * next) + ";");
    next += 2;
    if (!lbr) ctx.Line(CT + " *rh = hp + " + S(H * next++) + ";");
  }
  auto L = [&](const std::string& e) { return Load(ctx, t, e); };
  auto clipped = [&](const std::string& e) {
    if (clip <= 0) return e;
    std::string c = CNumber(ct, clip);
    return MathName(ct, "fmax") + "(-" + c + ", " + MathName(ct, "fmin") + "(" + c + ", " + e +
           "))";
  };
  // var = clip(e), left out when it would be `var = var`.
  auto set_clipped = [&](const std::string& var, const std::string& e) {
    if (clip > 0 || e != var) ctx.Line(var + " = " + clipped(e) + ";");
  };
  auto state_off = [&](int d) {
    std::string r = layout == 0 ? Add(S(d * B), "b") : Add(Mul("b", nd), S(d));
    return (r == "b" ? r : "(" + r + ")") + " * " + S(H);
  };
  const std::string x_row =
      layout == 0 ? "(ti * " + S(B) + " + b) * " + S(I) : "(b * " + S(S_) + " + ti) * " + S(I);
  // Pre-activations of the gate rows `gates` (offsets in units of H) of unit k into a<g>:
  // bias + x . W[row] (+ hv . R[row] when `with_h`, hv being the vector named h).
  auto gate_sums = [&](int d, const std::vector<int>& gates, bool with_x, const std::string& h,
                       const std::vector<int>& with_h) {
    std::string decl;
    for (int g : gates) {
      std::string bias = CNumber(ct, 0);
      if (has_b) {
        std::string wb = L("in3[" + Add(S(d * 2 * GH + g * H), "k") + "]");
        bool rb_used = std::find(with_h.begin(), with_h.end(), g) != with_h.end();
        bias = rb_used ? wb + " + " + L("in3[" + S(d * 2 * GH + GH + g * H) + " + k]") : wb;
      }
      decl += (decl.empty() ? "" : ", ") + std::string("a") + S(g) + " = " + bias;
    }
    ctx.Line(CT + " " + decl + ";");
    if (with_x && I > 0) {
      Open(ctx, "m", I);
      ctx.Line(CT + " xv = " + L("xr[m]") + ";");
      for (int g : gates)
        ctx.Line("a" + S(g) + " += xv * " +
                 L("in1[(" + Add(S(d * GH + g * H), "k") + ") * " + S(I) + " + m]") + ";");
      Close(ctx);
    }
    if (!with_h.empty()) {
      Open(ctx, "m", H);
      ctx.Line(CT + " hv = " + h + "[m];");
      for (int g : with_h)
        ctx.Line("a" + S(g) + " += hv * " +
                 L("in2[(" + Add(S(d * GH + g * H), "k") + ") * " + S(H) + " + m]") + ";");
      Close(ctx);
    }
  };

  const RecurrentStep step{ctx,   ct,  CT,           H, GH,        has_b,
                           has_p, lbr, input_forget, L, gate_sums, set_clipped};
  for (int d = 0; d < nd; ++d) {
    const bool reverse = reverse_only || d == 1;
    const Act* act = &acts[d * ops::RnnActivations(cell)];
    ctx.Line(std::string("/* direction ") + S(d) + (reverse ? ": reverse */" : ": forward */"));
    Open(ctx, "b", B);
    ctx.Line(
        std::string(has_lens ? "size_t len = (size_t)in4[b];" : "size_t len = " + S(S_) + ";"));
    Open(ctx, "k", H);
    ctx.Line("hp[k] = " + (has_h0 ? L("in5[" + state_off(d) + " + k]") : CNumber(ct, 0)) + ";");
    if (lstm)
      ctx.Line("cp[k] = " + (has_c0 ? L("in6[" + state_off(d) + " + k]") : CNumber(ct, 0)) + ";");
    Close(ctx);
    Open(ctx, "step", "len");
    ctx.Line(std::string("size_t ti = ") + (reverse ? "len - 1 - step;" : "step;"));
    ctx.Line("const " + CType(t) + " *xr = in0 + " + x_row + ";");
    if (cell == Cell::kRnn) {
      Open(ctx, "k", H);
      gate_sums(d, {0}, true, "hp", {0});
      set_clipped("a0", "a0");
      SetAct(ctx, act[0], ct, "hn[k]", "a0");
      Close(ctx);
    } else if (gru) {
      EmitGruStep(step, d, act);
    } else {
      EmitLstmStep(step, d, act);
    }
    ctx.Line("memcpy(hp, hn, " + ByteCount(ct, H) + ");");
    if (out_y) {
      std::string y = layout == 0
                          ? "((ti * " + S(nd) + " + " + S(d) + ") * " + S(B) + " + b) * " + S(H)
                          : "((b * " + S(S_) + " + ti) * " + S(nd) + " + " + S(d) + ") * " + S(H);
      Open(ctx, "k", H);
      ctx.Line("out0[" + y + " + k] = " + Store(ctx, t, "hp[k]") + ";");
      Close(ctx);
    }
    Close(ctx);  // steps
    if (out_h || out_c) {
      Open(ctx, "k", H);
      if (out_h) ctx.Line("out1[" + state_off(d) + " + k] = " + Store(ctx, t, "hp[k]") + ";");
      if (out_c) ctx.Line("out2[" + state_off(d) + " + k] = " + Store(ctx, t, "cp[k]") + ";");
      Close(ctx);
    }
    Close(ctx);  // batch
  }
  return OkStatus();
}

}  // namespace

void RegisterSequenceModelEmitters(EmitterRegistry& r) {
  r.Register("Attention", EmitAttention);
  r.Register("RotaryEmbedding", EmitRotaryEmbedding);
  r.Register("RMSNormalization", EmitRmsNormalization);
  r.Register("SoftmaxCrossEntropyLoss", [](NodeContext& ctx) { return EmitLoss(ctx, true); });
  r.Register("NegativeLogLikelihoodLoss", [](NodeContext& ctx) { return EmitLoss(ctx, false); });
  r.Register("RNN", [](NodeContext& ctx) { return EmitRecurrent(ctx, Cell::kRnn); });
  r.Register("GRU", [](NodeContext& ctx) { return EmitRecurrent(ctx, Cell::kGru); });
  r.Register("LSTM", [](NodeContext& ctx) { return EmitRecurrent(ctx, Cell::kLstm); });
}

}  // namespace kiln::codegen::c
