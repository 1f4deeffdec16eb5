// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which its -Wmaybe-uninitialized
// flags wherever they are inlined (GCC PR 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "ops/pool_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu_isa.h"
#include "ops/scratch.h"
#include "ops/simd.h"
#include "ops/thread_pool.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

// The padded plane: rows ih = -ph .. Hp - ph - 1, columns iw = -pw .. Wp - pw - 1, every window
// of the output grid inside it.
struct Padded {
  int64_t Hp, Wp;
  explicit Padded(const Pool2DShape& s)
      : Hp(std::max(s.H + s.ph, (s.OH - 1) * s.sh + s.KH)),
        Wp(std::max(s.W + s.pw, (s.OW - 1) * s.sw + s.KW)) {}
};

inline void FillPadded(const Pool2DShape& s, const Padded& p, const float* x, float pad,
                       float* xp) {
  std::fill(xp, xp + s.ph * p.Wp, pad);
  for (int64_t h = 0; h < s.H; ++h) {
    float* row = xp + (h + s.ph) * p.Wp;
    std::fill(row, row + s.pw, pad);
    std::memcpy(row + s.pw, x + h * s.W, s.W * sizeof(float));
    std::fill(row + s.pw + s.W, row + p.Wp, pad);
  }
  std::fill(xp + (s.H + s.ph) * p.Wp, xp + p.Hp * p.Wp, pad);
}

// One tap into an output row: v replaces the running maximum when larger or when the maximum is
// NaN (the reference's rule); otherwise a sum.
template <bool kMax>
__attribute__((always_inline)) inline void TapInto(const float* __restrict src, int64_t step,
                                                   int64_t OW, float* __restrict yr) {
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float v = src[ow * step];
    if constexpr (kMax) {
      const float a = yr[ow];
      yr[ow] = (v > a || a != a) ? v : a;
    } else {
      yr[ow] += v;
    }
  }
}

// One output row: taps in (kh, kw) order (TapInto).
template <bool kMax, int SW>
__attribute__((always_inline)) inline void RowTaps(const float* __restrict xr, int64_t Wp,
                                                   int64_t KH, int64_t KW, int64_t sw, int64_t OW,
                                                   float* __restrict yr) {
  const int64_t step = SW > 0 ? SW : sw;
  for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = xr[ow * step];
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = kh == 0 ? 1 : 0; kw < KW; ++kw) {
      TapInto<kMax>(xr + kh * Wp + kw, step, OW, yr);
    }
}

// Column stride 2: the padded plane split into its even and odd columns (two planes of width
// We), so that tap kw of output column ow reads column ow + kw / 2 of one phase: every tap is a
// contiguous loop, in the same (kh, kw) order.
KILN_AI void SplitColumns(const Pool2DShape& s, const Padded& p, const float* x, float pad,
                          float* even, float* odd) {
  const int64_t We = (p.Wp + 1) / 2;
  for (int64_t h = 0; h < p.Hp; ++h) {
    const int64_t ih = h - s.ph;
    float* e = even + h * We;
    float* o = odd + h * We;
    if (ih < 0 || ih >= s.H) {
      std::fill(e, e + We, pad);
      std::fill(o, o + We, pad);
      continue;
    }
    const float* row = x + ih * s.W;
    // Columns j whose both taps 2j - pw, 2j - pw + 1 lie inside the row need no checks.
    const int64_t lo = std::min(We, (s.pw + 1) / 2);
    const int64_t hi = std::max(lo, std::min(We, (s.W - 1 + s.pw) / 2));
    auto edge = [&](int64_t j) {
      const int64_t w0 = 2 * j - s.pw, w1 = w0 + 1;
      e[j] = w0 >= 0 && w0 < s.W ? row[w0] : pad;
      o[j] = w1 >= 0 && w1 < s.W ? row[w1] : pad;
    };
    for (int64_t j = 0; j < lo; ++j) edge(j);
    const float* __restrict r = row - s.pw;
    for (int64_t j = lo; j < hi; ++j) {
      e[j] = r[2 * j];
      o[j] = r[2 * j + 1];
    }
    for (int64_t j = hi; j < We; ++j) edge(j);
  }
}

