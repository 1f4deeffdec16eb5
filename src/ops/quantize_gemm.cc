#include "ops/quantize_gemm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dnnl/conv_int8_dnnl.h"
#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/quantize_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "ops/qconv_direct.h"
#include "ops/quantize.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {
namespace {

// Sums of up to this many 8-bit products stay inside int32 (255 * 255 * 33025 > 2^31).
constexpr int64_t kMaxDepth = 32768;

// What an integer product keeps between runs of its node: the weights as int8 columns of the
// GEMM (B transposed), their sums, and one oneDNN GEMM per group.
struct IntGemmState : NodeState {
  const void* w_from = nullptr;  // the constant weights w was made from (null: not constant)
  Dims w_dims;
  DType w_type = DType::kUndefined;
  int w_input = -1;
  int32_t w_shift = 0;           // 128 for uint8 weights
  std::vector<int8_t> w;         // [columns, depth], less w_shift
  std::vector<int32_t> col_sum;  // per column: the sum of its values in w
  // Where the product runs in float32 (Int8GemmByFloat): from each first column it is called
  // with, w's columns as the float GEMM's packed operands, one per depth chunk (made on demand).
  std::map<int64_t, std::vector<PackedB<float>>> w_packed;
  std::vector<std::unique_ptr<NodeState>> gemms;
  std::unique_ptr<NodeState> direct;  // QConvDirect's or QMatMulDirect's (none for depthwise)
  bool direct_ran = false;            // QConvDirect or QMatMulDirect took the last call
  std::string scales;                 // the scales' types and bytes `multipliers` were made from
  FixedMultipliers multipliers;
  bool ran = false;  // the GEMM took the product: the original weights are no longer read
  // A convolution on oneDNN's int8 convolution instead (DnnlConvInt8), holding the constant
  // weights of input conv_w_input once it ran.
  std::unique_ptr<NodeState> conv;
  int conv_w_input = -1;
  bool conv_ran = false, conv_holds = false;
  bool conv_refused = false;  // oneDNN had no exact kernel for it: the GEMM from then on

  bool HoldsConstant(int i) const override {
    if (conv_ran) return conv_holds && i == conv_w_input;
    return ran && i == w_input && w_from != nullptr;
  }
  std::string Kernel() const override {
    if (direct_ran) return direct ? direct->Kernel() : "kiln int8 depthwise";
    return conv_ran && conv ? conv->Kernel() : "onednn int8 gemm";
  }
};

IntGemmState* StateOf(ComputeContext& ctx, std::unique_ptr<NodeState>* local) {
  std::unique_ptr<NodeState>* slot = ctx.state() ? ctx.state() : local;
  auto* st = dynamic_cast<IntGemmState*>(slot->get());
  if (!st) {
    auto fresh = std::make_unique<IntGemmState>();
    st = fresh.get();
    *slot = std::move(fresh);
  }
  return st;
}

// Whether w is int8 with every zero point 0 (absent: 0), as QConvDirect takes it.
bool SymmetricInt8(const Tensor& w, const Tensor* w_zp) {
  if (w.dtype() != DType::kInt8) return false;
  if (!w_zp) return true;
  if (w_zp->dtype() != DType::kInt8) return false;
  const auto* z = static_cast<const int8_t*>(w_zp->raw());
  return std::all_of(z, z + w_zp->size(), [](int8_t v) { return v == 0; });
}

// Makes st->w from weights w (unless it holds this constant already): column j, position p is
// w's element at(j, p). Returns whether w is constant.
template <class F>
bool LayOut(ComputeContext& ctx, IntGemmState* st, const Tensor& w, int w_input, int64_t cols,
            int64_t depth, int64_t groups, F&& at) {
  const bool constant = ctx.input_constant(w_input);
  if (constant && st->w_from == w.raw() && st->w_dims == w.dims() && st->w_type == w.dtype() &&
      st->w_input == w_input)
    return true;
  st->w_shift = w.dtype() == DType::kUInt8 ? 128 : 0;
  st->w.resize(cols * depth);
  st->col_sum.assign(cols, 0);
  const auto* bytes = static_cast<const uint8_t*>(w.raw());
  const bool is_signed = w.dtype() == DType::kInt8;
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t p = 0; p < depth; ++p) {
      const uint8_t b = bytes[at(j, p)];
      const int32_t v = (is_signed ? static_cast<int8_t>(b) : b) - st->w_shift;
      st->w[j * depth + p] = static_cast<int8_t>(v);
      st->col_sum[j] += v;
    }
  st->w_from = constant ? w.raw() : nullptr;
  st->w_dims = w.dims();
  st->w_type = w.dtype();
  st->w_input = w_input;
  st->w_packed.clear();
  if (constant) st->gemms.clear();  // their packed copies are of the old bytes
  st->gemms.resize(groups);
  return constant;
}

