// Pooling family: MaxPool (with Indices), AveragePool, LpPool, their Global forms, MaxUnpool,
// MaxRoiPool and RoiAlign. Windows follow the shared conv geometry (ceil_mode, auto_pad,
// dilations); 1-D and 2-D pools run as 3-D ones with leading unit dims.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/layout_kernels.h"
#include "kernels/x86/pool_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/channels_last.h"
#include "ops/common.h"
#include "ops/conv_geometry.h"
#include "ops/roi_align_plan.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {
namespace {

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

enum class PoolKind { kMax, kAvg, kLp };

// The k range [lo, hi) of a window starting at `start` (dilation d, K taps) that lands in [0, n).
inline void TapRange(int64_t start, int64_t d, int64_t K, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = start >= 0 ? 0 : (-start + d - 1) / d;
  *hi = n - 1 - start < 0 ? 0 : std::min(K, (n - 1 - start) / d + 1);
  if (*hi < *lo) *hi = *lo;
}

std::string PoolGeomOf(const ir::Node& node, const Dims& x, bool use_dilation, WindowGeom* g) {
  if (x.size() < 3) return "X must have rank 3 or more (N, C, spatial...), got " + DimsToString(x);
  if (x.size() > 5) return "more than 3 spatial dims are not supported";
  Dims kernel = node.attr_ints("kernel_shape");
  if (kernel.empty()) return "kernel_shape is required";
  return ComputeWindowGeom(node, Spatial(x), kernel, use_dilation,
                           node.attr_int("ceil_mode", 0) != 0, g);
}

Status PoolInfer(InferContext& ctx, PoolKind kind) {
  if (!ctx.has_input(0)) return ctx.error("needs input X");
  DType dt = ctx.input_dtype(0);
  bool int_ok = kind == PoolKind::kMax && (dt == DType::kInt8 || dt == DType::kUInt8);
  if (!IsFloatType(dt) && !int_ok)
    return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  WindowGeom g;
  // AveragePool has dilations from opset 19; LpPool from 18; MaxPool from 10.
  std::string err = PoolGeomOf(ctx.node(), ctx.input_dims(0), true, &g);
  if (!err.empty()) return ctx.error(err);
  if (kind == PoolKind::kMax && ctx.node().attr_int("storage_order", 0) > 1)
    return ctx.error("storage_order must be 0 or 1");
  Dims out = {ctx.input_dims(0)[0], ctx.input_dims(0)[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, dt, out);
  if (ctx.num_outputs() > 1) {
    if (kind != PoolKind::kMax) return ctx.error("has too many outputs");
    ctx.set_output(1, DType::kInt64, out);
  }
  return OkStatus();
}

// |v|^p and its sum's 1/p-th power, with the p that models use without a call to pow.
template <class C>
C LpTerm(C v, double p) {
  if (p == 2.0) return v * v;
  if (p == 1.0) return static_cast<C>(std::fabs(static_cast<double>(v)));
  return static_cast<C>(std::pow(std::fabs(static_cast<double>(v)), p));
}
template <class C>
C LpRoot(C sum, double p) {
  if (p == 2.0) return static_cast<C>(std::sqrt(static_cast<double>(sum)));
  if (p == 1.0) return sum;
  return static_cast<C>(std::pow(static_cast<double>(sum), 1.0 / p));
}

// Planes [plane0, plane0 + planes) of the pool, x and y pointing at plane0's (indices too).
template <class T>
void PoolCore(const T* x, T* y, int64_t* indices, int64_t plane0, int64_t planes, const Geom3& g,
              PoolKind kind, bool count_include_pad, double p, bool col_major) {
  using C = Acc<T>;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], in_size = g.in_size();
  // Each output column's taps inside the row, found once (two divisions each).
  std::vector<int64_t> wlo(static_cast<size_t>(g.out[2])), whi(wlo.size());
  for (int64_t ow = 0; ow < g.out[2]; ++ow)
    TapRange(ow * g.s[2] - g.p[2], g.d[2], g.k[2], W, &wlo[ow], &whi[ow]);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xc = x + pl * in_size;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t sd = od * g.s[0] - g.p[0];
      int64_t d0, d1;
      TapRange(sd, g.d[0], g.k[0], D, &d0, &d1);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t sh = oh * g.s[1] - g.p[1];
        int64_t h0, h1;
        TapRange(sh, g.d[1], g.k[1], H, &h0, &h1);
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++y) {
          const int64_t sw = ow * g.s[2] - g.p[2], w0 = wlo[ow], w1 = whi[ow];
          if (kind == PoolKind::kMax && !indices) {
            // The rule below without branches: the maximum of the taps that are not NaN (a
            // maxss each), NaN when every tap is, -inf when there is none.
            C best = std::numeric_limits<C>::lowest();
            if constexpr (std::numeric_limits<C>::has_infinity)
              best = -std::numeric_limits<C>::infinity();
            bool number = false;
            for (int64_t kd = d0; kd < d1; ++kd)
              for (int64_t kh = h0; kh < h1; ++kh) {
                const T* row = xc + ((sd + kd * g.d[0]) * H + sh + kh * g.d[1]) * W + sw;
                for (int64_t kw = w0; kw < w1; ++kw) {
                  const C v = static_cast<C>(row[kw * g.d[2]]);
                  best = v > best ? v : best;
                  number |= v == v;
                }
              }
            const bool taps = d1 > d0 && h1 > h0 && w1 > w0;
            *y = static_cast<T>(number || !taps ? best : std::numeric_limits<C>::quiet_NaN());
          } else if (kind == PoolKind::kMax) {
            C best = std::numeric_limits<C>::lowest();
            if constexpr (std::numeric_limits<C>::has_infinity)
              best = -std::numeric_limits<C>::infinity();
            int64_t arg = -1;
            for (int64_t kd = d0; kd < d1; ++kd) {
              const int64_t id = sd + kd * g.d[0];
              for (int64_t kh = h0; kh < h1; ++kh) {
                const int64_t ih = sh + kh * g.d[1];
                const T* row = xc + (id * H + ih) * W;
                for (int64_t kw = w0; kw < w1; ++kw) {
                  const int64_t iw = sw + kw * g.d[2];
                  C v = static_cast<C>(row[iw]);
                  if (v > best || arg < 0 || best != best) {  // NaN is skipped unless all are NaN
                    best = v;
                    arg = col_major ? id + ih * D + iw * D * H : (id * H + ih) * W + iw;
                  }
                }
              }
            }
            *y = static_cast<T>(best);
            if (indices) *indices++ = arg < 0 ? -1 : (plane0 + pl) * in_size + arg;
          } else {
            Acc<T> sum = 0;
            for (int64_t kd = d0; kd < d1; ++kd) {
              const int64_t id = sd + kd * g.d[0];
              for (int64_t kh = h0; kh < h1; ++kh) {
                const T* row = xc + (id * H + sh + kh * g.d[1]) * W;
                for (int64_t kw = w0; kw < w1; ++kw) {
                  C v = static_cast<C>(row[sw + kw * g.d[2]]);
                  if (kind == PoolKind::kAvg)
                    sum += v;
                  else
                    sum += LpTerm(v, p);
                }
              }
            }
            if (kind == PoolKind::kLp) {
              *y = static_cast<T>(LpRoot(sum, p));
              continue;
            }
            int64_t count;
            if (count_include_pad) {  // taps inside the padded extent [-pad_begin, n + pad_end)
              count = 1;
              const int64_t starts[3] = {sd, sh, sw};
              for (int j = 0; j < 3; ++j) {
                int64_t lo, hi;
                TapRange(starts[j] + g.p[j], g.d[j], g.k[j], g.in[j] + g.p[j] + g.pe[j], &lo, &hi);
                count *= hi - lo;
              }
            } else {
              count = (d1 - d0) * (h1 - h0) * (w1 - w0);
            }
            *y = static_cast<T>(count > 0 ? static_cast<C>(sum / static_cast<C>(count))
                                          : std::numeric_limits<C>::quiet_NaN());
          }
        }
      }
    }
  }
}

