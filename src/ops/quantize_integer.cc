// The integer matmul / conv family: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv; and
// fuse-qdq's com.kiln QLinearGlobalAveragePool and QLinearAdd.
// Rounding follows the ONNX reference: round half to even (std::nearbyint), then saturate. The
// com.kiln QLinearConv / QLinearMatMul that fuse-qdq makes take the same inputs and requantize in
// fixed point instead (kernels/reference/requant.c), as the generated C does on a microcontroller.
#include <string>

#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/quantize_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "ops/common.h"
#include "ops/qconv_direct.h"
#include "ops/quantize.h"
#include "ops/quantize_gemm.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------- integer matmul

// Batched matmul geometry with numpy broadcasting and 1-D promotion.
struct MatMulShape {
  int64_t m = 1, k = 1, n = 1;
  Dims batch, out;
  Dims a_batch_strides, b_batch_strides;  // in matrices, per batch dim
};

std::string MakeMatMulShape(const Dims& a, const Dims& b, MatMulShape* s) {
  if (a.empty() || b.empty()) return "matmul inputs must have rank >= 1";
  Dims a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  s->m = a2[a2.size() - 2];
  s->k = a2.back();
  s->n = b2.back();
  if (b2[b2.size() - 2] != s->k)
    return "inner dimensions differ: " + DimsToString(a) + " x " + DimsToString(b);
  Dims ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  if (!BroadcastDims(ab, bb, &s->batch))
    return "batch dimensions do not broadcast: " + DimsToString(a) + " x " + DimsToString(b);
  s->a_batch_strides = BroadcastStrides(ab, s->batch);
  s->b_batch_strides = BroadcastStrides(bb, s->batch);
  s->out = s->batch;
  if (a.size() > 1) s->out.push_back(s->m);
  if (b.size() > 1) s->out.push_back(s->n);
  return "";
}

// C[m,n] (int32, accumulated) += A[m,k] * B[k,n]; i-k-j order so the inner loop vectorizes.
void GemmInt32(const int32_t* a, const int32_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    int32_t* crow = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const int32_t av = a[i * k + p];
      if (av == 0) continue;
      const int32_t* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// Per-row (A) or per-column (B) zero points: size 1, or the matching dimension's size.
std::string ZeroPoints(const Tensor* zp, int64_t count, const char* what,
                       std::vector<int32_t>* out) {
  out->assign(count, 0);
  if (!zp) return "";
  if (zp->size() == 1) {
    std::fill(out->begin(), out->end(), static_cast<int32_t>(zp->GetInt(0)));
  } else if (zp->size() == count) {
    for (int64_t i = 0; i < count; ++i) (*out)[i] = static_cast<int32_t>(zp->GetInt(i));
  } else {
    return std::string(what) + " zero point must have 1 or " + std::to_string(count) +
           " elements, got " + DimsToString(zp->dims());
  }
  return "";
}

// Computes int32 (A - a_zp) x (B - b_zp) for all batches into `out` (size batch*m*n).
Status IntMatMul(ComputeContext& ctx, const Tensor& a, const Tensor* azp, const Tensor& b,
                 const Tensor* bzp, const MatMulShape& s, std::vector<int32_t>* out) {
  std::vector<int32_t> za, zb;
  std::string m = ZeroPoints(azp, s.m, "a", &za);
  if (m.empty()) m = ZeroPoints(bzp, s.n, "b", &zb);
  if (!m.empty()) return ctx.error(m);
  const int64_t nb = NumElements(s.batch);
  out->assign(nb * s.m * s.n, 0);
  std::vector<int32_t> am(s.m * s.k), bm(s.k * s.n);
  std::vector<int64_t> idx(s.batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      ao += idx[d] * s.a_batch_strides[d];
      bo += idx[d] * s.b_batch_strides[d];
    }
    for (int64_t i = 0; i < s.m * s.k; ++i)
      am[i] = static_cast<int32_t>(a.GetInt(ao * s.m * s.k + i)) - za[i / s.k];
    for (int64_t i = 0; i < s.k * s.n; ++i)
      bm[i] = static_cast<int32_t>(b.GetInt(bo * s.k * s.n + i)) - zb[i % s.n];
    GemmInt32(am.data(), bm.data(), out->data() + bi * s.m * s.n, s.m, s.k, s.n);
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < s.batch[d]) break;
      idx[d] = 0;
    }
  }
  return OkStatus();
}

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

