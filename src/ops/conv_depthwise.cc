#include "ops/conv_depthwise.h"

#include <algorithm>
#include <vector>

#include "ops/thread_pool.h"

namespace kiln::ops {
namespace {

// Output columns [lo, hi) of one row with every tap of a KH x KW (dilation 1 across) kernel in
// registers: acc = bias, then the taps in (kh, kw) order, then one store (the same sum, in the
// same order, as the tap-by-tap loop of Planes, so results do not depend on the path). `x` points
// at input row ih0 = oh * sh - ph, column -pw; every tap read is inside the image.
template <class T, int KH, int KW, int SW>
__attribute__((always_inline)) inline void RowTaps(const T* __restrict x, int64_t row_step,
                                                   const T* __restrict wp, T bias,
                                                   T* __restrict yr, int64_t lo, int64_t hi) {
  T wv[KH * KW];
  for (int i = 0; i < KH * KW; ++i) wv[i] = wp[i];
  for (int64_t ow = lo; ow < hi; ++ow) {
    T acc = bias;
    const T* xc = x + ow * SW;
    for (int kh = 0; kh < KH; ++kh)
      for (int kw = 0; kw < KW; ++kw) acc += wv[kh * KW + kw] * xc[kh * row_step + kw];
    yr[ow] = acc;
  }
}

// One border column of a row RowFast takes: the taps in (kh, kw) order, skipping those outside.
template <class T>
__attribute__((always_inline)) inline void EdgeColumn(const DepthwiseShape& s, const T* xp,
                                                      const T* wp, T bias, T* yr, int64_t ih0,
                                                      int64_t ow) {
  T acc = bias;
  for (int64_t kh = 0; kh < s.KH; ++kh) {
    const T* xr = xp + (ih0 + kh * s.dh) * s.W;
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      const int64_t iw = ow * s.sw - s.pw + kw;
      if (iw >= 0 && iw < s.W) acc += wp[kh * s.KW + kw] * xr[iw];
    }
  }
  yr[ow] = acc;
}

// One output row through RowTaps when it has a register kernel (3 x 3 or 5 x 5, column
// dilation 1, column stride 1 or 2) and every tap row lies inside the image: the border columns
// tap by tap, the interior in registers. False when the row must take the general loop.
template <class T>
__attribute__((always_inline)) inline bool RowFast(const DepthwiseShape& s, const T* xp,
                                                   const T* wp, T bias, T* yr, int64_t oh) {
  const int64_t ih0 = oh * s.sh - s.ph;
  if (s.dw != 1 || s.KH != s.KW || (s.KH != 3 && s.KH != 5) || (s.sw != 1 && s.sw != 2) ||
      ih0 < 0 || ih0 + (s.KH - 1) * s.dh >= s.H)
    return false;
  const int64_t OW = s.OW, sw = s.sw, K = s.KW;
  // Interior columns: ow * sw - pw >= 0 and ow * sw - pw + K - 1 <= W - 1.
  int64_t lo = std::min(OW, (s.pw + sw - 1) / sw);
  int64_t hi = s.W - K + s.pw < 0 ? 0 : (s.W - K + s.pw) / sw + 1;
  hi = std::max(lo, std::min(hi, OW));
  for (int64_t ow = 0; ow < lo; ++ow) EdgeColumn<T>(s, xp, wp, bias, yr, ih0, ow);
  if (hi > lo) {
    const T* x = xp + ih0 * s.W - s.pw;
    const int64_t step = s.dh * s.W;
    if (K == 3 && sw == 1) RowTaps<T, 3, 3, 1>(x, step, wp, bias, yr, lo, hi);
    else if (K == 3) RowTaps<T, 3, 3, 2>(x, step, wp, bias, yr, lo, hi);
    else if (sw == 1) RowTaps<T, 5, 5, 1>(x, step, wp, bias, yr, lo, hi);
    else RowTaps<T, 5, 5, 2>(x, step, wp, bias, yr, lo, hi);
  }
  for (int64_t ow = hi; ow < OW; ++ow) EdgeColumn<T>(s, xp, wp, bias, yr, ih0, ow);
  return true;
}

// Stride 1 with OW == W (same padding, no row dilation): output (oh, ow) reads input
// (oh - ph + kh) * W + ow - pw + kw, a constant offset from oh * W + ow, so the rows whose taps
// all lie inside the image are one long RowTaps loop over the flattened plane (the columns near
// the left and right borders read the neighbouring row there and are recomputed tap by tap).
// Returns how many rows, from oh = ph, it wrote (0 if the shape does not fit).
template <class T>
__attribute__((always_inline)) inline int64_t WholeRows(const DepthwiseShape& s, const T* xp,
                                                        const T* wp, T bias, T* yp) {
  const int64_t K = s.KH, W = s.W;
  if (s.sw != 1 || s.sh != 1 || s.dw != 1 || s.dh != 1 || s.KH != s.KW || (K != 3 && K != 5) ||
      s.OW != W || s.H < K || W < K)
    return 0;
  const int64_t rows = std::min(s.H - K + 1, s.OH - s.ph);  // oh = ph + i reads ih = i .. i+K-1
  if (rows < 2) return 0;
  const int64_t lo = s.pw, hi = W - K + 1 + s.pw;  // interior columns of a row
  if (hi <= lo || hi > W) return 0;
  // Flat outputs from (ph, lo) to (ph + rows - 1, hi); input of flat f is f - ph * W - pw.
  T* y0 = yp + s.ph * W + lo;
  const T* x0 = xp + lo - s.pw;
  const int64_t len = (rows - 1) * W + (hi - lo);
  if (K == 3) RowTaps<T, 3, 3, 1>(x0, W, wp, bias, y0, 0, len);
  else RowTaps<T, 5, 5, 1>(x0, W, wp, bias, y0, 0, len);
  for (int64_t i = 0; i < rows; ++i) {
    T* yr = yp + (s.ph + i) * W;
    for (int64_t ow = 0; ow < lo; ++ow) EdgeColumn<T>(s, xp, wp, bias, yr, i, ow);
    for (int64_t ow = hi; ow < W; ++ow) EdgeColumn<T>(s, xp, wp, bias, yr, i, ow);
  }
  return rows;
}

// Planes [p0, p1) of the N * M output planes.
template <class T>
__attribute__((always_inline)) inline void Planes(const DepthwiseShape& s, const T* x, const T* w,
                                                  const T* b, T* y, int64_t p0, int64_t p1) {
  const int64_t mult = s.M / s.C, OW = s.OW, sw = s.sw;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / s.M, m = p % s.M;
    const T* xp = x + (n * s.C + m / mult) * s.H * s.W;
    const T* wp = w + m * s.KH * s.KW;
    T* yp = y + p * s.OH * OW;
    const T bias = b ? b[m] : T(0);
    const int64_t whole = WholeRows<T>(s, xp, wp, bias, yp);
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      T* yr = yp + oh * OW;
      if (oh >= s.ph && oh < s.ph + whole) continue;  // done by WholeRows
      if (RowFast<T>(s, xp, wp, bias, yr, oh)) continue;
      for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = bias;
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        const int64_t ih = oh * s.sh - s.ph + kh * s.dh;
        if (ih < 0 || ih >= s.H) continue;
        const T* xr = xp + ih * s.W;
        for (int64_t kw = 0; kw < s.KW; ++kw) {
          // Output columns whose input column ow * sw + off lies inside [0, W).
          const int64_t off = kw * s.dw - s.pw;
          int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
          int64_t hi = s.W - 1 - off < 0 ? 0 : (s.W - 1 - off) / sw + 1;
          lo = std::min(lo, OW);
          hi = std::max(lo, std::min(hi, OW));
          if (hi <= lo) continue;
          const T wv = wp[kh * s.KW + kw];
          const T* src = xr + (off + lo * sw);  // src[(ow - lo) * sw] is the input of ow
          T* dst = yr + lo;
          const int64_t n_out = hi - lo;
          if (sw == 1) {
            for (int64_t j = 0; j < n_out; ++j) dst[j] += wv * src[j];
          } else if (sw == 2) {
            for (int64_t j = 0; j < n_out; ++j) dst[j] += wv * src[2 * j];
          } else {
            for (int64_t j = 0; j < n_out; ++j) dst[j] += wv * src[j * sw];
          }
        }
      }
    }
  }
}

