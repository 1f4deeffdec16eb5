// C emitters for the matmul family: MatMul (numpy matmul: batched, batch dims broadcast, 1-D
// operands promoted and the added dim dropped), Gemm (transA, transB, alpha, beta, C broadcast
// to [M, N]), Einsum (as loops over the output and summed labels), MatMulInteger and
// QLinearMatMul. float and double MatMul / Gemm go through the portable GEMM
// (kernels/reference/gemm.c, i-k-j order, accumulating in the element type); the other element
// types the host supports get specialized dot-product loops: 16-bit floats accumulate in float,
// integers wrap around as unsigned arithmetic, like the host executor's kernels.
#include <algorithm>
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_qconv.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "ops/common.h"
#include "ops/einsum_plan.h"
#include "passes/store_weights.h"

namespace kiln::codegen::c {
namespace {

bool IsInt(DType t) { return IsSignedIntDType(t) || IsUnsignedIntDType(t); }
bool HasGemmKernel(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

// The unsigned type integer products accumulate in (wrapping, as the host's GemmAny does).
std::string WrapType(DType t) { return DTypeSize(t) > 4 ? "uint64_t" : "uint32_t"; }

// One GEMM of the strided operands `a` and `b` (C expressions of element pointers) into the
// dense [M, N] block at `c`: C += alpha * op(A) * op(B). For element types without a kernel,
// `init(i, j)` (when given) is the C expression of the starting value of element (i, j) in the
// compute type; without it the block starts at zero.
struct GemmCall {
  int64_t M, N, K;
  std::string a, b, c;
  int64_t sam, sak, sbk, sbn;
  double alpha = 1.0;
  std::function<std::string(const std::string& i, const std::string& j)> init;
  // The node input that `b` is the whole of, or -1: a float constant there may be stored narrow
  // (CompileOptions::weight_storage).
  int b_input = -1;
};

// Weights of a float constant as narrow-float codes and the table of their values times one
// scale (the largest magnitude maps to the format's largest finite value).
struct StoredWeights {
  Tensor codes;  // UINT8: one code per byte, or two (FP4)
  Tensor lut;    // FLOAT [256] or [16]
  int bits;
};

StoredWeights StoreWeights(const Tensor& w, bool fp4) {
  const DType kind = fp4 ? DType::kFloat4E2M1 : DType::kFloat8E4M3FN;
  Tensor held, scale;
  passes::EncodeNarrow(w, -1, kind, &held, &scale);
  StoredWeights s;
  s.bits = fp4 ? 4 : 8;
  s.codes = Tensor::Copy(DType::kUInt8, {w.size()}, held.raw());  // the codes as bytes
  if (fp4) {
    s.codes = Tensor(DType::kUInt8, {PackedBytes(kind, w.size())});
    PackSubByte(kind, held.data<uint8_t>(), w.size(), s.codes.data<uint8_t>());
  }
  s.lut = Tensor(DType::kFloat32, {int64_t{1} << s.bits});
  for (int64_t c = 0; c < s.lut.size(); ++c)
    s.lut.data<float>()[c] =
        SmallFloatToFloat(kind, static_cast<uint8_t>(c)) * scale.data<float>()[0];
  return s;
}

void EmitGemmCall(NodeContext& ctx, DType t, const GemmCall& g) {
  auto s = [](int64_t v) { return std::to_string(v); };
  const Tensor* w = g.b_input >= 0 ? ctx.input_constant(g.b_input) : nullptr;
  const bool fp4 = ctx.weight_storage == "fp4";
  // Narrow where the codes and the table take fewer bytes than the floats.
  const bool smaller = w && (fp4 ? w->size() / 2 + 64 : w->size() + 1024) < 4 * w->size();
  if (t == DType::kFloat32 && smaller && ctx.weight_storage != "fp32") {
    const StoredWeights stored = StoreWeights(*w, fp4);
    const std::string name = ctx.input_name(g.b_input);
    const std::string codes = ctx.parameter(name + "_" + ctx.weight_storage, stored.codes);
    const std::string lut = ctx.parameter(name + "_" + ctx.weight_storage + "_values", stored.lut);
    ctx.UseKernel("gemm_lut");
    ctx.Line("kiln_gemm_lut_run(" + s(g.M) + ", " + s(g.N) + ", " + s(g.K) + ", " +
             CNumber(t, g.alpha) + ", " + g.a + ", " + s(g.sam) + ", " + s(g.sak) + ", " + codes +
             ", " + s(g.sbk) + ", " + s(g.sbn) + ", " + s(stored.bits) + ", " + lut + ", " + g.c +
             ");");
    return;
  }
  if (HasGemmKernel(t)) {
    std::string sfx = CSuffix(t);
    ctx.UseKernel("gemm_" + sfx);
    ctx.Line("kiln_gemm_" + sfx + "_run(" + s(g.M) + ", " + s(g.N) + ", " + s(g.K) + ", " +
             CNumber(t, g.alpha) + ", " + g.a + ", " + s(g.sam) + ", " + s(g.sak) + ", " + g.b +
             ", " + s(g.sbk) + ", " + s(g.sbn) + ", " + g.c + ");");
    return;
  }
  // Specialized dot products: Y[i, j] = init + alpha * sum_k A[i, k] * B[k, j].
  DType ct = ComputeType(t);
  auto idx = [](const std::string& v, int64_t stride) {
    return stride == 0 ? std::string("0") : stride == 1 ? v : v + " * " + std::to_string(stride);
  };
  Loop(ctx, g.M, "i", [&] {
    Loop(ctx, g.N, "j", [&] {
      std::string at = g.a + "[" + idx("i", g.sam) + " + " + idx("k", g.sak) + "]";
      std::string bt = g.b + "[" + idx("k", g.sbk) + " + " + idx("j", g.sbn) + "]";
      std::string y = g.c + "[i * " + s(g.N) + " + j]";
      if (IsInt(t)) {
        std::string u = WrapType(t);
        ctx.Line(u + " acc = 0;");
        if (g.K > 0)
          ctx.Line("for (size_t k = 0; k < " + s(g.K) + "; ++k) acc += (" + u + ")" + at + " * (" +
                   u + ")" + bt + ";");
        if (g.alpha != 1.0)  // as the host: alpha applied in double to the accumulated value
          ctx.Line("acc = (" + u + ")(int64_t)(" + CNumber(DType::kFloat64, g.alpha) +
                   " * (double)(" + CType(t) + ")acc);");
        std::string base = g.init ? "(" + u + ")(" + g.init("i", "j") + ") + " : "";
        ctx.Line(y + " = (" + CType(t) + ")(" + base + "acc);");
      } else {
        ctx.Line(CType(ct) + " acc = " + CNumber(ct, 0) + ";");
        if (g.K > 0)
          ctx.Line("for (size_t k = 0; k < " + s(g.K) + "; ++k) acc += " + Load(ctx, t, at) +
                   " * " + Load(ctx, t, bt) + ";");
        std::string v = g.alpha == 1.0 ? "acc" : CNumber(ct, g.alpha) + " * acc";
        if (g.init) v = g.init("i", "j") + " + " + v;
        ctx.Line(y + " = " + Store(ctx, t, v) + ";");
      }
    });
  });
}

std::string ZeroFill(NodeContext& ctx, int out, DType t, int64_t n) {
  (void)ctx;
  return "memset(" + NodeContext::out(out) + ", 0, " + ByteCount(t, n) + ");";
}

Status CheckType(NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t) && !IsInt(t))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  if (ctx.input_dtype(1) != t) return ctx.error("operand types differ");
  return OkStatus();
}

Status EmitMatMul(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckType(ctx));
  DType t = ctx.input_dtype(0);
  const Dims& ad = ctx.input_dims(0);
  const Dims& bd = ctx.input_dims(1);
  if (ad.empty() || bd.empty()) return ctx.error("operands must have rank >= 1");
  Dims a2 = ad, b2 = bd;
  if (ad.size() == 1) a2.insert(a2.begin(), 1);
  if (bd.size() == 1) b2.push_back(1);
  const int64_t M = a2[a2.size() - 2], K = a2.back(), N = b2.back();
  if (b2[b2.size() - 2] != K) return ctx.error("inner dimensions differ");
  Dims ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2), ob;
  if (!ops::BroadcastDims(ab, bb, &ob)) return ctx.error("batch dimensions do not broadcast");
  const int64_t total = NumElements(ob) * M * N;
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (HasGemmKernel(t) || K == 0) ctx.Line(ZeroFill(ctx, 0, t, total));
  if (K == 0) return OkStatus();
  if (NumElements(bb) == 1) {  // one shared B: a single GEMM over every row of A
    EmitGemmCall(ctx, t,
                 {NumElements(ob) * M, N, K, "in0", "in1", "out0", K, 1, N, 1, 1.0, nullptr, 1});
    return OkStatus();
  }
  // One GEMM per output batch index; the batch offsets of A and B follow their broadcast strides.
  std::vector<int64_t> as = BroadcastStridesOver(ab, ob), bs = BroadcastStridesOver(bb, ob),
                       os = Strides(ob);
  for (auto& v : as) v *= M * K;
  for (auto& v : bs) v *= K * N;
  for (auto& v : os) v *= M * N;
  MergedAxes m = MergeAxes(ob, {as, bs, os});
  Nest(ctx, m.dims, "b", [&](const std::vector<std::string>& idx) {
    auto ptr = [&](const char* base, const std::vector<int64_t>& st) {
      std::string off = IndexExpr(idx, st);
      return off == "0" ? std::string(base) : "(" + std::string(base) + " + " + off + ")";
    };
    EmitGemmCall(ctx, t,
                 {M, N, K, ptr("in0", m.strides[0]), ptr("in1", m.strides[1]),
                  ptr("out0", m.strides[2]), K, 1, N, 1, 1.0, nullptr});
  });
  return OkStatus();
}