// Depth of the float32 products of Int8GemmByFloat: an 8-bit value times an int8 weight is at
// most 255 * 128 in magnitude, so every partial sum of up to 512 of them is an integer under
// 2^24, which float32 holds exactly whatever the order of the additions.
constexpr int64_t kFloatExactDepth = 512;

// out [M, N] = A [M, K] (uint8, or int8 where a_signed) times N int8 columns of st (w, [columns,
// K]) from first_col, exactly, through the float32 GEMM in depth chunks of kFloatExactDepth summed
// in int32: for CPUs without an instruction that sums 8-bit products exactly (VNNI), where oneDNN
// declines (the AVX2 pair-sum instruction saturates in int16) and the general loop ran 6-14x slower
// than ONNX Runtime.
void Int8GemmByFloat(IntGemmState* st, int64_t M, int64_t N, int64_t K, const uint8_t* a,
                     bool a_signed, int32_t* out, int threads, int64_t first_col = 0) {
  const int64_t kc_max = std::min(K, kFloatExactDepth);
  std::vector<PackedB<float>>& packed = st->w_packed[first_col];
  if (packed.empty() || packed[0].N != N || packed[0].K != kc_max) {
    packed.clear();
    std::vector<float> cols(static_cast<size_t>(N * kc_max));  // [N][kc] of the chunk
    for (int64_t k0 = 0; k0 < K; k0 += kFloatExactDepth) {
      const int64_t kc = std::min(kFloatExactDepth, K - k0);
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(st->w.data() + (first_col + n) * K + k0, kc, cols.data() + n * kc);
      packed.push_back(PackGemmB<float>(kc, N, cols.data(), 1, kc));
    }
  }
  float* af = Scratch<float>(ScratchSlot::kIntAsFloatA, static_cast<size_t>(M * kc_max));
  float* cf = Scratch<float>(ScratchSlot::kIntAsFloatC, static_cast<size_t>(M * N));
  for (int64_t k0 = 0; k0 < K; k0 += kFloatExactDepth) {
    const int64_t kc = std::min(kFloatExactDepth, K - k0);
    ParallelFor(threads, M, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* src = a + r * K + k0;
        float* dst = af + r * kc;
        if (a_signed) {
          for (int64_t k = 0; k < kc; ++k) dst[k] = static_cast<int8_t>(src[k]);
        } else {
          for (int64_t k = 0; k < kc; ++k) dst[k] = src[k];
        }
      }
    });
    PackedGemm<float>(M, af, kc, 1, packed[k0 / kFloatExactDepth], cf, N, false, threads);
    const bool first = k0 == 0;
    ParallelFor(threads, M, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * N; i < r1 * N; ++i)
        out[i] = (first ? 0 : out[i]) + static_cast<int32_t>(cf[i]);
    });
  }
}

// The zero points of w's columns as the GEMM sees them (less w_shift).
std::vector<int32_t> ColumnZeroPoints(const IntGemmState& st, const Tensor* zp, int64_t cols) {
  std::vector<int32_t> z(cols);
  for (int64_t j = 0; j < cols; ++j) z[j] = ZeroPointAt(zp, j) - st.w_shift;
  return z;
}

// Adds the zero-point terms to acc [rows, cols], each row's sum read from A [rows, depth].
void ApplyZeroPoints(int threads, const uint8_t* a, bool a_signed, int64_t rows, int64_t depth,
                     const int32_t* row_zp, const int32_t* col_zp, const int32_t* col_sum,
                     const int32_t* bias, int32_t* acc, int64_t cols) {
  const int t = static_cast<int>(std::min<int64_t>(threads, rows * cols / (32 << 10) + 1));
  // The row sums only meet nonzero column zero points (symmetric int8 weights have none).
  const bool sums = std::any_of(col_zp, col_zp + cols, [](int32_t z) { return z != 0; });
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> u(r1 - r0, 0);
    if (sums) {
      RowSums8(a + r0 * depth, a_signed, r1 - r0, depth, depth, u.data());
      for (int64_t i = 0; i < r1 - r0; ++i) u[i] -= static_cast<int32_t>(depth) * row_zp[r0 + i];
    }
    AddZeroPointTerms(acc + r0 * cols, r1 - r0, cols, u.data(), row_zp + r0, col_zp, col_sum, bias);
  });
}