// NCHW maps with output rows shorter than this pool 16 channels at a time through the
// channels-last kernel, its vectors along the channels, instead of along rows too short to fill
// one (a 2x2 MaxPool over 512 channels of 14 x 14 ran 9x slower than ONNX Runtime).
constexpr int64_t kShortRows = 32;

// Plane c of x starts at x + c * x_stride, plane c of y at y + c * y_stride (a 3-D pool's depth
// slices: 0 means dense).
void PoolChannelBlocks(const Pool2DShape& s, PoolFlavor flavor, const float* x, float* y,
                       int threads, int64_t x_stride = 0, int64_t y_stride = 0) {
  constexpr int64_t kBlock = 16;
  const int64_t hw = s.H * s.W, ohw = s.OH * s.OW, blocks = (s.planes + kBlock - 1) / kBlock;
  if (x_stride == 0) x_stride = hw;
  if (y_stride == 0) y_stride = ohw;
  Pool2DShape block = s;
  block.planes = kBlock;
  const int64_t work = blocks * (hw + ohw * s.KH * s.KW) * kBlock;
  const int t = static_cast<int>(std::min<int64_t>({threads, blocks, work / (1 << 16) + 1}));
  ParallelFor(t, blocks, [&](int64_t b0, int64_t b1) {
    const auto in = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(hw * kBlock));
    const auto out = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(ohw * kBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = b * kBlock, n = std::min(kBlock, s.planes - c0);
      if (n == kBlock) {  // a transpose of [kBlock, hw], by register tiles
        moves::StridedCopy({hw, kBlock}, {1, x_stride}, 0, x + c0 * x_stride, in.get(),
                           sizeof(float));
      } else {  // the last block: its other channels repeat its last one
        for (int64_t p = 0; p < hw; ++p)
          for (int64_t c = 0; c < kBlock; ++c)
            in[p * kBlock + c] = x[(c0 + std::min(c, n - 1)) * x_stride + p];
      }
      ChannelsLastPool2D(block, 1, flavor, in.get(), out.get(), 1);
      if (y_stride == ohw) {
        moves::StridedCopy({n, ohw}, {1, kBlock}, 0, out.get(), y + c0 * ohw, sizeof(float));
        continue;
      }
      moves::StridedCopy({n, ohw}, {1, kBlock}, 0, out.get(), in.get(), sizeof(float));
      for (int64_t c = 0; c < n; ++c) std::copy_n(in.get() + c * ohw, ohw, y + (c0 + c) * y_stride);
    }
  });
}

