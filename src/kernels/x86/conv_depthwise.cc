#include "kernels/x86/conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

#include "kernels/x86/scratch.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"

namespace kiln::ops {
namespace {

// Each plane is first copied into a zero-padded scratch plane split into sh * sw phase planes:
// phase (a, b) holds padded (i * sh + a, j * sw + b) at [i][j]. Tap (kh, kw) of output (oh, ow)
// then reads phase (kh * dh % sh, kw * dw % sw) at [oh + kh * dh / sh][ow + kw * dw / sw], so
// with the outputs laid out at the phase pitch QW ("flattened", the QW - OW columns past OW
// are computed and dropped) every tap is one contiguous run at a fixed offset, with no bounds
// checks, whatever the map size, stride, pad or dilation. A padded tap adds w * 0, which is
// exact, so every output is still bias + the taps in (kh, kw) order.
struct Geometry {
  int64_t QH, QW, phase, len;
};

Geometry MakeGeometry(const DepthwiseShape& s) {
  const int64_t PH = (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1;  // padded rows that are read
  const int64_t PW = (s.OW - 1) * s.sw + (s.KW - 1) * s.dw + 1;
  Geometry g;
  g.QH = (PH + s.sh - 1) / s.sh;
  g.QW = (PW + s.sw - 1) / s.sw;
  g.phase = g.QH * g.QW;
  g.len = (s.OH - 1) * g.QW + s.OW;
  return g;
}

// Vectors are one register of the target (kernels/x86/simd.h): under AVX2, GCC spilled 64-byte
// accumulators and built every broadcast on the stack (a 5x5 tap loop at 2 GFLOP/s).

#if KILN_X86_DISPATCH
// dst[0, n) = src[0, n) for n < L as one masked load and store. Its own function for the
// target (GCC inlines it into PlanesAvx512 through the always_inline callers).
__attribute__((target("avx512f"))) inline void MaskedRun(float* dst, const float* src, int64_t n) {
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
}
__attribute__((target("avx512f"))) inline void MaskedRun(double* dst, const double* src,
                                                         int64_t n) {
  const __mmask8 m = static_cast<__mmask8>((1u << n) - 1);
  _mm512_mask_storeu_pd(dst, m, _mm512_maskz_loadu_pd(m, src));
}
#endif

// dst[0, n) = src[0, n) with inline vector moves: the runs here are often a few elements long,
// where a call to memcpy costs more than the copy. B = 64 (AVX-512): the tail masked.
template <class T, int B>
__attribute__((always_inline)) inline void CopyRun(T* __restrict dst, const T* __restrict src,
                                                   int64_t n) {
  constexpr int64_t L = kLanes<T, B>;
  constexpr bool kMask = B == 64;
  if (n >= L) {
    for (int64_t j = 0; j + L <= n; j += L) __builtin_memcpy(dst + j, src + j, L * sizeof(T));
    if (n % L) __builtin_memcpy(dst + n - L, src + n - L, L * sizeof(T));  // overlapping tail
    return;
  }
#if KILN_X86_DISPATCH
  if constexpr (kMask) {
    if (n > 0) MaskedRun(dst, src, n);
    return;
  }
#endif
  char* d = reinterpret_cast<char*>(dst);
  const char* s = reinterpret_cast<const char*>(src);
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);  // < B
  if (bytes & 32) __builtin_memcpy(d, s, 32), d += 32, s += 32;
  if (bytes & 16) __builtin_memcpy(d, s, 16), d += 16, s += 16;
  if (bytes & 8) __builtin_memcpy(d, s, 8), d += 8, s += 8;
  if (bytes & 4) __builtin_memcpy(d, s, 4);
}

// Copies plane xp into the phase planes at q; the padding there is already zero.
template <class T, int B>
__attribute__((always_inline)) inline void CopyPhases(const DepthwiseShape& s, const Geometry& g,
                                                      const T* __restrict xp, T* __restrict q) {
  for (int64_t a = 0; a < s.sh; ++a)
    for (int64_t b = 0; b < s.sw; ++b) {
      T* ph = q + (a * s.sw + b) * g.phase;
      // Columns j with input column j * sw + b - pw inside [0, W).
      const int64_t c0 = b - s.pw;
      const int64_t jlo = std::min(g.QW, c0 >= 0 ? 0 : (-c0 + s.sw - 1) / s.sw);
      const int64_t jhi =
          std::max(jlo, std::min(g.QW, s.W - 1 - c0 < 0 ? 0 : (s.W - 1 - c0) / s.sw + 1));
      if (jhi <= jlo) continue;
      for (int64_t i = 0; i < g.QH; ++i) {
        const int64_t r = i * s.sh + a - s.ph;
        if (r < 0 || r >= s.H) continue;
        const T* src = xp + r * s.W + c0 + jlo * s.sw;
        T* dst = ph + i * g.QW + jlo;
        const int64_t n = jhi - jlo;
        if (s.sw == 1)
          CopyRun<T, B>(dst, src, n);
        else if (s.sw == 2)
          for (int64_t j = 0; j < n; ++j) dst[j] = src[2 * j];
        else
          for (int64_t j = 0; j < n; ++j) dst[j] = src[j * s.sw];
      }
    }
}

// The even lanes of v0:v1 (GCC spells the two-source shuffle __builtin_shuffle with a mask
// vector, clang __builtin_shufflevector with constant lane indices).
template <class T, int B, size_t... I>
__attribute__((always_inline)) inline Vec<T, B> EvenOf(Vec<T, B> v0, Vec<T, B> v1,
                                                       std::index_sequence<I...>) {
#if defined(__clang__)
  return __builtin_shufflevector(v0, v1, static_cast<int>(2 * I)...);
#else
  using Index = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef Index M __attribute__((vector_size(B)));
  const M m = {static_cast<Index>(2 * I)...};
  return __builtin_shuffle(v0, v1, m);
#endif
}

// dst[0, L) = the even elements of src[0, 2 * L).
template <class T, int B>
__attribute__((always_inline)) inline void EvenLanes(T* dst, const T* src) {
  Vec<T, B> v0, v1;
  __builtin_memcpy(&v0, src, sizeof(v0));
  __builtin_memcpy(&v1, src + kLanes<T, B>, sizeof(v1));
  const Vec<T, B> v = EvenOf<T, B>(v0, v1, std::make_index_sequence<kLanes<T, B>>());
  __builtin_memcpy(dst, &v, sizeof(v));
}

// CopyPhases for column stride 2 (and pads >= 0) through a stride-1 padded plane pp (pitch
// 2 * QW, sh * QH rows, its padding already zero): the rows of x go in as contiguous runs, then
// each phase row is whole vectors of even lanes, instead of a scalar gather per element. The
// vector stores run up to L - 1 past a phase row, into the next row (written later) or the
// slack after the last plane; the loads up to 2 L past pp (slack too).
template <class T, int B>
__attribute__((always_inline)) inline void CopyPhasesS2(const DepthwiseShape& s, const Geometry& g,
                                                        const T* __restrict xp, T* __restrict pp,
                                                        T* __restrict q) {
  const int64_t pitch = 2 * g.QW, rows = s.sh * g.QH;
  const int64_t c_lo = std::min(pitch, s.pw), c_hi = std::min(pitch, s.pw + s.W);
  if (c_hi > c_lo)
    for (int64_t r = std::min(rows, s.ph); r < std::min(rows, s.ph + s.H); ++r)
      CopyRun<T, B>(pp + r * pitch + c_lo, xp + (r - s.ph) * s.W + c_lo - s.pw, c_hi - c_lo);
  for (int64_t a = 0; a < s.sh; ++a)
    for (int64_t b = 0; b < 2; ++b) {
      T* ph = q + (a * 2 + b) * g.phase;
      for (int64_t i = 0; i < g.QH; ++i) {
        const T* src = pp + (i * s.sh + a) * pitch + b;
        T* dst = ph + i * g.QW;
        for (int64_t j = 0; j < g.QW; j += kLanes<T, B>) EvenLanes<T, B>(dst + j, src + 2 * j);
      }
    }
}

// dst[j] = bias + sum_t w[t] * src[t][j] for j < n rounded up to whole vectors (dst and the
// sources have room), taps in order, kB vectors of outputs in registers at a time. NT > 0 fixes
// the tap count at compile time (unrolled, the weights broadcast once); NT == 0 takes nt.
template <class T, int B, int NT>
__attribute__((always_inline)) inline void Taps(const T* const* src, const T* wp, int64_t nt,
                                                T bias, T* __restrict dst, int64_t n) {
  using V = Vec<T, B>;
  constexpr int64_t L = kLanes<T, B>, kB = B == 64 ? 4 : 8;
  if (NT > 0) nt = NT;
  const V zero = {};  // s - zero broadcasts s exactly (-0 included)
  const V vb = bias - zero;
  const int64_t nr = (n + L - 1) / L * L;
  int64_t j = 0;
  for (; j + kB * L <= nr; j += kB * L) {
    V acc[kB];
    for (int i = 0; i < kB; ++i) acc[i] = vb;
    for (int64_t t = 0; t < nt; ++t) {
      const V wt = wp[t] - zero;
      const T* sp = src[t] + j;
      for (int i = 0; i < kB; ++i) {
        V xv;
        __builtin_memcpy(&xv, sp + i * L, sizeof(V));
        acc[i] += wt * xv;
      }
    }
    for (int i = 0; i < kB; ++i) __builtin_memcpy(dst + j + i * L, &acc[i], sizeof(V));
  }
  for (; j < nr; j += L) {
    V acc = vb;
    for (int64_t t = 0; t < nt; ++t) {
      V xv;
      __builtin_memcpy(&xv, src[t] + j, sizeof(V));
      acc += (wp[t] - zero) * xv;
    }
    __builtin_memcpy(dst + j, &acc, sizeof(V));
  }
}

// Planes [p0, p1) of the N * M output planes.
template <class T, int B>
__attribute__((always_inline)) inline void Planes(const DepthwiseShape& s, const T* x, const T* w,
                                                  const T* b, T* y, int64_t p0, int64_t p1) {
  const Geometry g = MakeGeometry(s);
  const int64_t mult = s.M / s.C, OW = s.OW, nt = s.KH * s.KW;
  const int64_t qsize = s.sh * s.sw * g.phase;
  const int64_t nr =
      (g.len + kLanes<T, B> - 1) / kLanes<T, B> * kLanes<T, B>;  // Taps' whole vectors
  // Phase planes (and nr - len zeros past them that the last vector reads), then the outputs.
  // Short phase rows through CopyPhasesS2 (measured: 14x14 and 28x28 maps 1.5x faster, 112x112
  // slower, the gather loop there is already vectorized).
  const bool s2 = s.sw == 2 && s.pw >= 0 && s.ph >= 0 && g.QW < 3 * kLanes<T, 64>;
  const int64_t psize = s2 ? s.sh * g.QH * 2 * g.QW + 2 * kLanes<T, B> + 2 : 0;  // CopyPhasesS2's
  T* q = Scratch<T>(ScratchSlot::kPadded, static_cast<size_t>(qsize + nr + psize + nr));
  T* pp = q + qsize + nr;
  T* out = pp + psize;
  std::fill(q, out, T(0));  // the padding; the copies rewrite only the image part
  const T* srcs_small[32];  // where tap t's run starts in q
  std::vector<const T*> srcs_big(nt > 32 ? static_cast<size_t>(nt) : 0);
  const T** srcs = nt > 32 ? srcs_big.data() : srcs_small;
  for (int64_t kh = 0; kh < s.KH; ++kh)
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      const int64_t r = kh * s.dh, c = kw * s.dw;
      srcs[kh * s.KW + kw] =
          q + ((r % s.sh) * s.sw + c % s.sw) * g.phase + (r / s.sh) * g.QW + c / s.sw;
    }
  int64_t last_in = -1;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / s.M, m = p % s.M;
    const int64_t in = n * s.C + m / mult;
    const T* wp = w + m * nt;
    T* yp = y + p * s.OH * OW;
    const T bias = b ? b[m] : T(0);
    if (in != last_in && s2)
      CopyPhasesS2<T, B>(s, g, x + in * s.H * s.W, pp, q);
    else if (in != last_in)
      CopyPhases<T, B>(s, g, x + in * s.H * s.W, q);  // mult > 1 reuses it
    last_in = in;
    if (nt == 9)
      Taps<T, B, 9>(srcs, wp, nt, bias, out, g.len);
    else if (nt == 25)
      Taps<T, B, 25>(srcs, wp, nt, bias, out, g.len);
    else if (nt == 3)
      Taps<T, B, 3>(srcs, wp, nt, bias, out, g.len);
    else
      Taps<T, B, 0>(srcs, wp, nt, bias, out, g.len);
    if (g.QW == OW)
      CopyRun<T, B>(yp, out, s.OH * OW);
    else
      for (int64_t oh = 0; oh < s.OH; ++oh) CopyRun<T, B>(yp + oh * OW, out + oh * g.QW, OW);
  }
}

template <class T>
void PlanesBase(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y, int64_t p0,
                int64_t p1) {
  Planes<T, 16>(s, x, w, b, y, p0, p1);
}
#if KILN_X86_DISPATCH
template <class T>
__attribute__((target("avx2,fma"))) void PlanesAvx2(const DepthwiseShape& s, const T* x, const T* w,
                                                    const T* b, T* y, int64_t p0, int64_t p1) {
  Planes<T, 32>(s, x, w, b, y, p0, p1);
}
template <class T>
__attribute__((target("avx512f,fma"))) void PlanesAvx512(const DepthwiseShape& s, const T* x,
                                                         const T* w, const T* b, T* y, int64_t p0,
                                                         int64_t p1) {
  Planes<T, 64>(s, x, w, b, y, p0, p1);
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
void DepthwiseConv2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y, int threads,
                     Isa isa) {
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