// Whether a convolution that QConvDirect takes runs faster on oneDNN's, where oneDNN's int8
// kernels are exact: those of at least a few million multiply-adds (a call), depthwise ones
// aside. Below that the call's fixed costs (layouts in and out, AMX's tile setup) outweigh the
// faster kernel: on AMX, MobileNet's pointwise layers of 0.3-0.6 M took 0.06-0.08 ms there and
// 0.02-0.04 on QConvDirect's VNNI kernels. On AVX-512 VNNI without AMX (Zen 5) oneDNN's kernels
// took 3x3 64 -> 64 on 56 x 56 from 0.80 to 0.39 ms and ResNet-8 from 0.28 to 0.13 ms, its
// 1 M layers included.
bool PreferDnnl(const ConvGeom& g) {
  const DnnlInt8 kernels = DnnlInt8Kernels();
  if ((g.c == g.group && g.m == g.group) || kernels == DnnlInt8::kInexact) return false;
  const int64_t min_work = kernels == DnnlInt8::kAmx ? int64_t{1} << 21 : int64_t{1} << 20;
  const ConvPlane q = PlaneOf(g);
  return g.n * q.oh * q.ow * g.m * (g.c / g.group) * q.kh * q.kw >= min_work;
}

// The convolution on oneDNN's int8 convolution kernels, where they take it (1-D or 2-D, a CPU
// with VNNI).
bool ConvByDnnl(ComputeContext& ctx, IntGemmState* st, const ConvGeom& g, const ConvPlane& q,
                const Tensor& x, int32_t x_zp, const Tensor& w, const Tensor* w_zp,
                const Tensor* bias, int w_input, int32_t* out) {
  if (st->conv_refused || (bias && bias->dtype() != DType::kInt32)) return false;
  const bool w_unsigned = w.dtype() == DType::kUInt8;
  std::vector<int32_t> zp(g.m);
  bool any_zp = false;
  for (int64_t j = 0; j < g.m; ++j) {
    zp[j] = ZeroPointAt(w_zp, j) - (w_unsigned ? 128 : 0);
    any_zp = any_zp || zp[j] != 0;
  }
  // Ungrouped ones take the whole batch at once; grouped ones an image at a time.
  const int64_t batch = g.group == 1 ? g.n : 1;
  const Int8ConvShape s{.n = batch,
                        .c = g.c,
                        .m = g.m,
                        .group = g.group,
                        .h = q.h,
                        .w = q.w,
                        .kh = q.kh,
                        .kw = q.kw,
                        .sh = q.sh,
                        .sw = q.sw,
                        .dh = q.dh,
                        .dw = q.dw,
                        .ph = q.ph,
                        .pw = q.pw,
                        .oh = q.oh,
                        .ow = q.ow,
                        .x_signed = x.dtype() == DType::kInt8,
                        .has_bias = bias != nullptr,
                        .w_unsigned = w_unsigned,
                        .w_zero_points = any_zp};
  const bool constant = ctx.input_constant(w_input);
  const int64_t image = g.c * q.h * q.w, pixels = q.oh * q.ow;
  auto* nhwc = Scratch<uint8_t>(ScratchSlot::kPadded, batch * image);
  for (int64_t img = 0; img < g.n; img += batch) {
    const auto* src = static_cast<const uint8_t*>(x.raw()) + img * image;
    moves::StridedCopy({batch, q.h * q.w, g.c}, {image, 1, q.h * q.w}, 0, src, nhwc, 1,
                       ctx.threads());
    if (!DnnlConvInt8(s, nhwc, x_zp, w.raw(), constant, zp.data(),
                      bias ? bias->data<int32_t>() : nullptr, out + img * g.m * pixels,
                      ctx.threads(), &st->conv)) {
      st->conv_refused = true;
      return false;
    }
    st->conv_ran = true;
    st->conv_holds = constant;
    st->conv_w_input = w_input;
  }
  return true;
}