// The max pool's planes marked in `bad` (a -inf maximum, MaxPool2D's contract) by the window
// loop, which tells an all-NaN window (NaN) from an all -inf one.
void RedoMaxPlanes(const float* x, float* y, const Geom3& g, const bool* bad, int64_t planes) {
  for (int64_t pl = 0; pl < planes; ++pl)
    if (bad[pl])
      PoolCore<float>(x + pl * g.in_size(), y + pl * g.out_size(), nullptr, pl, 1, g,
                      PoolKind::kMax, false, 2.0, false);
}

// A float32 3-D max pool, or average pool without dilation in height and width, as the box it is:
// for each output depth, the input slices of its depth taps combined element by element (their
// maximum, NaN skipped unless all are; or their sum) while they are in cache, then the 2-D pool
// of that one slice on the fast kernels, 16 planes at a time through the channels-last kernel
// where rows are short. An average's count is the product of its per-axis counts, so the 3-D
// average is the 2-D average of the depth sums over the depth count (with count_include_pad the
// padding taps count in both). A maximum whose result is -inf is recomputed by the window loop,
// which tells an all-NaN window from an all -inf one. x [planes, D, H, W] -> y [planes, OD, OH,
// OW].
void SeparablePool3D(const float* x, float* y, int64_t planes, const Geom3& g, PoolKind kind,
                     bool count_include_pad, int threads) {
  const int64_t D = g.in[0], OD = g.out[0], hw_in = g.in[1] * g.in[2], hw = g.out[1] * g.out[2];
  const bool dilated = g.d[1] > 1 || g.d[2] > 1;  // a max pool's (MaxPool2D takes them)
  const bool blocked = g.out[2] < kShortRows && planes >= 16 && !dilated;
  const int64_t B = blocked ? 16 : 1, blocks = (planes + B - 1) / B;
  const Pool2DShape slice{B,      g.in[1], g.in[2], g.out[1], g.out[2], g.k[1], g.k[2], g.s[1],
                          g.s[2], g.p[1],  g.p[2],  g.pe[1],  g.pe[2],  g.d[1], g.d[2]};
  const bool max = kind == PoolKind::kMax;
  const PoolFlavor flavor = max                 ? PoolFlavor::kMax
                            : count_include_pad ? PoolFlavor::kAvgIncludePad
                                                : PoolFlavor::kAvgExcludePad;
  // Per output slice r (plane r / OD when not blocked): MaxPool2D's -inf flag.
  const std::unique_ptr<bool[]> bad(new bool[static_cast<size_t>(blocks * OD)]());
  const int64_t work = planes * OD * (g.k[0] * hw_in + hw * (g.k[1] + g.k[2]));
  const int parts = static_cast<int>(std::min<int64_t>(threads, work / (1 << 16) + 1));
  ParallelFor(parts, blocks * OD, [&](int64_t r0, int64_t r1) {
    const auto sum = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(B * hw_in));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c0 = r / OD * B, od = r % OD, n = std::min(B, planes - c0);
      const int64_t start = od * g.s[0] - g.p[0];
      int64_t k0, k1;
      TapRange(start, g.d[0], g.k[0], D, &k0, &k1);
      float* const o = y + (c0 * OD + od) * hw;  // plane c at o + c * OD * hw
      if (k1 <= k0) {                            // no slice inside: as the window loop gives
        for (int64_t c = 0; c < n; ++c)
          std::fill_n(o + c * OD * hw, hw,
                      max ? -std::numeric_limits<float>::infinity()
                          : std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      // The depth taps' slices combined, plane c at src + c * src_stride (one tap: the input).
      const float* src = x + (c0 * D + start + k0 * g.d[0]) * hw_in;
      int64_t src_stride = D * hw_in;
      if (k1 - k0 > 1) {
        for (int64_t c = 0; c < n; ++c) {
          const float* first = src + c * src_stride;
          float* s = sum.get() + c * hw_in;
          for (int64_t k = k0 + 1; k < k1; ++k) {
            const float* in = first + (k - k0) * g.d[0] * hw_in;
            BinaryF32(max ? VecBinOp::kMaxSkipNaN : VecBinOp::kAdd, k == k0 + 1 ? first : s, in, s,
                      hw_in);
          }
        }
        src = sum.get();
        src_stride = hw_in;
      }
      if (blocked) {
        Pool2DShape part = slice;
        part.planes = n;
        PoolChannelBlocks(part, flavor, src, o, 1, src_stride, OD * hw);
      } else if (max) {
        MaxPool2D(slice, src, o, 1, &bad[r]);
      } else {
        AveragePool2D(slice, src, o, count_include_pad, 1);
      }
      int64_t count = k1 - k0;
      if (count_include_pad) {  // depth taps inside the padded extent
        int64_t lo, hi;
        TapRange(start + g.p[0], g.d[0], g.k[0], D + g.p[0] + g.pe[0], &lo, &hi);
        count = hi - lo;
      }
      if (max || count == 1) continue;
      const float inv = 1.0f / static_cast<float>(count);
      for (int64_t c = 0; c < n; ++c)
        for (float* v = o + c * OD * hw; v < o + c * OD * hw + hw; ++v) *v *= inv;
    }
  });
  if (!max || blocked) return;
  for (int64_t pl = 0; pl < planes; ++pl)
    bad[pl] = std::any_of(&bad[pl * OD], &bad[pl * OD + OD], [](bool b) { return b; });
  RedoMaxPlanes(x, y, g, bad.get(), planes);
}