Status EmitGemm(NodeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckType(ctx));
  const ir::Node& n = ctx.node();
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const double alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  const Dims& ad = ctx.input_dims(0);
  const Dims& bd = ctx.input_dims(1);
  if (ad.size() != 2 || bd.size() != 2) return ctx.error("needs 2-D A and B");
  const int64_t M = ta ? ad[1] : ad[0], K = ta ? ad[0] : ad[1], N = tb ? bd[0] : bd[1];
  if ((tb ? bd[1] : bd[0]) != K) return ctx.error("inner dimensions differ");
  if (M * N == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  const bool use_c = ctx.has_input(2) && beta != 0.0;
  const Dims mn = {M, N};
  GemmCall g{M,          N,          K,          "in0", "in1",   "out0", ta ? 1 : K,
             ta ? M : 1, tb ? 1 : N, tb ? K : 1, alpha, nullptr, 1};
  if (use_c && IsInt(t) && beta != 1.0)
    return ctx.error("an integer Gemm with beta other than 0 or 1 is not supported");
  if (HasGemmKernel(t) || K == 0) {
    // Y starts as beta * C (broadcast), or zero; the GEMM accumulates into it.
    if (use_c) {
      EmitBroadcast(ctx, {2}, {ctx.input_dims(2)}, mn, [&](const std::vector<std::string>& a) {
        std::string c = Load(ctx, t, a[0]);
        return Store(ctx, t, beta == 1.0 ? c : CNumber(ct, beta) + " * " + c);
      });
    } else {
      ctx.Line(ZeroFill(ctx, 0, t, M * N));
    }
    if (K == 0) return OkStatus();
  } else if (use_c) {
    std::vector<int64_t> cs = BroadcastStridesOver(ctx.input_dims(2), mn);
    g.init = [&ctx, t, ct, beta, cs](const std::string& i, const std::string& j) {
      std::string off = IndexExpr({i, j}, cs);
      std::string c = Load(ctx, t, "in2[" + off + "]");
      return beta == 1.0 ? c : CNumber(ct, beta) + " * " + c;
    };
  }
  EmitGemmCall(ctx, t, g);
  return OkStatus();
}

