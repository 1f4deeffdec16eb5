// GridSample (opset 16 2-D names bilinear/bicubic, opset 20 N-D names linear/cubic) and
// AffineGrid. Coordinates are denormalized in float32 like the ONNX reference (which follows
// PyTorch's GridSampler), then sampled with zeros / border / reflection padding.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/x86/thread_pool.h"
#include "ops/common.h"

namespace kiln::ops {
namespace {

// Reflects x by the nearer border until it lies within [lo, hi].
float Reflect(float x, float lo, float hi) {
  const float rng = hi - lo;
  if (!(rng > 0)) return lo;
  if (x < lo) {
    float dx = lo - x;
    int64_t n = static_cast<int64_t>(dx / rng);
    float r = dx - n * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    float dx = x - hi;
    int64_t n = static_cast<int64_t>(dx / rng);
    float r = dx - n * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

enum class Pad { kZeros, kBorder, kReflection };

struct GridAttrs {
  int mode = 0;  // 0 nearest, 1 linear, 2 cubic
  Pad pad = Pad::kZeros;
  bool align = false;
};

std::string ReadGridAttrs(const ir::Node& node, int64_t opset, GridAttrs* a) {
  std::string m = node.attr_string("mode", opset >= 20 ? "linear" : "bilinear");
  if (m == "nearest")
    a->mode = 0;
  else if (m == "linear" || m == "bilinear")
    a->mode = 1;
  else if (m == "cubic" || m == "bicubic")
    a->mode = 2;
  else
    return "unknown mode '" + m + "'";
  std::string p = node.attr_string("padding_mode", "zeros");
  if (p == "zeros")
    a->pad = Pad::kZeros;
  else if (p == "border")
    a->pad = Pad::kBorder;
  else if (p == "reflection")
    a->pad = Pad::kReflection;
  else
    return "unknown padding_mode '" + p + "'";
  a->align = node.attr_int("align_corners", 0) != 0;
  return "";
}

std::string GridShape(const Dims& x, const Dims& grid, int64_t opset, Dims* out) {
  const size_t r = x.size() >= 2 ? x.size() - 2 : 0;
  if (x.size() < 3) return "X must have rank >= 3";
  if (opset < 20 && x.size() != 4) return "GridSample before opset 20 takes 4-D input";
  if (grid.size() != x.size() || grid[0] != x[0] || grid.back() != static_cast<int64_t>(r))
    return "grid shape " + DimsToString(grid) + " does not fit X " + DimsToString(x);
  *out = {x[0], x[1]};
  out->insert(out->end(), grid.begin() + 1, grid.end() - 1);
  return "";
}

Status GridSampleInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs X and grid");
  GridAttrs a;
  std::string m = ReadGridAttrs(ctx.node(), ctx.opset(), &a);
  if (!m.empty()) return ctx.error(m);
  if (!IsFloatingDType(ctx.input_dtype(1))) return ctx.error("grid must be a float tensor");
  Dims out;
  m = GridShape(ctx.input_dims(0), ctx.input_dims(1), ctx.opset(), &out);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

void CubicCoeffs(float t, float* c) {
  const float A = -0.75f;
  t = std::fabs(t);
  c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

// What GridSampleCompute reads of X's spatial dims and the attributes.
struct GridGeom {
  GridAttrs a;
  int r = 0;
  Dims sp, sps;
  std::vector<float> lo, hi;
  int taps = 1;  // per dim: 1 nearest, 2 linear, 4 cubic

  GridGeom(const GridAttrs& attrs, const Dims& x) : a(attrs), r(static_cast<int>(x.size()) - 2) {
    sp.assign(x.begin() + 2, x.end());
    sps = Strides(sp);
    for (int d = 0; d < r; ++d) {
      lo.push_back(a.align ? 0.0f : -0.5f);
      hi.push_back(a.align ? sp[d] - 1.0f : sp[d] - 0.5f);
    }
    taps = a.mode == 0 ? 1 : (a.mode == 1 ? 2 : 4);
  }

  // An integer index along dim d through the padding mode; -1 where it reads zero.
  int64_t PixelIndex(int64_t i, int d) const {
    if (a.pad == Pad::kZeros) return i >= 0 && i < sp[d] ? i : -1;
    if (a.pad == Pad::kBorder) return std::clamp<int64_t>(i, 0, sp[d] - 1);
    int64_t j = static_cast<int64_t>(Reflect(static_cast<float>(i), lo[d], hi[d]));
    return std::clamp<int64_t>(j, 0, sp[d] - 1);
  }

  // The taps of grid point g along each dim: dim d's k-th at idx[d * 4 + k] (-1: zero), weight
  // w[d * 4 + k].
  template <class G>
  void PointTaps(const G* g, int64_t* idx, float* w) const {
    for (int d = 0; d < r; ++d) {
      float v = static_cast<float>(g[r - 1 - d]);  // grid lists the last dim first
      float len = static_cast<float>(sp[d]);
      float c = a.align ? (v + 1) / 2.0f * (len - 1) : ((v + 1) * len - 1) / 2.0f;
      if (a.mode == 0) c = std::nearbyint(c);  // half to even, also in 3-D (as the test data)
      if (c < lo[d] || c > hi[d]) {
        if (a.pad == Pad::kBorder)
          c = std::clamp(c, 0.0f, len - 1);
        else if (a.pad == Pad::kReflection)
          c = Reflect(c, lo[d], hi[d]);
      }
      if (!std::isfinite(c)) c = -1e9f;
      c = std::clamp(c, -1e9f, 1e9f);
      if (a.mode == 0) {
        idx[d * 4] = PixelIndex(static_cast<int64_t>(c), d);
        w[d * 4] = 1;
        continue;
      }
      int64_t x0 = static_cast<int64_t>(std::floor(c));
      float t = c - x0;
      if (a.mode == 1) {
        w[d * 4] = 1 - t;
        w[d * 4 + 1] = t;
        idx[d * 4] = PixelIndex(x0, d);
        idx[d * 4 + 1] = PixelIndex(x0 + 1, d);
      } else {
        CubicCoeffs(t, &w[d * 4]);
        for (int k = 0; k < 4; ++k) idx[d * 4 + k] = PixelIndex(x0 - 1 + k, d);
      }
    }
  }
};

// Whether the n floats at x are all finite (by their exponent bits, so that the loop vectorizes).
bool AllFinite(const float* x, int64_t n) {
  uint32_t any_special = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    any_special |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any_special == 0;
}

// 2-D float32: every output point's taps (offset, weight) first, in the general loop's order,
// then every plane through them, planes over threads (the general loop took 8x ONNX Runtime's
// time on a spatial transformer's [8,64,32,32]). A tap that reads zero padding reads element 0
// with weight 0, unless the plane holds an infinity or NaN (0 times it is NaN): there such taps
// are skipped, as the general loop does.
void GridSample2DF32(const GridGeom& q, const float* x, const float* grid, int64_t N, int64_t C,
                     int64_t n_out, float* y, int threads) {
  const int per_point = q.taps * q.taps;
  const int64_t plane = q.sp[0] * q.sp[1], points = N * n_out;
  std::vector<int32_t> off(static_cast<size_t>(points * per_point));
  std::vector<float> wt(off.size());
  std::vector<uint8_t> inside(off.size());
  ParallelRows(threads, points, 256, [&](int64_t p0, int64_t p1) {
    int64_t idx[8];
    float w[8];
    for (int64_t p = p0; p < p1; ++p) {
      q.PointTaps(grid + p * 2, idx, w);
      int64_t t = p * per_point;
      for (int ky = 0; ky < q.taps; ++ky)
        for (int kx = 0; kx < q.taps; ++kx, ++t) {
          inside[t] = idx[ky] >= 0 && idx[4 + kx] >= 0;
          off[t] = inside[t] ? static_cast<int32_t>(idx[ky] * q.sp[1] + idx[4 + kx]) : 0;
          wt[t] = inside[t] ? w[4 + kx] * w[ky] : 0.0f;
        }
    }
  });
  ParallelRows(threads, N * C, std::max<int64_t>(1, 8192 / (n_out * per_point + 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* src = x + r * plane;
                   const int64_t t0 = (r / C) * n_out * per_point;
                   const int32_t* f = &off[t0];
                   const float* v = &wt[t0];
                   const uint8_t* in = &inside[t0];
                   float* dst = y + r * n_out;
                   const bool finite = AllFinite(src, plane);
                   for (int64_t o = 0; o < n_out; ++o, f += per_point, v += per_point) {
                     float acc = 0;
                     if (finite)
                       for (int k = 0; k < per_point; ++k) acc += v[k] * src[f[k]];
                     else
                       for (int k = 0; k < per_point; ++k)
                         if (in[o * per_point + k]) acc += v[k] * src[f[k]];
                     dst[o] = acc;
                   }
                 }
               });
}

Status GridSampleCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  GridAttrs a;
  std::string m = ReadGridAttrs(ctx.node(), ctx.opset(), &a);
  if (!m.empty()) return ctx.error(m);
  Dims out_dims;
  m = GridShape(x.dims(), grid.dims(), ctx.opset(), &out_dims);
  if (!m.empty()) return ctx.error(m);
  Tensor& y = ctx.output(0);
  const GridGeom q(a, x.dims());
  const int r = q.r;
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t in_sz = NumElements(q.sp);
  const int64_t n_out = NumElements(Dims(grid.dims().begin() + 1, grid.dims().end() - 1));
  if (r == 2 && x.dtype() == DType::kFloat32 && grid.dtype() == DType::kFloat32 &&
      in_sz <= std::numeric_limits<int32_t>::max()) {
    GridSample2DF32(q, x.data<float>(), grid.data<float>(), N, C, n_out, y.data<float>(),
                    ctx.threads());
    return OkStatus();
  }
  int64_t combos = 1;
  for (int d = 0; d < r; ++d) combos *= q.taps;
  std::vector<int64_t> idx(r * 4);
  std::vector<float> w(r * 4);
  bool ok = Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
    Dispatch<kFloatTypes>(grid.dtype(), [&]<class G>() {
      const T* xp = x.data<T>();
      const G* gp = grid.data<G>();
      T* yp = y.data<T>();
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t o = 0; o < n_out; ++o) {
          q.PointTaps(gp + (n * n_out + o) * r, idx.data(), w.data());
          for (int64_t ch = 0; ch < C; ++ch) {
            const T* src = xp + (n * C + ch) * in_sz;
            float acc = 0;
            for (int64_t cb = 0; cb < combos; ++cb) {
              int64_t off = 0, rem = cb;
              float wt = 1;
              bool zero = false;
              for (int d = r - 1; d >= 0; --d) {
                int k = static_cast<int>(rem % q.taps);
                rem /= q.taps;
                int64_t i = idx[d * 4 + k];
                if (i < 0) {
                  zero = true;
                  break;
                }
                off += i * q.sps[d];
                wt *= w[d * 4 + k];
              }
              if (!zero) acc += wt * static_cast<float>(src[off]);
            }
            yp[(n * C + ch) * n_out + o] = T(acc);
          }
        }
      }
    });
  });
  if (!ok) return ctx.error("unsupported dtype");
  return OkStatus();
}