Status PoolCompute(ComputeContext& ctx, PoolKind kind) {
  const Tensor& X = ctx.input(0);
  WindowGeom wg;
  std::string err = PoolGeomOf(ctx.node(), X.dims(), true, &wg);
  if (!err.empty()) return ctx.error(err);
  const Geom3 g(wg);
  const int64_t planes = X.dims()[0] * X.dims()[1];
  int64_t* indices =
      ctx.num_outputs() > 1 && ctx.output_used(1) ? ctx.output(1).data<int64_t>() : nullptr;
  bool cip = ctx.node().attr_int("count_include_pad", 0) != 0;
  double p = ctx.node().attr_float("p", 2.0f);
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive");
  bool col_major = ctx.node().attr_int("storage_order", 0) == 1;
  const bool dilated = g.d[1] > 1 || g.d[2] > 1;  // MaxPool2D only; never channels-last
  if (X.dtype() == DType::kFloat32 && kind != PoolKind::kLp && !indices && g.in[0] == 1 &&
      g.k[0] == 1 && g.out[0] == 1 &&
      (!dilated || (kind == PoolKind::kMax && !ReferenceKernels()))) {
    const Pool2DShape ps{planes, g.in[1], g.in[2], g.out[1], g.out[2], g.k[1], g.k[2], g.s[1],
                         g.s[2], g.p[1],  g.p[2],  g.pe[1],  g.pe[2],  g.d[1], g.d[2]};
    const float* x = X.data<float>();
    float* y = ctx.output(0).data<float>();
    // One window over the whole unpadded image (ResNet's last 7x7 pool) is a global average:
    // a plain sum runs ten times faster than the windowed loops (or oneDNN's) on a 1x1 grid.
    if (kind == PoolKind::kAvg && ps.OH == 1 && ps.OW == 1 && ps.KH == ps.H && ps.KW == ps.W &&
        ps.ph == 0 && ps.pw == 0 && ps.peh == 0 && ps.pew == 0) {
      const int64_t hw = ps.H * ps.W;
      if (ctx.input_channels_last(0))
        ChannelsLastGlobalAverage(x, y, X.dims()[0], X.dims()[1], hw);
      else
        for (int64_t pl = 0; pl < planes; ++pl)
          y[pl] = SumF32(x + pl * hw, hw) / static_cast<float>(hw);
      return OkStatus();
    }
    const PoolFlavor flavor = kind == PoolKind::kMax ? PoolFlavor::kMax
                              : cip                  ? PoolFlavor::kAvgIncludePad
                                                     : PoolFlavor::kAvgExcludePad;
    if (ctx.input_channels_last(0) || ctx.output_channels_last(0)) {  // both (linked)
      ChannelsLastPool2D(ps, X.dims()[0], flavor, x, y, ctx.threads());
      return OkStatus();
    }
    if (ps.OW < kShortRows && planes >= 16 && !dilated) {
      PoolChannelBlocks(ps, flavor, x, y, ctx.threads());
      return OkStatus();
    }
    if (kind == PoolKind::kAvg) {
      AveragePool2D(ps, x, y, cip, ctx.threads());
      return OkStatus();
    }
    std::unique_ptr<bool[]> bad(new bool[static_cast<size_t>(planes)]);
    if (MaxPool2D(ps, x, y, ctx.threads(), bad.get()) > 0)
      RedoMaxPlanes(x, y, g, bad.get(), planes);
    return OkStatus();
  }
  if (X.dtype() == DType::kFloat32 && kind != PoolKind::kLp && !indices && g.out[0] > 0 &&
      (g.in[0] > 1 || g.k[0] > 1) && (!dilated || kind == PoolKind::kMax) && !ReferenceKernels()) {
    SeparablePool3D(X.data<float>(), ctx.output(0).data<float>(), planes, g, kind, cip,
                    ctx.threads());
    return OkStatus();
  }
  // The planes over the threads (the windows that the fast kernels above do not take: dilated
  // averages, Lp, integer, with indices).
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int parts = static_cast<int>(std::min<int64_t>(
      ctx.threads(), planes * out_size * g.k[0] * g.k[1] * g.k[2] / (1 << 15) + 1));
  bool ok = Dispatch<kFloatTypes | kIntTypes>(X.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t> || kIsFloat<T>) {
      ParallelFor(parts, planes, [&](int64_t p0, int64_t p1) {
        PoolCore<T>(X.data<T>() + p0 * in_size, ctx.output(0).data<T>() + p0 * out_size,
                    indices ? indices + p0 * out_size : nullptr, p0, p1 - p0, g, kind, cip, p,
                    col_major);
      });
    }
  });
  if (!ok) return ctx.error("unsupported dtype");
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Global pools