Status MatMulIntegerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs A and B");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(1)))
    return ctx.error("A and B must be int8 or uint8");
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input_dims(0), ctx.input_dims(1), &s);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, DType::kInt32, s.out);
  return OkStatus();
}

Status MatMulIntegerCompute(ComputeContext& ctx) {
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input(0).dims(), ctx.input(1).dims(), &s);
  if (!m.empty()) return ctx.error(m);
  const Tensor* azp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* bzp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (IntMatMulByGemm(ctx, ctx.input(0), azp, s.m, ctx.input(1), bzp, 1,
                      ctx.output(0).data<int32_t>()))
    return OkStatus();
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntMatMul(ctx, ctx.input(0), azp, ctx.input(1), bzp, s, &r));
  std::copy(r.begin(), r.end(), ctx.output(0).data<int32_t>());
  return OkStatus();
}

Status QLinearMatMulInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(3)))
    return ctx.error("a and b must be int8 or uint8");
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input_dims(0), ctx.input_dims(3), &s);
  if (!m.empty()) return ctx.error(m);
  DType yt = ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("y_zero_point must be int8 or uint8");
  if (ctx.has_input(8) &&  // fuse-qdq's bias (com.kiln)
      (ctx.node().domain != kKilnDomain || ctx.input_dtype(8) != DType::kInt32 ||
       ctx.input_dims(8) != Dims{s.n}))
    return ctx.error("a bias (input 8) must be int32 of shape [N], in domain com.kiln");
  ctx.set_output(0, yt, s.out);
  return OkStatus();
}

// The int32 sums of an integer product: through the int8 GEMM into a scratch buffer where it
// applies, else the general loop's.
class IntSums {
 public:
  explicit IntSums(int64_t count) : count_(count) {}
  // Runs `gemm(int32_t* out)`; when it declines, `general(std::vector<int32_t>*)`.
  template <class G, class L>
  Status Compute(G&& gemm, L&& general) {
    int32_t* acc = Scratch<int32_t>(ScratchSlot::kQuantAcc, static_cast<size_t>(count_));
    if (gemm(acc)) {
      data_ = acc;
      return OkStatus();
    }
    KILN_RETURN_IF_ERROR(general(&slow_));
    data_ = slow_.data();
    return OkStatus();
  }
  int32_t* data() const { return data_; }  // the caller may add to the sums in place

 private:
  int64_t count_;
  int32_t* data_ = nullptr;
  std::vector<int32_t> slow_;
};

// Requantizes `rows` runs of `n` sums (run r into y at r * n) on the vector kernel over threads:
// by_row, run r takes mul[r % mul.size()]; else mul holds 1 or n multipliers, one per column.
// False where the kernel does not take the multipliers.
bool RequantizeRows(int threads, const int32_t* acc, int64_t rows, int64_t n,
                    const std::vector<double>& mul, bool by_row, int32_t zp, bool wrap, Tensor& y) {
  for (double v : mul)
    if (!(v > -0.5 && v < 0.5)) return false;
  if (y.dtype() != DType::kUInt8 && y.dtype() != DType::kInt8) return false;
  const int t = static_cast<int>(std::min<int64_t>(threads, rows * n / (64 << 10) + 1));
  const auto count = static_cast<int64_t>(mul.size());
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      RequantizeInt32(acc + r * n, n, by_row ? &mul[r % count] : mul.data(), by_row ? 1 : count, zp,
                      wrap, y.dtype(), static_cast<uint8_t*>(y.raw()) + r * n);
  });
  return true;
}