template <bool kMax>
__attribute__((always_inline)) inline void PlaneStride2(const Pool2DShape& s, const Padded& p,
                                                        const float* x, float pad, float* ph,
                                                        float* yp) {
  const int64_t We = (p.Wp + 1) / 2;
  float* even = ph;
  float* odd = ph + p.Hp * We;
  SplitColumns(s, p, x, pad, even, odd);
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    float* __restrict yr = yp + oh * s.OW;
    bool first = true;
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        const float* __restrict src = (kw % 2 ? odd : even) + (oh * s.sh + kh) * We + kw / 2;
        if (first) {
          for (int64_t ow = 0; ow < s.OW; ++ow) yr[ow] = src[ow];
          first = false;
          continue;
        }
        TapInto<kMax>(src, 1, s.OW, yr);
      }
  }
}

// Whether p[0, n) holds -inf: a count of compares, which vectorizes (std::find does not).
KILN_AI bool HasNegativeInfinity(const float* p, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  int32_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += p[i] == ninf ? 1 : 0;
  return count > 0;
}

// A running maximum over a row of taps: v replaces m only when larger, so from a -inf start NaN
// taps are skipped and the first of equal taps stays (one vmaxps per tap).
__attribute__((always_inline)) inline void MaxInto(const float* __restrict src, int64_t step,
                                                   int64_t OW, float* __restrict out) {
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float v = src[ow * step];
    out[ow] = v > out[ow] ? v : out[ow];
  }
}

// out[i] = the running maximum (MaxInto's rule) of src[0][i * step], ..., src[K - 1][i * step]
// from -inf, held in a register: one store per output instead of one per tap.
template <int K>
KILN_AI void MaxOfTaps(const float* const* src, int64_t step, int64_t n, float* __restrict out) {
  const float ninf = -std::numeric_limits<float>::infinity();
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    float m = ninf;
    for (int k = 0; k < K; ++k) {
      const float v = src[k][i * step];
      m = v > m ? v : m;
    }
    out[i] = m;
  }
}

constexpr int kMaxTapsHeld = 7;

// MaxOfTaps for k taps (k <= kMaxTapsHeld), or tap by tap for more.
KILN_AI void MaxOf(const float* const* src, int64_t k, int64_t step, int64_t n, float* out) {
  switch (k) {
    case 1:
      return MaxOfTaps<1>(src, step, n, out);
    case 2:
      return MaxOfTaps<2>(src, step, n, out);
    case 3:
      return MaxOfTaps<3>(src, step, n, out);
    case 4:
      return MaxOfTaps<4>(src, step, n, out);
    case 5:
      return MaxOfTaps<5>(src, step, n, out);
    case 6:
      return MaxOfTaps<6>(src, step, n, out);
    case 7:
      return MaxOfTaps<7>(src, step, n, out);
    default:
      std::fill(out, out + n, -std::numeric_limits<float>::infinity());
      for (int64_t t = 0; t < k; ++t) MaxInto(src[t], step, n, out);
  }
}

// MaxPool by rows, then columns: a window's maximum is the maximum of its rows' maxima, KW + KH
// comparisons per output (about) instead of KW * KH. Both ways the first of equal taps in
// (kh, kw) order wins and NaN taps are skipped, so the results are the tap loop's; a window of
// -inf and NaN taps gives -inf, which MaxPool2D's caller redoes. tap(h, kw): where tap kw of
// padded row h starts for output column 0, `step` floats apart. rm: the rows' maxima.
template <class Tap>
__attribute__((always_inline)) inline void MaxPlaneByRows(const Pool2DShape& s, int64_t step,
                                                          Tap tap, float* rm, float* yp) {
  const int64_t rows = (s.OH - 1) * s.sh + s.KH;
  std::vector<const float*> src(static_cast<size_t>(std::max(s.KH, s.KW)));
  for (int64_t h = 0; h < rows; ++h) {
    for (int64_t kw = 0; kw < s.KW; ++kw) src[kw] = tap(h, kw);
    MaxOf(src.data(), s.KW, step, s.OW, rm + h * s.OW);
  }
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    for (int64_t kh = 0; kh < s.KH; ++kh) src[kh] = rm + (oh * s.sh + kh) * s.OW;
    MaxOf(src.data(), s.KH, 1, s.OW, yp + oh * s.OW);
  }
}