// ---- Einsum ----

// Einsum as loops: the output labels outside, the summed labels inside, one product of every
// operand per step, accumulated like MatMul (float in float, integers wrapping).
Status EmitEinsum(NodeContext& ctx) {
  const int n = ctx.num_inputs();
  std::vector<const Dims*> dims;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.error("inputs cannot be omitted");
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return ctx.error("input types differ");
    dims.push_back(&ctx.input_dims(i));
  }
  if (n == 0) return ctx.error("needs at least one input");
  DType t = ctx.input_dtype(0), ct = ComputeType(t);
  if (!IsFloatingDType(t) && !IsInt(t))
    return ctx.error("does not support element type " + std::string(DTypeName(t)));
  ops::EinsumPlan p;
  const std::string why = ops::PlanEinsum(ctx.node().attr_string("equation", ""), dims, &p);
  if (!why.empty()) return ctx.error(why);
  const int64_t total = NumElements(ctx.output_dims(0));
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  bool empty_sum = false;
  const Dims& od = p.out_dims;
  Dims sd;
  for (int l : p.sum_labels) {
    sd.push_back(p.size[l]);
    empty_sum = empty_sum || p.size[l] == 0;
  }
  if (NumElements(od) != total)
    return ctx.error("the equation's output does not match the output dims");
  if (empty_sum) {  // an empty contraction: every sum is zero
    ctx.Line(ZeroFill(ctx, 0, t, total));
    return OkStatus();
  }
  // Strides over the output labels (operands, then the output) and the summed labels.
  std::vector<std::vector<int64_t>> os(n + 1), ss(n);
  std::vector<int64_t> ostr = Strides(od);
  for (int k = 0; k < n; ++k) {
    for (int l : p.out_labels) os[k].push_back(p.stride[k][l]);
    for (int l : p.sum_labels) ss[k].push_back(p.stride[k][l]);
  }
  os[n] = ostr;
  MergedAxes om = MergeAxes(od, os), sm = MergeAxes(sd, ss);
  const bool is_int = IsInt(t);
  std::string at = is_int ? WrapType(t) : CType(ct);
  Nest(ctx, om.dims, "o", [&](const std::vector<std::string>& oidx) {
    ctx.Line(at + " acc = 0;");
    Nest(ctx, sm.dims, "s", [&](const std::vector<std::string>& sidx) {
      std::string prod;
      for (int k = 0; k < n; ++k) {
        std::string off = IndexExpr(oidx, om.strides[k]), soff = IndexExpr(sidx, sm.strides[k]);
        if (off == "0")
          off = soff;
        else if (soff != "0")
          off += " + " + soff;
        std::string e = NodeContext::in(k) + "[" + off + "]";
        e = is_int ? "(" + at + ")" + e : Load(ctx, t, e);
        prod += (k ? " * " : "") + e;
      }
      ctx.Line("acc += " + prod + ";");
    });
    ctx.Line("out0[" + IndexExpr(oidx, om.strides[n]) +
             "] = " + (is_int ? "(" + CType(t) + ")acc" : Store(ctx, t, "acc")) + ";");
  });
  return OkStatus();
}