Status GlobalPoolInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs input X");
  if (!IsFloatType(ctx.input_dtype(0)))
    return ctx.error("unsupported dtype " + std::string(DTypeName(ctx.input_dtype(0))));
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("X must have rank 2 or more, got " + DimsToString(x));
  Dims out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

Status GlobalPoolCompute(ComputeContext& ctx, PoolKind kind) {
  const Tensor& X = ctx.input(0);
  if (ctx.input_channels_last(0)) {  // ops/channels_last.h: GlobalAveragePool only
    if (kind != PoolKind::kAvg || X.dtype() != DType::kFloat32 || X.rank() != 4)
      return ctx.error("channels-last pool it cannot run (a kiln bug)");
    ChannelsLastGlobalAverage(X.data<float>(), ctx.output(0).data<float>(), X.dim(0), X.dim(1),
                              X.dim(2) * X.dim(3));
    return OkStatus();
  }
  const int64_t planes = X.dims()[0] * X.dims()[1];
  const int64_t n = planes == 0 ? 0 : X.size() / planes;
  double p = ctx.node().attr_float("p", 2.0f);
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive");
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    using C = Acc<T>;
    const T* x = X.data<T>();
    T* y = ctx.output(0).data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (kind == PoolKind::kAvg && n > 0) {  // lane-wise partial sums (kernels/x86/vector_math.h)
        for (int64_t pl = 0; pl < planes; ++pl, x += n)
          y[pl] = SumF32(x, n) / static_cast<float>(n);
        return;
      }
      if (kind == PoolKind::kMax && n > 0) {  // NaN-propagating, as the loop below
        for (int64_t pl = 0; pl < planes; ++pl, x += n) y[pl] = MaxF32(x, n);
        return;
      }
    }
    for (int64_t pl = 0; pl < planes; ++pl, x += n) {
      C acc = kind == PoolKind::kMax ? -std::numeric_limits<C>::infinity() : C(0);
      for (int64_t i = 0; i < n; ++i) {
        C v = static_cast<C>(x[i]);
        if (kind == PoolKind::kMax)
          acc = v > acc || v != v ? v : acc;
        else if (kind == PoolKind::kAvg)
          acc += v;
        else
          acc += static_cast<C>(std::pow(std::fabs(static_cast<double>(v)), p));
      }
      if (kind == PoolKind::kAvg)
        acc = n > 0 ? acc / static_cast<C>(n) : std::numeric_limits<C>::quiet_NaN();
      if (kind == PoolKind::kLp) acc = static_cast<C>(std::pow(static_cast<double>(acc), 1.0 / p));
      y[pl] = static_cast<T>(acc);
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// MaxUnpool: scatters X into zeros at the flat positions given by I (as MaxPool's Indices).

std::string UnpoolDims(const ir::Node& node, const Dims& x, const Dims& i, Dims* out) {
  if (x.size() < 3) return "X must have rank 3 or more, got " + DimsToString(x);
  if (i != x) return "I must have the shape of X " + DimsToString(x) + ", got " + DimsToString(i);
  const int nd = static_cast<int>(x.size()) - 2;
  Dims kernel = node.attr_ints("kernel_shape");
  if (static_cast<int>(kernel.size()) != nd)
    return "kernel_shape must have one value per spatial dim";
  Dims strides = node.attr_ints("strides");
  if (strides.empty()) strides.assign(nd, 1);
  Dims pads = node.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (static_cast<int>(strides.size()) != nd || static_cast<int>(pads.size()) != 2 * nd)
    return "strides/pads have the wrong length";
  *out = {x[0], x[1]};
  for (int j = 0; j < nd; ++j) {
    int64_t d = strides[j] * (x[j + 2] - 1) + kernel[j] - pads[j] - pads[j + nd];
    if (d <= 0) return "output size would be empty";
    out->push_back(d);
  }
  return "";
}

Status MaxUnpoolInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs X and I");
  if (!IsFloatType(ctx.input_dtype(0))) return ctx.error("unsupported dtype");
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("I must be int64");
  Dims out;
  std::string err = UnpoolDims(ctx.node(), ctx.input_dims(0), ctx.input_dims(1), &out);
  if (!err.empty()) return ctx.error(err);
  if (ctx.has_input(2)) {
    bool known;
    Dims shape = InputInts(ctx, 2, &known);
    if (!known) {
      ctx.set_output_dynamic(0, ctx.input_dtype(0));
      return OkStatus();
    }
    if (shape.size() != out.size())
      return ctx.error("output_shape must have " + std::to_string(out.size()) + " values");
    for (int64_t d : shape)
      if (d < 0) return ctx.error("output_shape values must not be negative");
    out = shape;
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

Status MaxUnpoolCompute(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& I = ctx.input(1);
  Dims inferred;
  std::string err = UnpoolDims(ctx.node(), X.dims(), I.dims(), &inferred);
  if (!err.empty()) return ctx.error(err);
  Dims out = inferred;
  if (ctx.has_input(2)) {
    out = ctx.input(2).ToInt64Vector();
    if (out.size() != inferred.size())
      return ctx.error("output_shape must have " + std::to_string(inferred.size()) + " values");
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j] < inferred[j])
        return ctx.error("output_shape " + DimsToString(out) +
                         " is smaller than the unpooled shape " + DimsToString(inferred));
  }
  Tensor& Y = ctx.output(0).defined() && ctx.output(0).dims() == out
                  ? ctx.output(0)
                  : ctx.allocate_output(0, X.dtype(), out);
  // As the reference: indices address the unpooled shape, which then sits at the start of a
  // possibly larger output_shape.
  const int64_t total = NumElements(inferred);
  const int64_t* idx = I.data<int64_t>();
  std::memset(Y.raw(), 0, Y.nbytes());
  Status st = OkStatus();
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    std::vector<T> buf(static_cast<size_t>(total), T(0));
    const T* x = X.data<T>();
    for (int64_t i = 0; i < X.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= total) {
        st = ctx.error("index " + std::to_string(idx[i]) + " in I is outside the output of " +
                       std::to_string(total) + " elements");
        return;
      }
      buf[idx[i]] = x[i];
    }
    T* y = Y.data<T>();
    const Dims os = Strides(out);
    Dims coord(inferred.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t o = 0;
      for (size_t j = 0; j < coord.size(); ++j) o += coord[j] * os[j];
      y[o] = buf[i];
      for (int j = static_cast<int>(coord.size()) - 1; j >= 0; --j) {
        if (++coord[j] < inferred[j]) break;
        coord[j] = 0;
      }
    }
  });
  return st;
}