template <bool kMax>
__attribute__((always_inline)) inline void PlanesBody(const Pool2DShape& s, const float* x,
                                                      float* y, int64_t p0, int64_t p1) {
  const Padded p(s);
  const float pad = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  if constexpr (kMax) {
    const int64_t We = (p.Wp + 1) / 2, plane = s.sw == 2 ? 2 * p.Hp * We : p.Hp * p.Wp;
    const int64_t rows = (s.OH - 1) * s.sh + s.KH;
    float* xp = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(plane + rows * s.OW));
    float* rm = xp + plane;
    for (int64_t pl = p0; pl < p1; ++pl) {
      float* yp = y + pl * s.OH * s.OW;
      if (s.sw == 2) {
        float *even = xp, *odd = xp + p.Hp * We;
        SplitColumns(s, p, x + pl * s.H * s.W, pad, even, odd);
        MaxPlaneByRows(
            s, 1, [&](int64_t h, int64_t kw) { return (kw % 2 ? odd : even) + h * We + kw / 2; },
            rm, yp);
        continue;
      }
      FillPadded(s, p, x + pl * s.H * s.W, pad, xp);
      auto tap = [&](int64_t h, int64_t kw) { return xp + h * p.Wp + kw; };
      if (s.sw == 1)
        MaxPlaneByRows(s, 1, tap, rm, yp);  // contiguous taps: vectors
      else
        MaxPlaneByRows(s, s.sw, tap, rm, yp);
    }
    return;
  }
  if (s.sw == 2) {
    float* ph =
        Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(2 * p.Hp * ((p.Wp + 1) / 2)));
    for (int64_t pl = p0; pl < p1; ++pl)
      PlaneStride2<kMax>(s, p, x + pl * s.H * s.W, pad, ph, y + pl * s.OH * s.OW);
    return;
  }
  float* xp = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(p.Hp * p.Wp));
  for (int64_t pl = p0; pl < p1; ++pl) {
    FillPadded(s, p, x + pl * s.H * s.W, pad, xp);
    float* yp = y + pl * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      const float* xr = xp + oh * s.sh * p.Wp;
      float* yr = yp + oh * s.OW;
      if (s.sw == 1)
        RowTaps<kMax, 1>(xr, p.Wp, s.KH, s.KW, 1, s.OW, yr);
      else if (s.sw == 2)
        RowTaps<kMax, 2>(xr, p.Wp, s.KH, s.KW, 2, s.OW, yr);
      else
        RowTaps<kMax, 0>(xr, p.Wp, s.KH, s.KW, s.sw, s.OW, yr);
    }
  }
}

using PlanesFn = void (*)(const Pool2DShape&, const float*, float*, int64_t, int64_t);

template <bool kMax>
void PlanesBase(const Pool2DShape& s, const float* x, float* y, int64_t p0, int64_t p1) {
  PlanesBody<kMax>(s, x, y, p0, p1);
}
#if KILN_X86_DISPATCH
template <bool kMax>
__attribute__((target("avx2,fma"))) void PlanesAvx2(const Pool2DShape& s, const float* x, float* y,
                                                    int64_t p0, int64_t p1) {
  PlanesBody<kMax>(s, x, y, p0, p1);
}
template <bool kMax>
__attribute__((target("avx512f,avx512bw,fma"))) void PlanesAvx512(const Pool2DShape& s,
                                                                  const float* x, float* y,
                                                                  int64_t p0, int64_t p1) {
  PlanesBody<kMax>(s, x, y, p0, p1);
}
#endif