// ---- MatMulInteger / QLinearMatMul ----

// The int32 products (A - a_zero_point) x (B - b_zero_point) of the 8-bit operands in0 (or
// input a) and input b; zero points per tensor, per row of A or per column of B. Calls
// `store(acc)` with the int32 accumulator `acc` of output element (batch, i, j) in scope.
Status EmitIntMatMul(
    NodeContext& ctx, int a, int azp, int b, int bzp,
    const std::function<void(const std::string& row, const std::string& col)>& store) {
  for (int i : {a, b})
    if (ctx.input_dtype(i) != DType::kInt8 && ctx.input_dtype(i) != DType::kUInt8)
      return ctx.error("the operands must be int8 or uint8");
  const Dims& ad = ctx.input_dims(a);
  const Dims& bd = ctx.input_dims(b);
  if (ad.empty() || bd.empty()) return ctx.error("operands must have rank >= 1");
  Dims a2 = ad, b2 = bd;
  if (ad.size() == 1) a2.insert(a2.begin(), 1);
  if (bd.size() == 1) b2.push_back(1);
  const int64_t M = a2[a2.size() - 2], K = a2.back(), N = b2.back();
  if (b2[b2.size() - 2] != K) return ctx.error("inner dimensions differ");
  Dims ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2), ob;
  if (!ops::BroadcastDims(ab, bb, &ob)) return ctx.error("batch dimensions do not broadcast");
  auto zero_point = [&](int i, int64_t count, const std::string& idx) -> Expected<std::string> {
    if (!ctx.has_input(i)) return std::string("0");
    int64_t z = NumElements(ctx.input_dims(i));
    if (z != 1 && z != count)
      return ctx.error("a zero point must have 1 or " + std::to_string(count) + " elements");
    return "(int32_t)" + NodeContext::in(i) + "[" + (z == 1 ? "0" : idx) + "]";
  };
  KILN_ASSIGN_OR_RETURN(std::string za, zero_point(azp, M, "i"));
  KILN_ASSIGN_OR_RETURN(std::string zb, zero_point(bzp, N, "j"));
  if (NumElements(ob) * M * N == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  std::vector<int64_t> as = BroadcastStridesOver(ab, ob), bs = BroadcastStridesOver(bb, ob),
                       os = Strides(ob);
  for (auto& v : as) v *= M * K;
  for (auto& v : bs) v *= K * N;
  for (auto& v : os) v *= M * N;
  MergedAxes m = MergeAxes(ob, {as, bs, os});
  std::string A = NodeContext::in(a), B = NodeContext::in(b);
  Nest(ctx, m.dims, "b", [&](const std::vector<std::string>& idx) {
    std::string ao = IndexExpr(idx, m.strides[0]), bo = IndexExpr(idx, m.strides[1]),
                oo = IndexExpr(idx, m.strides[2]);
    ctx.Line("const size_t ao = " + ao + ", bo = " + bo + ", oo = " + oo + ";");
    ctx.Line("(void)ao;");
    ctx.Line("(void)bo;");
    Loop(ctx, M, "i", [&] {
      Loop(ctx, N, "j", [&] {
        ctx.Line("uint32_t acc = 0;");  // int32 arithmetic, wrapping
        if (K > 0)
          ctx.Line("for (size_t k = 0; k < " + std::to_string(K) +
                   "; ++k) acc += (uint32_t)((int32_t)" + A + "[ao + i * " + std::to_string(K) +
                   " + k] - " + za + ") * (uint32_t)((int32_t)" + B + "[bo + k * " +
                   std::to_string(N) + " + j] - " + zb + ");");
        ctx.Line("{");
        ctx.Indent();
        ctx.Line("const size_t at = oo + i * " + std::to_string(N) + " + j;");
        store("i", "j");
        ctx.Dedent();
        ctx.Line("}");
      });
    });
  });
  return OkStatus();
}