// col [pixels, taps * cg]: each output pixel's window over channels [c0, c0 + cg) of a
// channels-last image, tap by tap, `pad` where the window leaves the image.
void Im2Col(const ConvPlane& q, const uint8_t* nhwc, int64_t c, int64_t c0, int64_t cg, uint8_t pad,
            uint8_t* col, int threads) {
  const int64_t depth = q.kh * q.kw * cg;
  const int t = static_cast<int>(std::min<int64_t>(threads, q.oh * q.ow * depth / (64 << 10) + 1));
  ParallelFor(t, q.oh, [&](int64_t y0, int64_t y1) {
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = 0; ox < q.ow; ++ox) {
        uint8_t* dst = col + (oy * q.ow + ox) * depth;
        for (int64_t i = 0; i < q.kh; ++i) {
          const int64_t iy = oy * q.sh - q.ph + i * q.dh;
          for (int64_t j = 0; j < q.kw; ++j, dst += cg) {
            const int64_t ix = ox * q.sw - q.pw + j * q.dw;
            if (iy >= 0 && iy < q.h && ix >= 0 && ix < q.w)
              std::memcpy(dst, nhwc + (iy * q.w + ix) * c + c0, cg);
            else
              std::memset(dst, pad, cg);
          }
        }
      }
  });
}

// A depthwise convolution (one input and one output channel per group), channel by channel over
// threads: every tap's products added along output rows in float32, exact while the taps are
// at most 256 (|(x - x_zp)(w - w_zp)| <= 255 * 255, 256 of them under 2^24). The general loop
// took 14x ONNX Runtime's time.
bool IntDepthwise(const ConvGeom& g, const ConvPlane& q, const Tensor& x, int32_t x_zp,
                  const Tensor& w, const Tensor* w_zp, const Tensor* bias, int32_t* out,
                  int threads) {
  if (g.group != g.c || g.m != g.c || q.kh * q.kw > 256) return false;
  const bool x_signed = x.dtype() == DType::kInt8, w_signed = w.dtype() == DType::kInt8;
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  const auto* wb = static_cast<const uint8_t*>(w.raw());
  const int64_t taps = q.kh * q.kw, planes = g.n * g.c;
  ParallelFor(threads, planes, [&](int64_t p0, int64_t p1) {
    float* xf = Scratch<float>(ScratchSlot::kIntAsFloatA, static_cast<size_t>(q.h * q.w));
    float* acc = Scratch<float>(ScratchSlot::kIntAsFloatC, static_cast<size_t>(q.ow + taps));
    float* wt = acc + q.ow;
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t ch = plane % g.c;
      const uint8_t* src = xb + plane * q.h * q.w;
      for (int64_t i = 0; i < q.h * q.w; ++i)
        xf[i] = static_cast<float>((x_signed ? static_cast<int8_t>(src[i]) : src[i]) - x_zp);
      const int32_t zw = ZeroPointAt(w_zp, ch);
      for (int64_t t = 0; t < taps; ++t) {
        const uint8_t b = wb[ch * taps + t];
        wt[t] = static_cast<float>((w_signed ? static_cast<int8_t>(b) : b) - zw);
      }
      const int32_t b0 = bias ? static_cast<int32_t>(bias->GetInt(ch)) : 0;
      int32_t* dst = out + plane * q.oh * q.ow;
      for (int64_t oy = 0; oy < q.oh; ++oy) {
        std::fill_n(acc, q.ow, 0.0f);
        for (int64_t kh = 0; kh < q.kh; ++kh) {
          const int64_t iy = oy * q.sh - q.ph + kh * q.dh;
          if (iy < 0 || iy >= q.h) continue;  // padding holds x_zp: it adds nothing
          const float* row = xf + iy * q.w;
          for (int64_t kw = 0; kw < q.kw; ++kw) {
            const float wv = wt[kh * q.kw + kw];
            const int64_t off = kw * q.dw - q.pw;
            // Output columns whose input column ox * sw + off lies inside the row.
            const int64_t lo = off >= 0 ? 0 : (-off + q.sw - 1) / q.sw;
            const int64_t hi = std::min(q.ow, q.w - off <= 0 ? 0 : (q.w - off - 1) / q.sw + 1);
            if (q.sw == 1) {
              for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += row[ox + off] * wv;
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += row[ox * q.sw + off] * wv;
            }
          }
        }
        for (int64_t ox = 0; ox < q.ow; ++ox)
          dst[oy * q.ow + ox] = static_cast<int32_t>(acc[ox]) + b0;
      }
    }
  });
  return true;
}

}  // namespace