template <bool kMax>
PlanesFn PlanesFor() {
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return PlanesAvx512<kMax>;
  if (isa == Isa::kAvx2) return PlanesAvx2<kMax>;
#endif
  return PlanesBase<kMax>;
}

template <bool kMax>
void RunPlanes(const Pool2DShape& s, const float* x, float* y, int threads) {
  const PlanesFn fn = PlanesFor<kMax>();
  const int64_t work = s.planes * s.OH * s.OW * s.KH * s.KW;
  const int t = static_cast<int>(std::min<int64_t>({threads, s.planes, work / (1 << 16) + 1, 64}));
  ParallelFor(t, s.planes, [&](int64_t p0, int64_t p1) { fn(s, x, y, p0, p1); });
}

// Taps of a window starting at `start` (K taps) inside [0, n) (as the reference's TapRange).
inline int64_t TapCount(int64_t start, int64_t K, int64_t n) {
  const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(start + K, n);
  return hi > lo ? hi - lo : 0;
}

// Channels-last: one output pixel is a window of in-range taps [kh0, kh1) x [kw0, kw1) over
// channel vectors; the divisor of an average is `count` (AveragePool2D's rule).
struct PixelWindow {
  const float* x;  // the window's first in-range tap, channel 0
  int64_t kh0, kh1, kw0, kw1;
  float count;
};

// The reference's maximum of one channel (pool.cc's PoolCore): NaN skipped unless all are.
float ReferenceMax(const PixelWindow& win, int64_t W, int64_t C, int64_t c) {
  float best = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (int64_t kh = win.kh0; kh < win.kh1; ++kh)
    for (int64_t kw = win.kw0; kw < win.kw1; ++kw) {
      const float v = win.x[((kh - win.kh0) * W + (kw - win.kw0)) * C + c];
      if (v > best || !any || best != best) best = v;
      any = true;
    }
  return best;
}

template <bool kMax>
void PixelBase(const PixelWindow& win, int64_t W, int64_t C, float* y) {
  for (int64_t c = 0; c < C; ++c) {
    if (kMax) {
      y[c] = ReferenceMax(win, W, C, c);
      continue;
    }
    float sum = 0;
    for (int64_t kh = win.kh0; kh < win.kh1; ++kh)
      for (int64_t kw = win.kw0; kw < win.kw1; ++kw)
        sum += win.x[((kh - win.kh0) * W + (kw - win.kw0)) * C + c];
    y[c] = win.count > 0 ? sum / win.count : std::numeric_limits<float>::quiet_NaN();
  }
}

#if KILN_X86_DISPATCH
// Four 16-channel vectors at a time, the last ones masked. max(v, m) keeps m where v is NaN, so
// NaN taps are skipped from a -inf start; -inf results are redone by ReferenceMax.
template <bool kMax>
__attribute__((target("avx512f"))) void PixelAvx512(const PixelWindow& win, int64_t W, int64_t C,
                                                    float* y) {
  const __m512 start =
      kMax ? _mm512_set1_ps(-std::numeric_limits<float>::infinity()) : _mm512_setzero_ps();
  const __m512 count = _mm512_set1_ps(win.count);
  for (int64_t c = 0; c < C; c += 64) {
    __mmask16 mask[4];
    for (int b = 0; b < 4; ++b) {
      const int64_t left = C - c - 16 * b;
      mask[b] = left >= 16  ? __mmask16(0xffff)
                : left <= 0 ? __mmask16(0)
                            : __mmask16((1u << left) - 1);
    }
    __m512 acc[4] = {start, start, start, start};
    for (int64_t kh = win.kh0; kh < win.kh1; ++kh) {
      const float* row = win.x + (kh - win.kh0) * W * C + c;
      for (int64_t kw = win.kw0; kw < win.kw1; ++kw) {
        const float* p = row + (kw - win.kw0) * C;
        for (int b = 0; b < 4; ++b) {
          const __m512 v = _mm512_maskz_loadu_ps(mask[b], p + 16 * b);
          acc[b] = kMax ? _mm512_max_ps(v, acc[b]) : _mm512_add_ps(acc[b], v);
        }
      }
    }
    for (int b = 0; b < 4; ++b) {
      if (!mask[b]) break;
      __m512 r = acc[b];
      if (!kMax)
        r = win.count > 0 ? _mm512_div_ps(r, count)
                          : _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
      _mm512_mask_storeu_ps(y + c + 16 * b, mask[b], r);
      if (kMax) {
        __mmask16 low = _mm512_mask_cmp_ps_mask(mask[b], r, start, _CMP_EQ_OQ);
        for (int l = 0; low; ++l, low >>= 1)
          if (low & 1) y[c + 16 * b + l] = ReferenceMax(win, W, C, c + 16 * b + l);
      }
    }
  }
}

