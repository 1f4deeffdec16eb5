// C emitters for the matmul family: MatMul (numpy matmul: batched, batch dims broadcast, 1-D
// operands promoted and the added dim dropped) and Gemm (transA, transB, alpha, beta, C
// broadcast to [M, N]). float and double go through the portable GEMM (kernels/gemm.c, i-k-j
// order, accumulating in the element type); the other element types the host supports get
// specialized dot-product loops: 16-bit floats accumulate in float, integers wrap around as
// unsigned arithmetic, like the host executor's kernels.
#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/common.h"

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
};

void EmitGemmCall(NodeContext& ctx, DType t, const GemmCall& g) {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (HasGemmKernel(t)) {
    std::string sfx = CSuffix(t);
    ctx.UseKernel("gemm_" + sfx);
    ctx.Line("kiln_gemm_" + sfx + "_run(" + s(g.M) + ", " + s(g.N) + ", " + s(g.K) + ", " + CNumber(t, g.alpha) + ", " +
             g.a + ", " + s(g.sam) + ", " + s(g.sak) + ", " + g.b + ", " + s(g.sbk) + ", " + s(g.sbn) + ", " + g.c + ");");
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
          ctx.Line("for (size_t k = 0; k < " + s(g.K) + "; ++k) acc += (" + u + ")" + at + " * (" + u + ")" + bt + ";");
        if (g.alpha != 1.0)  // as the host: alpha applied in double to the accumulated value
          ctx.Line("acc = (" + u + ")(int64_t)(" + CNumber(DType::kFloat64, g.alpha) + " * (double)(" + CType(t) + ")acc);");
        std::string base = g.init ? "(" + u + ")(" + g.init("i", "j") + ") + " : "";
        ctx.Line(y + " = (" + CType(t) + ")(" + base + "acc);");
      } else {
        ctx.Line(CType(ct) + " acc = " + CNumber(ct, 0) + ";");
        if (g.K > 0)
          ctx.Line("for (size_t k = 0; k < " + s(g.K) + "; ++k) acc += " + Load(ctx, t, at) + " * " + Load(ctx, t, bt) + ";");
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
  if (!IsFloatingDType(t) && !IsInt(t)) return ctx.error("does not support element type " + std::string(DTypeName(t)));
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
    EmitGemmCall(ctx, t, {NumElements(ob) * M, N, K, "in0", "in1", "out0", K, 1, N, 1, 1.0, nullptr});
    return OkStatus();
  }
  // One GEMM per output batch index; the batch offsets of A and B follow their broadcast strides.
  std::vector<int64_t> as = BroadcastStridesOver(ab, ob), bs = BroadcastStridesOver(bb, ob), os = Strides(ob);
  for (auto& v : as) v *= M * K;
  for (auto& v : bs) v *= K * N;
  for (auto& v : os) v *= M * N;
  MergedAxes m = MergeAxes(ob, {as, bs, os});
  Nest(ctx, m.dims, "b", [&](const std::vector<std::string>& idx) {
    auto ptr = [&](const char* base, const std::vector<int64_t>& st) {
      std::string off = IndexExpr(idx, st);
      return off == "0" ? std::string(base) : "(" + std::string(base) + " + " + off + ")";
    };
    EmitGemmCall(ctx, t, {M, N, K, ptr("in0", m.strides[0]), ptr("in1", m.strides[1]), ptr("out0", m.strides[2]), K, 1, N, 1, 1.0, nullptr});
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
  GemmCall g{M, N, K, "in0", "in1", "out0", ta ? 1 : K, ta ? M : 1, tb ? 1 : N, tb ? K : 1, alpha, nullptr};
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

}  // namespace

void RegisterMatMulEmitters(EmitterRegistry& r) {
  r.Register("MatMul", EmitMatMul);
  r.Register("Gemm", EmitGemm);
}

}  // namespace kiln::codegen::c