// Fixed-point requantization (kernels/reference/requant.c) of `rows` runs of `n` sums into y:
// run r, column j takes multiplier (by_row ? r % count : j % count) of f's `count`, saturated;
// on the vector kernel (quantize_kernels.h), over threads. Per column, count is 1 or n.
void RequantizeFixedRows(int threads, const int32_t* acc, int64_t rows, int64_t n,
                         const FixedMultipliers& f, bool by_row, int32_t zp, Tensor& y) {
  const auto count = static_cast<int64_t>(f.mult.size());
  auto* out = static_cast<uint8_t*>(y.raw());  // int8's two's complement bytes, or uint8
  const int t = static_cast<int>(std::min<int64_t>(threads, rows * n / (64 << 10) + 1));
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t q = by_row ? r % count : 0;
      RequantizeFixed(acc + r * n, n, &f.mult[q], &f.shift[q], !by_row && count > 1, zp, y.dtype(),
                      out + r * n);
    }
  });
}

bool IsKilnDomain(const ComputeContext& ctx) { return ctx.node().domain == kKilnDomain; }

Status QLinearMatMulCompute(ComputeContext& ctx) {
  MatMulShape s;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  std::string m = MakeMatMulShape(a.dims(), b.dims(), &s);
  if (!m.empty()) return ctx.error(m);
  const Tensor* azp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* bzp = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const int64_t total = NumElements(s.out);
  IntSums sums(total);
  KILN_RETURN_IF_ERROR(
      sums.Compute([&](int32_t* acc) { return IntMatMulByGemm(ctx, a, azp, s.m, b, bzp, 3, acc); },
                   [&](std::vector<int32_t>* r) { return IntMatMul(ctx, a, azp, b, bzp, s, r); }));
  const int32_t* r = sums.data();
  const Tensor& as = ctx.input(1);
  const Tensor& bs = ctx.input(4);
  const Tensor& ys = ctx.input(6);
  if (as.size() != 1 && as.size() != s.m) return ctx.error("a_scale must have 1 or M elements");
  if (bs.size() != 1 && bs.size() != s.n) return ctx.error("b_scale must have 1 or N elements");
  if (ys.size() != 1) return ctx.error("y_scale must be a scalar");
  double yz = ctx.has_input(7) ? ctx.input(7).GetDouble(0) : 0.0;
  Tensor& y = ctx.output(0);
  if (IsKilnDomain(ctx)) {  // fuse-qdq's: fixed point, saturated, the bias (Gemm's) added
    if (as.size() != 1) return ctx.error("a_scale must be a scalar");
    const FixedMultipliers f = NodeMultipliers(ctx, as, bs, ys, bs.size());
    if (ctx.has_input(8)) {
      const Tensor& bias = ctx.input(8);
      if (bias.size() != s.n) return ctx.error("the bias must have N elements");
      int32_t* sum = sums.data();
      for (int64_t e = 0; e < total; ++e) sum[e] += bias.data<int32_t>()[e % s.n];
    }
    RequantizeFixedRows(ctx.threads(), r, total / s.n, s.n, f, false, static_cast<int32_t>(yz), y);
    return OkStatus();
  }
  if (as.size() == 1 && total > 0) {
    std::vector<double> mul(bs.size());
    for (int64_t j = 0; j < bs.size(); ++j) mul[j] = RequantMultiplier(as, 0, bs, j, ys);
    // The ONNX reference wraps out-of-range results (below), hence wrap.
    if (RequantizeRows(ctx.threads(), r, total / s.n, s.n, mul, false, static_cast<int32_t>(yz),
                       true, y))
      return OkStatus();
  }
  Dispatch<kIntTypes>(y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (int64_t e = 0; e < total; ++e) {
      int64_t row = (e / s.n) % s.m, col = e % s.n;
      double mul =
          RequantMultiplier(as, as.size() == 1 ? 0 : row, bs, bs.size() == 1 ? 0 : col, ys);
      // The ONNX reference (whose outputs the conformance data holds) wraps out-of-range
      // results modulo 2^bits instead of saturating as the spec text says; match it.
      double v = std::nearbyint(static_cast<double>(r[e]) * mul + yz);
      if (!(v > -9.2e18 && v < 9.2e18)) v = 0;
      yp[e] = static_cast<Q>(static_cast<int64_t>(v));
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- integer conv

std::string MakeConvGeom(const ir::Node& node, const Dims& x, const Dims& w, ConvGeom* g) {
  if (x.size() < 3 || w.size() != x.size()) return "x and w must have the same rank >= 3";
  const size_t sp = x.size() - 2;
  g->n = x[0];
  g->c = x[1];
  g->m = w[0];
  g->group = node.attr_int("group", 1);
  if (g->group <= 0 || g->c % g->group != 0 || g->m % g->group != 0)
    return "group " + std::to_string(g->group) + " does not divide the channels";
  if (w[1] * g->group != g->c)
    return "w has " + std::to_string(w[1]) + " input channels per group, x has " +
           std::to_string(g->c) + " channels";
  g->in.assign(x.begin() + 2, x.end());
  g->kernel = node.attr_ints("kernel_shape", Dims(w.begin() + 2, w.end()));
  if (g->kernel.size() != sp) return "kernel_shape has the wrong rank";
  for (size_t i = 0; i < sp; ++i)
    if (g->kernel[i] != w[2 + i]) return "kernel_shape does not match w";
  g->strides = node.attr_ints("strides", Dims(sp, 1));
  g->dilations = node.attr_ints("dilations", Dims(sp, 1));
  Dims pads = node.attr_ints("pads", Dims(2 * sp, 0));
  if (g->strides.size() != sp || g->dilations.size() != sp || pads.size() != 2 * sp)
    return "strides, dilations or pads have the wrong length";
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  g->out.resize(sp);
  g->pads_begin.resize(sp);
  for (size_t i = 0; i < sp; ++i) {
    if (g->strides[i] <= 0 || g->dilations[i] <= 0) return "strides and dilations must be positive";
    int64_t ek = (g->kernel[i] - 1) * g->dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t o = (g->in[i] + g->strides[i] - 1) / g->strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * g->strides[i] + ek - g->in[i]);
      g->pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->out[i] = o;
    } else if (auto_pad == "VALID") {
      g->pads_begin[i] = 0;
      g->out[i] = (g->in[i] - ek) / g->strides[i] + 1;
    } else if (auto_pad == "NOTSET") {
      if (pads[i] < 0 || pads[i + sp] < 0) return "pads must be non-negative";
      g->pads_begin[i] = pads[i];
      g->out[i] = (g->in[i] + pads[i] + pads[i + sp] - ek) / g->strides[i] + 1;
    } else {
      return "unknown auto_pad '" + auto_pad + "'";
    }
    if (g->out[i] < 0) g->out[i] = 0;
  }
  return "";
}

Dims ConvOutDims(const ConvGeom& g) {
  Dims d = {g.n, g.m};
  d.insert(d.end(), g.out.begin(), g.out.end());
  return d;
}

// int32 convolution of (x - x_zp) with (w - w_zp) (zero padding in the shifted domain), plus
// an optional int32 bias. im2col per (image, group), then an int32 GEMM.
Status IntConv(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t xzp,
               const Tensor& w, const Tensor* wzp, const Tensor* bias, std::vector<int32_t>* out) {
  const size_t sp = g.in.size();
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t ksz = NumElements(g.kernel), osz = NumElements(g.out), isz = NumElements(g.in);
  const int64_t rows = cg * ksz;
  if (wzp && wzp->size() != 1 && wzp->size() != g.m)
    return ctx.error("w zero point must have 1 or M elements");
  if (bias && bias->size() != g.m) return ctx.error("bias must have M elements");
  std::vector<int32_t> wm(g.m * rows);
  for (int64_t i = 0; i < g.m * rows; ++i) {
    int64_t oc = i / rows;
    int32_t z = wzp ? static_cast<int32_t>(wzp->GetInt(wzp->size() == 1 ? 0 : oc)) : 0;
    wm[i] = static_cast<int32_t>(w.GetInt(i)) - z;
  }
  std::vector<int32_t> xs(x.size());
  for (int64_t i = 0; i < x.size(); ++i) xs[i] = static_cast<int32_t>(x.GetInt(i)) - xzp;
  out->assign(g.n * g.m * osz, 0);
  std::vector<int32_t> col(rows * osz);
  Dims in_strides = Strides(g.in);
  std::vector<int64_t> kidx(sp), oidx(sp);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t gr = 0; gr < g.group; ++gr) {
      // im2col
      for (int64_t r = 0; r < rows; ++r) {
        int64_t c = r / ksz, kk = r % ksz;
        for (int d = static_cast<int>(sp) - 1, t = static_cast<int>(kk); d >= 0; --d) {
          kidx[d] = t % g.kernel[d];
          t /= static_cast<int>(g.kernel[d]);
        }
        const int32_t* src = xs.data() + ((n * g.c) + gr * cg + c) * isz;
        int32_t* dst = col.data() + r * osz;
        std::fill(oidx.begin(), oidx.end(), 0);
        for (int64_t o = 0; o < osz; ++o) {
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < sp; ++d) {
            int64_t p = oidx[d] * g.strides[d] - g.pads_begin[d] + kidx[d] * g.dilations[d];
            if (p < 0 || p >= g.in[d]) {
              inside = false;
              break;
            }
            off += p * in_strides[d];
          }
          dst[o] = inside ? src[off] : 0;
          for (int d = static_cast<int>(sp) - 1; d >= 0; --d) {
            if (++oidx[d] < g.out[d]) break;
            oidx[d] = 0;
          }
        }
      }
      int32_t* dst = out->data() + (n * g.m + gr * mg) * osz;
      GemmInt32(wm.data() + gr * mg * rows, col.data(), dst, mg, rows, osz);
    }
    if (bias)
      for (int64_t oc = 0; oc < g.m; ++oc) {
        int32_t bv = static_cast<int32_t>(bias->GetInt(oc));
        int32_t* dst = out->data() + (n * g.m + oc) * osz;
        for (int64_t o = 0; o < osz; ++o) dst[o] += bv;
      }
  }
  return OkStatus();
}