bool IntConvRequantized(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t x_zp,
                        const Tensor& w, const Tensor* w_zp, const Tensor* bias, int w_input,
                        const QConvOutput& out) {
  if (!SymmetricInt8(w, w_zp) || PreferDnnl(g)) return false;
  std::unique_ptr<NodeState> local;
  IntGemmState* st = StateOf(ctx, &local);
  st->direct_ran = QConvDirect(g, x, x_zp, w, ctx.input_constant(w_input), bias, ctx.threads(),
                               &st->direct, out);
  return st->direct_ran;
}

FixedMultipliers NodeMultipliers(ComputeContext& ctx, const Tensor& xs, const Tensor& ws,
                                 const Tensor& ys, int64_t channels) {
  std::unique_ptr<NodeState> local;
  IntGemmState* st = StateOf(ctx, &local);
  // The scales as the state holds them: each one's type, then its bytes.
  size_t at = 0;
  bool same = static_cast<int64_t>(st->multipliers.mult.size()) == channels;
  for (const Tensor* t : {&xs, &ws, &ys}) {
    same = same && at + 1 + t->nbytes() <= st->scales.size() &&
           st->scales[at] == static_cast<char>(t->dtype()) &&
           std::memcmp(st->scales.data() + at + 1, t->raw(), t->nbytes()) == 0;
    at += 1 + t->nbytes();
  }
  if (!same || at != st->scales.size()) {
    std::string key;
    for (const Tensor* t : {&xs, &ws, &ys}) {
      key += static_cast<char>(t->dtype());
      key.append(static_cast<const char*>(t->raw()), t->nbytes());
    }
    FixedMultipliers& f = st->multipliers;
    f.mult.resize(channels);
    f.shift.resize(channels);
    for (int64_t c = 0; c < channels; ++c)
      kiln_requant_multiplier(RequantMultiplier(xs, 0, ws, ws.size() == 1 ? 0 : c, ys), &f.mult[c],
                              &f.shift[c]);
    st->scales = std::move(key);
  }
  return st->multipliers;
}

ConvPlane PlaneOf(const ConvGeom& g) {
  const bool two = g.in.size() == 2;
  const size_t l = g.in.size() - 1;
  return {two ? g.in[0] : 1,         g.in[l],         two ? g.kernel[0] : 1,    g.kernel[l],
          two ? g.strides[0] : 1,    g.strides[l],    two ? g.dilations[0] : 1, g.dilations[l],
          two ? g.pads_begin[0] : 0, g.pads_begin[l], two ? g.out[0] : 1,       g.out[l]};
}

bool IntMatMulByGemm(ComputeContext& ctx, const Tensor& a, const Tensor* a_zp, int64_t m,
                     const Tensor& b, const Tensor* b_zp, int b_input, int32_t* out) {
  if (b.rank() != 2 || a.rank() < 1) return false;
  const int64_t k = b.dim(0), n = b.dim(1);
  if (k == 0 || n == 0 || k > kMaxDepth || a.size() == 0) return false;
  if ((a_zp && a_zp->size() != 1 && a_zp->size() != m) ||
      (b_zp && b_zp->size() != 1 && b_zp->size() != n))
    return false;  // the general path says why
  const int64_t rows = a.size() / k;
  std::unique_ptr<NodeState> local;
  IntGemmState* st = StateOf(ctx, &local);
  st->direct_ran = SymmetricInt8(b, b_zp) && (!a_zp || a_zp->size() == 1) &&
                   QMatMulDirect(a, a_zp ? static_cast<int32_t>(a_zp->GetInt(0)) : 0, b,
                                 ctx.input_constant(b_input), &st->direct, out);
  if (st->direct_ran) return true;
  const bool constant =
      LayOut(ctx, st, b, b_input, n, k, 1, [&](int64_t j, int64_t p) { return p * n + j; });
  const bool a_signed = a.dtype() == DType::kInt8;
  if (!DnnlGemmInt8(rows, n, k, a.raw(), a_signed, st->w.data(), true, constant, out, ctx.threads(),
                    &st->gemms[0]))
    Int8GemmByFloat(st, rows, n, k, static_cast<const uint8_t*>(a.raw()), a_signed, out,
                    ctx.threads());
  st->ran = true;
  std::vector<int32_t> row_zp(rows);
  for (int64_t r = 0; r < rows; ++r) row_zp[r] = ZeroPointAt(a_zp, r % m);
  const std::vector<int32_t> col_zp = ColumnZeroPoints(*st, b_zp, n);
  ApplyZeroPoints(ctx.threads(), static_cast<const uint8_t*>(a.raw()), a_signed, rows, k,
                  row_zp.data(), col_zp.data(), st->col_sum.data(), nullptr, out, n);
  return true;
}