Status EmitMatMulInteger(NodeContext& ctx) {
  return EmitIntMatMul(ctx, 0, 2, 1, 3, [&](const std::string&, const std::string&) {
    ctx.Line("out0[at] = (int32_t)acc;");
  });
}

// y = round_half_even(acc * a_scale * b_scale / y_scale) + y_zero_point, wrapped to the output
// type as the ONNX reference does. The multiplier rounds like the reference, in the scales' own
// type; the final product is taken in double so that the rounding matches it exactly.
Status EmitQLinearMatMul(NodeContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  DType st = ctx.input_dtype(1), yt = ctx.output_dtype(0);
  if (!IsFloatingDType(st) || ctx.input_dtype(4) != st || ctx.input_dtype(6) != st)
    return ctx.error("the scales must be floats of one type");
  if (yt != DType::kInt8 && yt != DType::kUInt8) return ctx.error("y must be int8 or uint8");
  const Dims& ad = ctx.input_dims(0);
  const Dims& bd = ctx.input_dims(3);
  const int64_t M = ad.size() > 1 ? ad[ad.size() - 2] : 1, N = bd.size() > 1 ? bd.back() : 1;
  const int64_t na = NumElements(ctx.input_dims(1)), nb = NumElements(ctx.input_dims(4));
  if (na != 1 && na != M) return ctx.error("a_scale must have 1 or M elements");
  if (nb != 1 && nb != N) return ctx.error("b_scale must have 1 or N elements");
  if (NumElements(ctx.input_dims(6)) != 1) return ctx.error("y_scale must be a scalar");
  std::string sa = Load(ctx, st, std::string("in1[") + (na == 1 ? "0" : "i") + "]");
  std::string sb = Load(ctx, st, std::string("in4[") + (nb == 1 ? "0" : "j") + "]");
  std::string sy = Load(ctx, st, "in6[0]");
  std::string mul;
  if (st == DType::kFloat64) {
    mul = sa + " * " + sb + " / " + sy;
  } else if (st == DType::kFloat32) {
    mul = "(double)(" + sa + " * " + sb + " / " + sy + ")";
  } else {  // 16-bit scales: each step rounds to the scale type
    std::string r = st == DType::kFloat16 ? "f16" : "bf16";
    auto round = [&](const std::string& v) {
      return "kiln_half_" + r + "_to_f32(kiln_half_f32_to_" + r + "(" + v + "))";
    };
    mul = "(double)" + round(round(sa + " * " + sb) + " / " + sy);
  }
  std::string yz = ctx.has_input(7) ? "(double)in7[0]" : "0.0";
  return EmitIntMatMul(ctx, 0, 2, 3, 5, [&](const std::string&, const std::string&) {
    ctx.Line("double v = nearbyint((double)(int32_t)acc * " + mul + " + " + yz + ");");
    ctx.Line("if (!(v > -9.2e18 && v < 9.2e18)) v = 0.0;");
    ctx.Line("out0[at] = (" + CType(yt) + ")(int64_t)v;");
  });
}