Status ConvIntegerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs x and w");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(1)))
    return ctx.error("x and w must be int8 or uint8");
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input_dims(0), ctx.input_dims(1), &g);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, DType::kInt32, ConvOutDims(g));
  return OkStatus();
}

Status ConvIntegerCompute(ComputeContext& ctx) {
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input(0).dims(), ctx.input(1).dims(), &g);
  if (!m.empty()) return ctx.error(m);
  if (ctx.has_input(2) && ctx.input(2).size() != 1)
    return ctx.error("x_zero_point must be a scalar");
  int32_t xzp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetInt(0)) : 0;
  const Tensor* wzp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  int32_t* y = ctx.output(0).data<int32_t>();
  if (IntConvByGemm(ctx, g, ctx.input(0), xzp, ctx.input(1), wzp, nullptr, 1, y)) return OkStatus();
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntConv(ctx, g, ctx.input(0), xzp, ctx.input(1), wzp, nullptr, &r));
  std::copy(r.begin(), r.end(), y);
  return OkStatus();
}

Status QLinearConvInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs at least 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(3)))
    return ctx.error("x and w must be int8 or uint8");
  if (ctx.has_input(8) && ctx.input_dtype(8) != DType::kInt32) return ctx.error("B must be int32");
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input_dims(0), ctx.input_dims(3), &g);
  if (!m.empty()) return ctx.error(m);
  DType yt = ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("y_zero_point must be int8 or uint8");
  ctx.set_output(0, yt, ConvOutDims(g));
  return OkStatus();
}

