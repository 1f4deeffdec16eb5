#include "ops/conv_depthwise.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace kiln::ops {
namespace {

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
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      T* yr = yp + oh * OW;
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
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_DW_X86 1
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
#else
#define KILN_DW_X86 0
#endif

template <class T>
void PlanesFor(GemmIsa isa, const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
               int64_t p0, int64_t p1) {
#if KILN_DW_X86
  if (isa == GemmIsa::kAvx512) return PlanesAvx512<T>(s, x, w, b, y, p0, p1);
  if (isa == GemmIsa::kAvx2) return PlanesAvx2<T>(s, x, w, b, y, p0, p1);
#endif
  PlanesBase<T>(s, x, w, b, y, p0, p1);
}

}  // namespace

template <class T>
void DepthwiseConv2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
                     int threads, GemmIsa isa) {
  if (isa == GemmIsa::kAuto || !GemmIsaSupported(isa)) isa = GemmBestIsa();
  const int64_t planes = s.N * s.M;
  if (planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  const int64_t work = planes * s.OH * s.OW * s.KH * s.KW;
  const int t = static_cast<int>(std::min<int64_t>({threads, planes, work / (1 << 16) + 1, 64}));
  if (t <= 1) {
    PlanesFor<T>(isa, s, x, w, b, y, 0, planes);
    return;
  }
  const int64_t chunk = (planes + t - 1) / t;
  std::vector<std::thread> pool;
  for (int64_t p0 = chunk; p0 < planes; p0 += chunk) {
    const int64_t p1 = std::min(planes, p0 + chunk);
    pool.emplace_back([=, &s] { PlanesFor<T>(isa, s, x, w, b, y, p0, p1); });
  }
  PlanesFor<T>(isa, s, x, w, b, y, 0, std::min(planes, chunk));
  for (auto& th : pool) th.join();
}

template void DepthwiseConv2D<float>(const DepthwiseShape&, const float*, const float*,
                                     const float*, float*, int, GemmIsa);
template void DepthwiseConv2D<double>(const DepthwiseShape&, const double*, const double*,
                                      const double*, double*, int, GemmIsa);

}  // namespace kiln::ops