// PixelAvx512's loop in 8-channel vectors: kVecs vectors from channel c with plain loads, or
// one masked (kMasked: the tail). A fixed count keeps the accumulators in registers.
template <bool kMax, int kVecs, bool kMasked>
__attribute__((target("avx2,fma"), always_inline)) inline void PoolVecsAvx2(const PixelWindow& win,
                                                                            int64_t W, int64_t C,
                                                                            int64_t c, __m256i mask,
                                                                            float* y) {
  const __m256 start =
      kMax ? _mm256_set1_ps(-std::numeric_limits<float>::infinity()) : _mm256_setzero_ps();
  __m256 acc[kVecs];
#pragma GCC unroll 8
  for (int b = 0; b < kVecs; ++b) acc[b] = start;
  for (int64_t kh = win.kh0; kh < win.kh1; ++kh) {
    const float* row = win.x + (kh - win.kh0) * W * C + c;
    for (int64_t kw = win.kw0; kw < win.kw1; ++kw) {
      const float* p = row + (kw - win.kw0) * C;
#pragma GCC unroll 8
      for (int b = 0; b < kVecs; ++b) {
        const __m256 v = kMasked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p + 8 * b);
        acc[b] = kMax ? _mm256_max_ps(v, acc[b]) : _mm256_add_ps(acc[b], v);
      }
    }
  }
  const __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 8
  for (int b = 0; b < kVecs; ++b) {
    __m256 r = acc[b];
    if (!kMax)
      r = win.count > 0 ? _mm256_div_ps(r, _mm256_set1_ps(win.count))
                        : _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
    float* out = y + c + 8 * b;
    if (kMasked)
      _mm256_maskstore_ps(out, mask, r);
    else
      _mm256_storeu_ps(out, r);
    if (kMax) {
      unsigned low = static_cast<unsigned>(_mm256_movemask_ps(_mm256_and_ps(
          _mm256_cmp_ps(r, start, _CMP_EQ_OQ), _mm256_castsi256_ps(kMasked ? mask : all))));
      for (int l = 0; low; ++l, low >>= 1)
        if (low & 1) out[l] = ReferenceMax(win, W, C, c + 8 * b + l);
    }
  }
}

template <bool kMax>
__attribute__((target("avx2,fma"))) void PixelAvx2(const PixelWindow& win, int64_t W, int64_t C,
                                                   float* y) {
  const __m256i none = _mm256_setzero_si256();
  int64_t c = 0;
  for (; c + 64 <= C; c += 64) PoolVecsAvx2<kMax, 8, false>(win, W, C, c, none, y);
  for (; c + 8 <= C; c += 8) PoolVecsAvx2<kMax, 1, false>(win, W, C, c, none, y);
  if (c < C) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(C - c)), lane);
    PoolVecsAvx2<kMax, 1, true>(win, W, C, c, tail, y);
  }
}
#endif