// ---------------------------------------------------------------------------------------------
// MaxRoiPool (Caffe/ORT rounding) and RoiAlign

Status MaxRoiPoolInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs X and rois");
  if (!IsFloatType(ctx.input_dtype(0)) || ctx.input_dtype(1) != ctx.input_dtype(0))
    return ctx.error("unsupported dtype");
  const Dims& x = ctx.input_dims(0);
  const Dims& r = ctx.input_dims(1);
  if (x.size() != 4) return ctx.error("X must have rank 4");
  if (r.size() != 2 || r[1] != 5) return ctx.error("rois must have shape [num_rois, 5]");
  Dims ps = ctx.node().attr_ints("pooled_shape");
  if (ps.size() != 2 || ps[0] <= 0 || ps[1] <= 0)
    return ctx.error("pooled_shape must hold two positive values");
  ctx.set_output(0, ctx.input_dtype(0), {r[0], x[1], ps[0], ps[1]});
  return OkStatus();
}

Status MaxRoiPoolCompute(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& R = ctx.input(1);
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3);
  Dims ps = ctx.node().attr_ints("pooled_shape");
  const int64_t PH = ps[0], PW = ps[1];
  const float scale = ctx.node().attr_float("spatial_scale", 1.0f);
  Status st = OkStatus();
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    using A = Acc<T>;
    const T* x = X.data<T>();
    T* y = ctx.output(0).data<T>();
    for (int64_t n = 0; n < R.dim(0); ++n) {
      const T* roi = R.data<T>() + n * 5;
      double bid = static_cast<double>(static_cast<A>(roi[0]));
      if (!(bid >= 0 && bid < N)) {
        st = ctx.error("roi " + std::to_string(n) + " has batch index out of range");
        return;
      }
      const int64_t b = static_cast<int64_t>(bid);
      auto rnd = [&](int i) {
        return static_cast<int64_t>(std::round(static_cast<A>(roi[i]) * scale));
      };
      const int64_t ws = rnd(1), hs = rnd(2), we = rnd(3), he = rnd(4);
      const double rh = static_cast<double>(std::max<int64_t>(he - hs + 1, 1));
      const double rw = static_cast<double>(std::max<int64_t>(we - ws + 1, 1));
      const double bh = rh / PH, bw = rw / PW;
      for (int64_t c = 0; c < C; ++c) {
        const T* img = x + (b * C + c) * H * W;
        for (int64_t ph = 0; ph < PH; ++ph) {
          int64_t h0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(ph * bh)) + hs, 0, H);
          int64_t h1 =
              std::clamp<int64_t>(static_cast<int64_t>(std::ceil((ph + 1) * bh)) + hs, 0, H);
          for (int64_t pw = 0; pw < PW; ++pw, ++y) {
            int64_t w0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(pw * bw)) + ws, 0, W);
            int64_t w1 =
                std::clamp<int64_t>(static_cast<int64_t>(std::ceil((pw + 1) * bw)) + ws, 0, W);
            if (h1 <= h0 || w1 <= w0) {
              *y = T(0);
              continue;
            }
            A best = -std::numeric_limits<A>::infinity();
            for (int64_t i = h0; i < h1; ++i)
              for (int64_t j = w0; j < w1; ++j)
                best = std::max(best, static_cast<A>(img[i * W + j]));
            *y = static_cast<T>(best);
          }
        }
      }
    }
  });
  return st;
}

}  // namespace