// fuse-qdq's QLinearConv with its requantization in the convolution's own pass
// (IntConvRequantized), where every channel's shift is a right shift of two or more; false where
// that path does not take it.
bool RequantizedConv(ComputeContext& ctx, const ConvGeom& g, int32_t xzp, const Tensor* wzp,
                     const Tensor* bias) {
  const FixedMultipliers f = NodeMultipliers(ctx, ctx.input(1), ctx.input(4), ctx.input(6), g.m);
  if (std::any_of(f.shift.begin(), f.shift.end(), [](int32_t s) { return s > -2; })) return false;
  QConvOutput out;
  Tensor& y = ctx.output(0);
  const bool is_signed = y.dtype() == DType::kInt8;
  out.y = static_cast<uint8_t*>(y.raw());
  out.mult = f.mult.data();
  out.shift = f.shift.data();
  out.zp = ctx.has_input(7) ? static_cast<int32_t>(ctx.input(7).GetInt(0)) : 0;
  out.lo = is_signed ? -128 : 0;
  out.hi = is_signed ? 127 : 255;
  return IntConvRequantized(ctx, g, ctx.input(0), xzp, ctx.input(3), wzp, bias, 3, out);
}

Status QLinearConvCompute(ComputeContext& ctx) {
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input(0).dims(), ctx.input(3).dims(), &g);
  if (!m.empty()) return ctx.error(m);
  if (ctx.input(1).size() != 1) return ctx.error("x_scale must be a scalar");
  if (ctx.has_input(2) && ctx.input(2).size() != 1)
    return ctx.error("x_zero_point must be a scalar");
  const Tensor& ws = ctx.input(4);
  if (ws.size() != 1 && ws.size() != g.m) return ctx.error("w_scale must have 1 or M elements");
  if (ctx.input(6).size() != 1) return ctx.error("y_scale must be a scalar");
  int32_t xzp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetInt(0)) : 0;
  const Tensor* wzp = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const Tensor* bias = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  const int64_t osz = NumElements(g.out), total = g.n * g.m * osz;
  if (IsKilnDomain(ctx) && RequantizedConv(ctx, g, xzp, wzp, bias)) return OkStatus();
  IntSums sums(total);
  KILN_RETURN_IF_ERROR(sums.Compute(
      [&](int32_t* acc) {
        return IntConvByGemm(ctx, g, ctx.input(0), xzp, ctx.input(3), wzp, bias, 3, acc);
      },
      [&](std::vector<int32_t>* r) {
        return IntConv(ctx, g, ctx.input(0), xzp, ctx.input(3), wzp, bias, r);
      }));
  const int32_t* r = sums.data();
  double yz = ctx.has_input(7) ? ctx.input(7).GetDouble(0) : 0.0;
  Tensor& y = ctx.output(0);
  double lo, hi;
  QuantRange(y.dtype(), &lo, &hi);
  if (IsKilnDomain(ctx)) {  // fuse-qdq's: fixed point
    RequantizeFixedRows(ctx.threads(), r, g.n * g.m, osz,
                        NodeMultipliers(ctx, ctx.input(1), ws, ctx.input(6), g.m), true,
                        static_cast<int32_t>(yz), y);
    return OkStatus();
  }
  std::vector<double> mul(g.m);
  for (int64_t oc = 0; oc < g.m; ++oc)
    mul[oc] = RequantMultiplier(ctx.input(1), 0, ws, ws.size() == 1 ? 0 : oc, ctx.input(6));
  if (total > 0 && RequantizeRows(ctx.threads(), r, g.n * g.m, osz, mul, true,
                                  static_cast<int32_t>(yz), false, y))
    return OkStatus();
  Dispatch<kIntTypes>(y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (int64_t e = 0; e < total; ++e) {
      int64_t oc = (static_cast<int64_t>(e) / osz) % g.m;
      yp[e] = static_cast<Q>(RoundSaturate(static_cast<double>(r[e]) * mul[oc] + yz, lo, hi));
    }
  });
  return OkStatus();
}