// ---------------------------------------------------------------- AffineGrid

std::string AffineShape(const Dims& theta, const std::vector<int64_t>& size, Dims* out) {
  if (size.size() != 4 && size.size() != 5) return "size must have 4 or 5 entries";
  const int64_t r = static_cast<int64_t>(size.size()) - 2;
  if (theta.size() != 3 || theta[0] != size[0] || theta[1] != r || theta[2] != r + 1)
    return "theta shape " + DimsToString(theta) + " does not fit size";
  for (int64_t s : size)
    if (s <= 0) return "size entries must be positive";
  *out = {size[0]};
  out->insert(out->end(), size.begin() + 2, size.end());
  out->push_back(r);
  return "";
}

Status AffineGridInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs theta and size");
  if (!IsFloatingDType(ctx.input_dtype(0))) return ctx.error("theta must be a float tensor");
  const Tensor* sz = ctx.input_value(1);
  if (!sz) {
    ctx.set_output_dynamic(0, ctx.input_dtype(0));
    return OkStatus();
  }
  Dims out;
  std::string m = AffineShape(ctx.input_dims(0), sz->ToInt64Vector(), &out);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

Status AffineGridCompute(ComputeContext& ctx) {
  const Tensor& theta = ctx.input(0);
  std::vector<int64_t> size = ctx.input(1).ToInt64Vector();
  Dims out;
  std::string m = AffineShape(theta.dims(), size, &out);
  if (!m.empty()) return ctx.error(m);
  Tensor& y = ctx.output(0).defined() && ctx.output(0).dims() == out
                  ? ctx.output(0)
                  : ctx.allocate_output(0, theta.dtype(), out);
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  const int r = static_cast<int>(size.size()) - 2;
  Dims sp(size.begin() + 2, size.end());
  // Base coordinates along each spatial dim.
  std::vector<std::vector<double>> base(r);
  for (int d = 0; d < r; ++d) {
    for (int64_t i = 0; i < sp[d]; ++i) {
      double v = align ? (sp[d] == 1 ? -1.0 : -1.0 + 2.0 * i / (sp[d] - 1))
                       : -1.0 + (2.0 * i + 1.0) / sp[d];
      base[d].push_back(v);
    }
  }
  const int64_t pts = NumElements(sp);
  Dims sps = Strides(sp);
  Dispatch<kFloatTypes>(theta.dtype(), [&]<class T>() {
    const T* th = theta.data<T>();
    T* yp = y.data<T>();
    std::vector<double> h(r + 1);
    for (int64_t n = 0; n < size[0]; ++n) {
      const T* t = th + n * r * (r + 1);
      for (int64_t p = 0; p < pts; ++p) {
        // Homogeneous point (x, y[, z], 1): x follows the last spatial dim.
        for (int d = 0; d < r; ++d) h[r - 1 - d] = base[d][(p / sps[d]) % sp[d]];
        h[r] = 1;
        for (int i = 0; i < r; ++i) {
          double acc = 0;
          for (int j = 0; j <= r; ++j)
            acc += static_cast<double>(static_cast<Acc<T>>(t[i * (r + 1) + j])) * h[j];
          yp[(n * pts + p) * r + i] = ConvertValue<T>(acc);
        }
      }
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterGridOps(OpRegistry& r) {
  r.Register("GridSample", GridSampleInfer, GridSampleCompute);
  r.Register("AffineGrid", AffineGridInfer, AffineGridCompute);
}

}  // namespace kiln::ops