std::string MakeRoiAlignPlan(const ir::Node& n, int64_t opset, RoiAlignPlan* p) {
  p->out_h = n.attr_int("output_height", 1);
  p->out_w = n.attr_int("output_width", 1);
  if (p->out_h <= 0 || p->out_w <= 0) return "output_height and output_width must be positive";
  p->sampling = n.attr_int("sampling_ratio", 0);
  if (p->sampling < 0) return "sampling_ratio must not be negative";
  p->spatial_scale = n.attr_float("spatial_scale", 1.0f);
  const std::string mode = n.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return "mode must be avg or max";
  p->max_mode = mode == "max";
  // Opset 10 had no attribute and behaved as output_half_pixel.
  const std::string ctm = n.attr_string("coordinate_transformation_mode",
                                        opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return "unknown coordinate_transformation_mode '" + ctm + "'";
  p->half_pixel = ctm == "half_pixel";
  return "";
}

namespace {

Status RoiAlignInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.error("needs inputs X, rois and batch_indices");
  if (!IsFloatType(ctx.input_dtype(0)) || ctx.input_dtype(1) != ctx.input_dtype(0))
    return ctx.error("unsupported dtype");
  if (ctx.input_dtype(2) != DType::kInt64 && ctx.input_dtype(2) != DType::kInt32)
    return ctx.error("batch_indices must be int64");
  const Dims& x = ctx.input_dims(0);
  const Dims& r = ctx.input_dims(1);
  const Dims& bi = ctx.input_dims(2);
  if (x.size() != 4) return ctx.error("X must have rank 4");
  if (r.size() != 2 || r[1] != 4) return ctx.error("rois must have shape [num_rois, 4]");
  if (bi.size() != 1 || bi[0] != r[0]) return ctx.error("batch_indices must have shape [num_rois]");
  RoiAlignPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeRoiAlignPlan(ctx.node(), ctx.opset(), &p)));
  ctx.set_output(0, ctx.input_dtype(0), {r[0], x[1], p.out_h, p.out_w});
  return OkStatus();
}