// The window of output pixel (oh, ow) of image n, for ReferenceMax.
PixelWindow WindowAt(const Pool2DShape& s, int64_t C, const float* x, int64_t n, int64_t oh,
                     int64_t ow) {
  const int64_t h = oh * s.sh - s.ph, w = ow * s.sw - s.pw;
  PixelWindow win{x, 0, 0, 0, 0, 0};
  win.kh0 = std::max<int64_t>(0, -h);
  win.kh1 = std::max(win.kh0, std::min(s.KH, s.H - h));
  win.kw0 = std::max<int64_t>(0, -w);
  win.kw1 = std::max(win.kw0, std::min(s.KW, s.W - w));
  if (win.kh0 < win.kh1 && win.kw0 < win.kw1)
    win.x = x + ((n * s.H + h + win.kh0) * s.W + w + win.kw0) * C;
  return win;
}

// Channels-last MaxPool by rows, then columns, as MaxPlaneByRows (the same results) for output
// rows [r0, r1) (r: image r / OH, row r % OH): the maxima of each input row's windows are made
// once into a ring of KH rows (OW x C each; input row ih in slot ih % KH, distinct within a
// window) and read by every output row whose window holds that row. -inf results are redone by
// ReferenceMax (NaN where every tap is).
KILN_AI void MaxRowsChannelsLast(const Pool2DShape& s, int64_t C, const float* x, float* y,
                                 int64_t r0, int64_t r1) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t owc = s.OW * C;
  float* ring = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(s.KH * owc));
  std::vector<int64_t> held(static_cast<size_t>(s.KH), -1);  // n * H + ih per slot
  std::vector<const float*> src(static_cast<size_t>(std::max(s.KH, s.KW)));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / s.OH, oh = r % s.OH, h0 = oh * s.sh - s.ph;
    float* yr = y + r * owc;
    for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + s.KH, s.H); ++ih) {
      float* rm = ring + (ih % s.KH) * owc;
      if (held[ih % s.KH] != n * s.H + ih) {
        held[ih % s.KH] = n * s.H + ih;
        const float* row = x + (n * s.H + ih) * s.W * C;
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const int64_t w0 = ow * s.sw - s.pw, w1 = std::min(w0 + s.KW, s.W);
          int64_t taps = 0;
          for (int64_t w = std::max<int64_t>(w0, 0); w < w1; ++w) src[taps++] = row + w * C;
          MaxOf(src.data(), taps, 1, C, rm + ow * C);
        }
      }
    }
    int64_t taps = 0;
    for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + s.KH, s.H); ++ih)
      src[taps++] = ring + (ih % s.KH) * owc;
    MaxOf(src.data(), taps, 1, owc, yr);
    if (!HasNegativeInfinity(yr, owc)) continue;
    for (int64_t i = 0; i < owc; ++i)
      if (yr[i] == ninf) yr[i] = ReferenceMax(WindowAt(s, C, x, n, oh, i / C), s.W, C, i % C);
  }
}

void MaxRowsBase(const Pool2DShape& s, int64_t C, const float* x, float* y, int64_t r0,
                 int64_t r1) {
  MaxRowsChannelsLast(s, C, x, y, r0, r1);
}
#if KILN_X86_DISPATCH
__attribute__((target("avx2,fma"))) void MaxRowsAvx2(const Pool2DShape& s, int64_t C,
                                                     const float* x, float* y, int64_t r0,
                                                     int64_t r1) {
  MaxRowsChannelsLast(s, C, x, y, r0, r1);
}
__attribute__((target("avx512f,avx512bw,fma"))) void MaxRowsAvx512(const Pool2DShape& s, int64_t C,
                                                                   const float* x, float* y,
                                                                   int64_t r0, int64_t r1) {
  MaxRowsChannelsLast(s, C, x, y, r0, r1);
}
#endif

template <bool kMax>
void PoolPixels(const Pool2DShape& s, int64_t C, PoolFlavor flavor, const float* x, float* y,
                int64_t r0, int64_t r1, Isa isa) {
  auto pixel = PixelBase<kMax>;
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) pixel = PixelAvx512<kMax>;
  if (isa == Isa::kAvx2) pixel = PixelAvx2<kMax>;