// com.kiln QLinearGlobalAveragePool, fuse-qdq's Q(GlobalAveragePool(DQ(x))) (the inputs of
// com.microsoft's: X, x_scale, x_zero_point, y_scale, y_zero_point; channels first): per image
// and channel the int32 sum of x - x_zero_point over the plane, requantized in fixed point by
// x_scale / (y_scale * plane) (kernels/reference/requant.c), as the generated C does.
Status QLinearGlobalAveragePoolInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 4) return ctx.error("needs at least 4 inputs");
  for (int i : {0, 1, 3})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0))) return ctx.error("X must be int8 or uint8");
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 3) return ctx.error("X must have a batch, channel and spatial dims");
  Dims y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  int64_t plane = 1;
  for (size_t i = 2; i < x.size(); ++i) plane *= x[i];
  if (plane > (int64_t{1} << 23)) return ctx.error("the plane is too large for int32 sums");
  const DType yt = ctx.has_input(4) ? ctx.input_dtype(4) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("y_zero_point must be int8 or uint8");
  ctx.set_output(0, yt, y);
  return OkStatus();
}

// The integer value of stored byte i of an 8-bit tensor.
int32_t ByteValue(const Tensor& t, int64_t i) {
  const auto b = static_cast<const uint8_t*>(t.raw())[i];
  return t.dtype() == DType::kInt8 ? static_cast<int8_t>(b) : b;
}

Status QLinearGlobalAveragePoolCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  for (int i : {1, 2, 3, 4})
    if (ctx.has_input(i) && ctx.input(i).size() != 1)
      return ctx.error("the scales and zero points must be scalars");
  const int64_t rows = x.dim(0) * x.dim(1), plane = rows ? x.size() / rows : 0;
  const int32_t xzp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetInt(0)) : 0;
  std::vector<int32_t> sums(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t s = 0;
    for (int64_t i = 0; i < plane; ++i) s += ByteValue(x, r * plane + i);
    sums[r] = s - xzp * static_cast<int32_t>(plane);
  }
  FixedMultipliers f{{0}, {0}};
  kiln_requant_multiplier(PoolRequantMultiplier(ctx.input(1), ctx.input(3), plane), &f.mult[0],
                          &f.shift[0]);
  const int32_t yz = ctx.has_input(4) ? static_cast<int32_t>(ctx.input(4).GetInt(0)) : 0;
  RequantizeFixedRows(1, sums.data(), rows, 1, f, true, yz, ctx.output(0));
  return OkStatus();
}

// com.kiln QLinearAdd, fuse-qdq's Q(Add(DQ(a), DQ(b))) of two tensors of one shape (the inputs of
// com.microsoft's: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point):
// TFLite's integer Add (kernels/reference/qadd.c), as the generated C does.
Status QLinearAddInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 7) return ctx.error("needs at least 7 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(3)))
    return ctx.error("A and B must be int8 or uint8");
  if (ctx.input_dims(0) != ctx.input_dims(3)) return ctx.error("A and B must have one shape");
  const DType yt = ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("C_zero_point must be int8 or uint8");
  ctx.set_output(0, yt, ctx.input_dims(0));
  return OkStatus();
}

Status QLinearAddCompute(ComputeContext& ctx) {
  for (int i : {1, 2, 4, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input(i).size() != 1)
      return ctx.error("the scales and zero points must be scalars");
  const Tensor &a = ctx.input(0), &b = ctx.input(3);
  if (a.dims() != b.dims()) return ctx.error("A and B must have one shape");
  auto zero = [&](int i) {
    return ctx.has_input(i) ? static_cast<int32_t>(ctx.input(i).GetInt(0)) : 0;
  };
  Tensor& y = ctx.output(0);
  const bool is_signed = y.dtype() == DType::kInt8;
  const kiln_qadd_params p = kiln_qadd_params_of(
      ctx.input(1).GetDouble(0), zero(2), ctx.input(4).GetDouble(0), zero(5),
      ctx.input(6).GetDouble(0), zero(7), is_signed ? -128 : 0, is_signed ? 127 : 255);
  if (a.dtype() != b.dtype()) {
    auto* out = static_cast<uint8_t*>(y.raw());
    for (int64_t i = 0; i < a.size(); ++i)
      out[i] = static_cast<uint8_t>(kiln_qadd(ByteValue(a, i), ByteValue(b, i), &p));
    return OkStatus();
  }
  QAdd(a.raw(), b.raw(), a.dtype() == DType::kInt8, a.size(), p, y.raw());
  return OkStatus();
}

}  // namespace

void RegisterQuantizeIntegerOps(OpRegistry& r) {
  r.Register("MatMulInteger", MatMulIntegerInfer, MatMulIntegerCompute);
  r.Register("QLinearMatMul", QLinearMatMulInfer, QLinearMatMulCompute);
  r.Register("ConvInteger", ConvIntegerInfer, ConvIntegerCompute);
  r.Register("QLinearConv", QLinearConvInfer, QLinearConvCompute);
  r.Register("QLinearMatMul", QLinearMatMulInfer, QLinearMatMulCompute, kKilnDomain);
  r.Register("QLinearConv", QLinearConvInfer, QLinearConvCompute, kKilnDomain);
  r.Register("QLinearGlobalAveragePool", QLinearGlobalAveragePoolInfer,
             QLinearGlobalAveragePoolCompute, kKilnDomain);
  r.Register("QLinearAdd", QLinearAddInfer, QLinearAddCompute, kKilnDomain);
}

}  // namespace kiln::ops