template <class T>
void PlanesBase(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y, int64_t p0,
                int64_t p1) {
  Planes<T>(s, x, w, b, y, p0, p1);
}
#if KILN_X86_DISPATCH
template <class T>
__attribute__((target("avx2,fma"))) void PlanesAvx2(const DepthwiseShape& s, const T* x,
                                                    const T* w, const T* b, T* y, int64_t p0,
                                                    int64_t p1) {
  Planes<T>(s, x, w, b, y, p0, p1);
}
template <class T>
__attribute__((target("avx512f,fma"))) void PlanesAvx512(const DepthwiseShape& s, const T* x,
                                                         const T* w, const T* b, T* y, int64_t p0,
                                                         int64_t p1) {
  Planes<T>(s, x, w, b, y, p0, p1);
}
#endif

template <class T>
void PlanesFor(Isa isa, const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
               int64_t p0, int64_t p1) {
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) return PlanesAvx512<T>(s, x, w, b, y, p0, p1);
  if (isa == Isa::kAvx2) return PlanesAvx2<T>(s, x, w, b, y, p0, p1);
#endif
  PlanesBase<T>(s, x, w, b, y, p0, p1);
}

}  // namespace

template <class T>
void DepthwiseConv2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
                     int threads, Isa isa) {
  if (isa == Isa::kAuto || !IsaSupported(isa)) isa = BestIsa();
  const int64_t planes = s.N * s.M;
  if (planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  const int64_t work = planes * s.OH * s.OW * s.KH * s.KW;
  const int t = static_cast<int>(std::min<int64_t>({threads, planes, work / (1 << 16) + 1, 64}));
  if (t <= 1) {
    PlanesFor<T>(isa, s, x, w, b, y, 0, planes);
    return;
  }
  ParallelFor(t, planes, [&](int64_t p0, int64_t p1) { PlanesFor<T>(isa, s, x, w, b, y, p0, p1); });
}

template void DepthwiseConv2D<float>(const DepthwiseShape&, const float*, const float*,
                                     const float*, float*, int, Isa);
template void DepthwiseConv2D<double>(const DepthwiseShape&, const double*, const double*,
                                      const double*, double*, int, Isa);

}  // namespace kiln::ops