#endif
  const bool include_pad = flavor == PoolFlavor::kAvgIncludePad;
  for (int64_t r = r0; r < r1; ++r) {  // r: image r / OH, output row r % OH
    const int64_t n = r / s.OH, oh = r % s.OH, h = oh * s.sh - s.ph;
    PixelWindow win;
    win.kh0 = std::max<int64_t>(0, -h);
    win.kh1 = std::max(win.kh0, std::min(s.KH, s.H - h));
    const int64_t ch =
        include_pad ? TapCount(oh * s.sh, s.KH, s.H + s.ph + s.peh) : win.kh1 - win.kh0;
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      const int64_t w = ow * s.sw - s.pw;
      win.kw0 = std::max<int64_t>(0, -w);
      win.kw1 = std::max(win.kw0, std::min(s.KW, s.W - w));
      const int64_t cw =
          include_pad ? TapCount(ow * s.sw, s.KW, s.W + s.pw + s.pew) : win.kw1 - win.kw0;
      win.count = static_cast<float>(ch * cw);
      const bool empty = win.kh0 == win.kh1 || win.kw0 == win.kw1;  // only pads: never read
      win.x = empty ? x : x + ((n * s.H + h + win.kh0) * s.W + w + win.kw0) * C;
      pixel(win, s.W, C, y + ((n * s.OH + oh) * s.OW + ow) * C);
    }
  }
}

}  // namespace

void ChannelsLastPool2D(const Pool2DShape& s, int64_t N, PoolFlavor flavor, const float* x,
                        float* y, int threads, Isa isa) {
  if (N <= 0 || s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  isa = ResolveIsa(isa);
  const int64_t C = s.planes / N, rows = N * s.OH;
  const int64_t work = s.planes * s.OH * s.OW * s.KH * s.KW;
  const int t = static_cast<int>(std::min<int64_t>({threads, rows, work / (1 << 16) + 1, 64}));
  auto max_rows = MaxRowsBase;
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) max_rows = MaxRowsAvx512;
  if (isa == Isa::kAvx2) max_rows = MaxRowsAvx2;
#endif
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) {
    if (flavor == PoolFlavor::kMax)
      max_rows(s, C, x, y, r0, r1);
    else
      PoolPixels<false>(s, C, flavor, x, y, r0, r1, isa);
  });
}

int64_t MaxPool2D(const Pool2DShape& s, const float* x, float* y, int threads, bool* bad) {
  if (s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return 0;
  RunPlanes<true>(s, x, y, threads);
  int64_t n = 0;
  for (int64_t pl = 0; pl < s.planes; ++pl) {
    const float* yp = y + pl * s.OH * s.OW;
    bad[pl] = HasNegativeInfinity(yp, s.OH * s.OW);
    n += bad[pl];
  }
  return n;
}

void AveragePool2D(const Pool2DShape& s, const float* x, float* y, bool count_include_pad,
                   int threads) {
  if (s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  RunPlanes<false>(s, x, y, threads);
  // Divide by the tap count of each window, separable in rows and columns.
  std::vector<int64_t> ch(s.OH), cw(s.OW);
  for (int64_t oh = 0; oh < s.OH; ++oh)
    ch[oh] = count_include_pad ? TapCount(oh * s.sh, s.KH, s.H + s.ph + s.peh)
                               : TapCount(oh * s.sh - s.ph, s.KH, s.H);
  for (int64_t ow = 0; ow < s.OW; ++ow)
    cw[ow] = count_include_pad ? TapCount(ow * s.sw, s.KW, s.W + s.pw + s.pew)
                               : TapCount(ow * s.sw - s.pw, s.KW, s.W);
  for (int64_t pl = 0; pl < s.planes; ++pl)
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      float* yr = y + (pl * s.OH + oh) * s.OW;
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        const int64_t count = ch[oh] * cw[ow];
        yr[ow] = count > 0 ? yr[ow] / static_cast<float>(count)
                           : std::numeric_limits<float>::quiet_NaN();
      }
    }
}

}  // namespace kiln::ops