Status RoiAlignCompute(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& R = ctx.input(1);
  const Tensor& BI = ctx.input(2);
  RoiAlignPlan plan;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeRoiAlignPlan(ctx.node(), ctx.opset(), &plan)));
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3);
  const int64_t PH = plan.out_h, PW = plan.out_w, sampling = plan.sampling;
  const float scale = plan.spatial_scale;
  const bool max_mode = plan.max_mode, half_pixel = plan.half_pixel;
  const int64_t rois = R.dim(0);
  for (int64_t n = 0; n < rois; ++n) {
    const int64_t b = BI.GetInt(n);
    if (b < 0 || b >= N)
      return ctx.error("batch_indices[" + std::to_string(n) + "] = " + std::to_string(b) +
                       " is out of range");
  }
  // The regions over the threads, each part with its own taps.
  const int parts =
      static_cast<int>(std::min<int64_t>(ctx.threads(), rois * C * PH * PW / 4096 + 1));
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    using A = Acc<T>;
    const T* x = X.data<T>();
    struct Tap {
      int64_t pos[4];
      A w[4];
    };
    ParallelFor(parts, rois, [&](int64_t n0, int64_t n1) {
      std::vector<Tap> taps;
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t b = BI.GetInt(n);
        T* y = ctx.output(0).data<T>() + n * C * PH * PW;
        const T* roi = R.data<T>() + n * 4;
        const A off = half_pixel ? A(0.5) : A(0);
        const A x0 = static_cast<A>(roi[0]) * scale - off,
                y0 = static_cast<A>(roi[1]) * scale - off;
        const A x1 = static_cast<A>(roi[2]) * scale - off,
                y1 = static_cast<A>(roi[3]) * scale - off;
        A rw = x1 - x0, rh = y1 - y0;
        if (!half_pixel) {
          rw = std::max(rw, A(1));
          rh = std::max(rh, A(1));
        }
        const A bh = rh / PH, bw = rw / PW;
        const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / PH));
        const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / PW));
        const A count = static_cast<A>(std::max<int64_t>(gh * gw, 1));
        // Bilinear taps shared by every channel.
        taps.clear();
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw)
            for (int64_t iy = 0; iy < gh; ++iy) {
              A yy = y0 + ph * bh + (iy + A(0.5)) * bh / static_cast<A>(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                A xx = x0 + pw * bw + (ix + A(0.5)) * bw / static_cast<A>(gw);
                Tap t{{0, 0, 0, 0}, {0, 0, 0, 0}};
                if (!(yy < -1 || yy > H || xx < -1 || xx > W)) {
                  A yv = std::max(yy, A(0)), xv = std::max(xx, A(0));
                  int64_t yl = static_cast<int64_t>(yv), xl = static_cast<int64_t>(xv), yh, xh;
                  if (yl >= H - 1) {
                    yh = yl = H - 1;
                    yv = static_cast<A>(yl);
                  } else {
                    yh = yl + 1;
                  }
                  if (xl >= W - 1) {
                    xh = xl = W - 1;
                    xv = static_cast<A>(xl);
                  } else {
                    xh = xl + 1;
                  }
                  A ly = yv - yl, lx = xv - xl, hy = 1 - ly, hx = 1 - lx;
                  t = Tap{{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh},
                          {hy * hx, hy * lx, ly * hx, ly * lx}};
                }
                taps.push_back(t);
              }
            }
        for (int64_t c = 0; c < C; ++c) {
          const T* img = x + (b * C + c) * H * W;
          const Tap* t = taps.data();
          for (int64_t pp = 0; pp < PH * PW; ++pp, ++y) {
            A out = 0;
            bool first = true;
            for (int64_t s = 0; s < gh * gw; ++s, ++t) {
              A v[4];
              for (int q = 0; q < 4; ++q) v[q] = t->w[q] * static_cast<A>(img[t->pos[q]]);
              if (!max_mode) {
                out += v[0] + v[1] + v[2] + v[3];
              } else {  // as the reference: the largest weighted corner
                A m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                out = first ? m : std::max(out, m);
                first = false;
              }
            }
            *y = static_cast<T>(max_mode ? out : out / count);
          }
        }
      }
    });
  });
  return OkStatus();
}

}  // namespace

void RegisterPoolOps(OpRegistry& r) {
  r.Register(
      "MaxPool", [](InferContext& c) { return PoolInfer(c, PoolKind::kMax); },
      [](ComputeContext& c) { return PoolCompute(c, PoolKind::kMax); });
  r.Register(
      "AveragePool", [](InferContext& c) { return PoolInfer(c, PoolKind::kAvg); },
      [](ComputeContext& c) { return PoolCompute(c, PoolKind::kAvg); });
  r.Register(
      "LpPool", [](InferContext& c) { return PoolInfer(c, PoolKind::kLp); },
      [](ComputeContext& c) { return PoolCompute(c, PoolKind::kLp); });
  r.Register("GlobalMaxPool", GlobalPoolInfer,
             [](ComputeContext& c) { return GlobalPoolCompute(c, PoolKind::kMax); });
  r.Register("GlobalAveragePool", GlobalPoolInfer,
             [](ComputeContext& c) { return GlobalPoolCompute(c, PoolKind::kAvg); });
  r.Register("GlobalLpPool", GlobalPoolInfer,
             [](ComputeContext& c) { return GlobalPoolCompute(c, PoolKind::kLp); });
  r.Register("MaxUnpool", MaxUnpoolInfer, MaxUnpoolCompute);
  r.Register("MaxRoiPool", MaxRoiPoolInfer, MaxRoiPoolCompute);
  r.Register("RoiAlign", RoiAlignInfer, RoiAlignCompute);
}

}  // namespace kiln::ops