bool IntConvByGemm(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t x_zp,
                   const Tensor& w, const Tensor* w_zp, const Tensor* bias, int w_input,
                   int32_t* out) {
  if (g.in.size() < 1 || g.in.size() > 2) return false;
  const ConvPlane q = PlaneOf(g);
  const int64_t cg = g.c / g.group, mg = g.m / g.group, taps = q.kh * q.kw;
  const int64_t depth = cg * taps, pixels = q.oh * q.ow;
  if (depth > kMaxDepth || pixels == 0 || g.n == 0) return false;
  if ((w_zp && w_zp->size() != 1 && w_zp->size() != g.m) || (bias && bias->size() != g.m))
    return false;
  std::unique_ptr<NodeState> local;
  IntGemmState* st = StateOf(ctx, &local);
  QConvOutput sums;
  sums.sums = out;
  st->direct_ran = SymmetricInt8(w, w_zp) && !PreferDnnl(g) &&
                   QConvDirect(g, x, x_zp, w, ctx.input_constant(w_input), bias, ctx.threads(),
                               &st->direct, sums);
  if (st->direct_ran) return true;
  if (ConvByDnnl(ctx, st, g, q, x, x_zp, w, w_zp, bias, w_input, out)) return true;
  auto* nhwc = Scratch<uint8_t>(ScratchSlot::kPadded, q.h * q.w * g.c);
  if (IntDepthwise(g, q, x, x_zp, w, w_zp, bias, out, ctx.threads())) return true;
  // Few output channels per group or a short window: the general loop.
  if (mg < 4 || depth < 4) return false;
  const bool constant = LayOut(ctx, st, w, w_input, g.m, depth, g.group, [&](int64_t j, int64_t p) {
    return (j * cg + p % cg) * taps + p / cg;
  });
  const bool direct = taps == 1 && q.sh == 1 && q.sw == 1 && q.ph == 0 && q.pw == 0 &&
                      q.oh == q.h && q.ow == q.w && g.group == 1;
  const int threads = ctx.threads();
  auto* col = direct ? nhwc : Scratch<uint8_t>(ScratchSlot::kConvColumns, pixels * depth);
  auto* acc = Scratch<int32_t>(ScratchSlot::kQuantConvSums, pixels * mg);
  const std::vector<int32_t> col_zp = ColumnZeroPoints(*st, w_zp, g.m);
  std::vector<int32_t> bias_v(bias ? g.m : 0), row_zp(pixels, x_zp);
  for (int64_t j = 0; j < static_cast<int64_t>(bias_v.size()); ++j)
    bias_v[j] = static_cast<int32_t>(bias->GetInt(j));
  const bool x_signed = x.dtype() == DType::kInt8;
  for (int64_t img = 0; img < g.n; ++img) {
    const auto* src = static_cast<const uint8_t*>(x.raw()) + img * g.c * q.h * q.w;
    moves::StridedCopy({q.h * q.w, g.c}, {1, q.h * q.w}, 0, src, nhwc, 1, threads);
    for (int64_t gr = 0; gr < g.group; ++gr) {
      if (!direct) Im2Col(q, nhwc, g.c, gr * cg, cg, static_cast<uint8_t>(x_zp), col, threads);
      if (!DnnlGemmInt8(pixels, mg, depth, col, x_signed, st->w.data() + gr * mg * depth, true,
                        constant, acc, threads, &st->gemms[gr]))
        Int8GemmByFloat(st, pixels, mg, depth, col, x_signed, acc, threads, gr * mg);
      st->ran = true;
      ApplyZeroPoints(threads, col, x_signed, pixels, depth, row_zp.data(), col_zp.data() + gr * mg,
                      st->col_sum.data() + gr * mg, bias ? bias_v.data() + gr * mg : nullptr, acc,
                      mg);
      moves::StridedCopy({mg, pixels}, {1, mg}, 0, acc, out + (img * g.m + gr * mg) * pixels, 4,
                         threads);
    }
  }
  return true;
}

}  // namespace kiln::ops