// fuse-qdq's com.kiln QLinearMatMul: the same products, requantized in fixed point
// (kernels/reference/requant.c) with a multiplier per column, saturated.
Status EmitKilnQLinearMatMul(NodeContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  const DType yt = ctx.output_dtype(0);
  if (yt != DType::kInt8 && yt != DType::kUInt8) return ctx.error("y must be int8 or uint8");
  const Dims& bd = ctx.input_dims(3);
  const int64_t N = bd.size() > 1 ? bd.back() : 1;
  if (NumElements(ctx.input_dims(1)) != 1) return ctx.error("a_scale must be a scalar");
  if (ctx.has_input(8) && (ctx.input_dtype(8) != DType::kInt32 || ctx.input_dims(8) != Dims{N}))
    return ctx.error("the bias (input 8) must be int32 of shape [N]");
  KILN_ASSIGN_OR_RETURN(bool packed, EmitQMatMulPacked(ctx));
  if (packed) return OkStatus();
  KILN_ASSIGN_OR_RETURN(auto tables, FixedPointTables(ctx, 1, 4, 6, N));
  ctx.UseKernel("requant");
  ctx.Line(tables.first);
  ctx.Line(tables.second);
  std::string yz = "0";
  if (ctx.has_input(7)) {
    const Tensor* c = ctx.input_constant(7);
    yz = c ? std::to_string(static_cast<int64_t>(c->GetDouble(0))) : "(int32_t)in7[0]";
  }
  const std::string range = yt == DType::kInt8 ? "-128, 127" : "0, 255";
  const std::string bias = ctx.has_input(8) ? " + in8[j]" : "";
  return EmitIntMatMul(ctx, 0, 2, 3, 5, [&](const std::string&, const std::string&) {
    ctx.Line("out0[at] = (" + CType(yt) + ")kiln_requant_fixed((int32_t)acc" + bias +
             ", mult[j], shift[j], " + yz + ", " + range + ");");
  });
}

}  // namespace

void RegisterMatMulEmitters(EmitterRegistry& r) {
  r.Register("MatMul", EmitMatMul);
  r.Register("Gemm", EmitGemm);
  r.Register("Einsum", EmitEinsum);
  r.Register("MatMulInteger", EmitMatMulInteger);
  r.Register("QLinearMatMul", EmitQLinearMatMul);
  r.Register("QLinearMatMul", EmitKilnQLinearMatMul, ops::kKilnDomain);
}

}  // namespace kiln::codegen::c
