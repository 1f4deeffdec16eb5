#include "kernels/x86/pool_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"

namespace kiln::ops {
namespace {

// The padded plane: rows ih = -ph .. Hp - ph - 1, columns iw = -pw .. Wp - pw - 1, every window
// of the output grid inside it.
struct Padded {
  int64_t Hp, Wp;
  explicit Padded(const Pool2DShape& s)
      : Hp(std::max(s.H + s.ph, (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1)),
        Wp(std::max(s.W + s.pw, (s.OW - 1) * s.sw + (s.KW - 1) * s.dw + 1)) {}
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

// Column stride 2: the padded plane split into its even and odd columns (two planes of width
// We), so that tap kw of output column ow reads column ow + kw / 2 of one phase: every tap is a
// contiguous loop.
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

// Whether p[0, n) holds -inf: an OR of compares, which vectorizes (std::find does not).
KILN_AI bool HasNegativeInfinity(const float* p, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  int32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= p[i] == ninf ? 1 : 0;
  return any != 0;
}

// A maximum starts at -inf and takes a tap only when larger (so NaN taps are skipped and the
// first of equal taps stays: one vmaxps); a sum starts at 0.
template <bool kMax>
constexpr float kStart = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
template <bool kMax>
KILN_AI float Combine(float v, float acc) {
  if constexpr (kMax) return v > acc ? v : acc;
  return acc + v;
}

// out[i] = src[0][i * step] combined with src[1][i * step], ..., src[K - 1][i * step] from
// kStart, in that order, held in a register.
template <bool kMax, int K>
KILN_AI void FoldTaps(const float* const* src, int64_t step, int64_t n, float* __restrict out) {
  KILN_IVDEP
  for (int64_t i = 0; i < n; ++i) {
    float acc = kStart<kMax>;
    for (int k = 0; k < K; ++k) acc = Combine<kMax>(src[k][i * step], acc);
    out[i] = acc;
  }
}

// FoldTaps for k taps: unrolled up to 7, tap by tap through `out` beyond.
template <bool kMax>
KILN_AI void Fold(const float* const* src, int64_t k, int64_t step, int64_t n, float* out) {
  switch (k) {
    case 1:
      return FoldTaps<kMax, 1>(src, step, n, out);
    case 2:
      return FoldTaps<kMax, 2>(src, step, n, out);
    case 3:
      return FoldTaps<kMax, 3>(src, step, n, out);
    case 4:
      return FoldTaps<kMax, 4>(src, step, n, out);
    case 5:
      return FoldTaps<kMax, 5>(src, step, n, out);
    case 6:
      return FoldTaps<kMax, 6>(src, step, n, out);
    case 7:
      return FoldTaps<kMax, 7>(src, step, n, out);
    default:
      std::fill(out, out + n, kStart<kMax>);
      for (int64_t t = 0; t < k; ++t) {
        const float* __restrict v = src[t];
        KILN_IVDEP
        for (int64_t i = 0; i < n; ++i) out[i] = Combine<kMax>(v[i * step], out[i]);
      }
  }
}

// A pool by rows, then columns: a window's maximum (sum) is the maximum (sum) of its rows'
// maxima (sums), about KW + KH taps per output instead of KW x KH. A maximum keeps the tap loop's
// result bit for bit (the first of equal taps in (kh, kw) order wins both ways, NaN is skipped
// both ways; a window of -inf and NaN taps gives -inf, which MaxPool2D's caller redoes); a sum
// adds each row's taps, then the rows. tap(h, kw): where tap kw of padded row h starts for output
// column 0, `step` floats apart. rm: the rows' results.
template <bool kMax, class Tap>
KILN_AI void PlaneByRows(const Pool2DShape& s, int64_t step, Tap tap, float* rm, float* yp) {
  const int64_t rows = (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1;
  std::vector<const float*> src(static_cast<size_t>(std::max(s.KH, s.KW)));
  for (int64_t h = 0; h < rows; ++h) {
    for (int64_t kw = 0; kw < s.KW; ++kw) src[kw] = tap(h, kw);
    Fold<kMax>(src.data(), s.KW, step, s.OW, rm + h * s.OW);
  }
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    for (int64_t kh = 0; kh < s.KH; ++kh) src[kh] = rm + (oh * s.sh + kh * s.dh) * s.OW;
    Fold<kMax>(src.data(), s.KH, 1, s.OW, yp + oh * s.OW);
  }
}

// What each plane gets once pooled, while it is in cache: an average, its division by the tap
// count of output row oh times that of output column ow (rows, cols); a maximum, the check for
// -inf results, into bad[plane] (MaxPool2D's contract).
struct PlaneEnd {
  const float* rows = nullptr;
  const float* cols = nullptr;
  bool* bad = nullptr;
};

// y = y / count, NaN where the count is 0 (a window wholly in the pads).
KILN_AI void DividePlane(const Pool2DShape& s, const PlaneEnd& d, float* yp) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    float* __restrict yr = yp + oh * s.OW;
    const float r = d.rows[oh];
    KILN_IVDEP
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      const float count = r * d.cols[ow];
      yr[ow] = count > 0 ? yr[ow] / count : nan;
    }
  }
}

// Planes [p0, p1) over a padded copy of each (pads of -inf for a maximum, 0 for a sum), so that
// every tap is read without bounds checks; an average's sums are then divided, plane by plane.
template <bool kMax>
KILN_AI void PlanesBody(const Pool2DShape& s, const PlaneEnd& d, const float* x, float* y,
                        int64_t p0, int64_t p1) {
  const Padded p(s);
  const int64_t We = (p.Wp + 1) / 2, plane = s.sw == 2 ? 2 * p.Hp * We : p.Hp * p.Wp;
  const int64_t rows = (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1;
  float* xp = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(plane + rows * s.OW));
  float* rm = xp + plane;
  for (int64_t pl = p0; pl < p1; ++pl) {
    float* yp = y + pl * s.OH * s.OW;
    if (s.sw == 2) {
      float *even = xp, *odd = xp + p.Hp * We;
      SplitColumns(s, p, x + pl * s.H * s.W, kStart<kMax>, even, odd);
      PlaneByRows<kMax>(
          s, 1,
          [&](int64_t h, int64_t kw) {
            const int64_t c = kw * s.dw;
            return (c % 2 ? odd : even) + h * We + c / 2;
          },
          rm, yp);
    } else {
      FillPadded(s, p, x + pl * s.H * s.W, kStart<kMax>, xp);
      auto tap = [&](int64_t h, int64_t kw) { return xp + h * p.Wp + kw * s.dw; };
      if (s.sw == 1)
        PlaneByRows<kMax>(s, 1, tap, rm, yp);  // contiguous taps: vectors
      else
        PlaneByRows<kMax>(s, s.sw, tap, rm, yp);
    }
    if (d.rows) DividePlane(s, d, yp);
    if (d.bad) d.bad[pl] = HasNegativeInfinity(yp, s.OH * s.OW);
  }
}

using PlanesFn = void (*)(const Pool2DShape&, const PlaneEnd&, const float*, float*, int64_t,
                          int64_t);

template <bool kMax>
void PlanesBase(const Pool2DShape& s, const PlaneEnd& d, const float* x, float* y, int64_t p0,
                int64_t p1) {
  PlanesBody<kMax>(s, d, x, y, p0, p1);
}
#if KILN_X86_DISPATCH
template <bool kMax>
__attribute__((target("avx2,fma"))) void PlanesAvx2(const Pool2DShape& s, const PlaneEnd& d,
                                                    const float* x, float* y, int64_t p0,
                                                    int64_t p1) {
  PlanesBody<kMax>(s, d, x, y, p0, p1);
}
template <bool kMax>
__attribute__((target("avx512f,avx512bw,fma"))) void PlanesAvx512(const Pool2DShape& s,
                                                                  const PlaneEnd& d, const float* x,
                                                                  float* y, int64_t p0,
                                                                  int64_t p1) {
  PlanesBody<kMax>(s, d, x, y, p0, p1);
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
void RunPlanes(const Pool2DShape& s, const float* x, float* y, int threads,
               const PlaneEnd& d = {}) {
  const PlanesFn fn = PlanesFor<kMax>();
  const int64_t work = s.planes * s.OH * s.OW * (s.KH + s.KW);
  const int t = static_cast<int>(std::min<int64_t>({threads, s.planes, work / (1 << 16) + 1, 64}));
  ParallelFor(t, s.planes, [&](int64_t p0, int64_t p1) { fn(s, d, x, y, p0, p1); });
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

// Channels-last pools by rows, then columns, as PlaneByRows (the same results as the NCHW
// kernels) for output rows [r0, r1) (r: image r / OH, row r % OH), vectors along the channels:
// each input row's window results are made once into a ring of KH rows (OW x C each; input row ih
// in slot ih % KH, distinct within a window) and read by every output row whose window holds it.
// Taps in the padding are left out (adding the NCHW kernel's zeros changes no sum). A maximum of
// -inf is redone by ReferenceMax (NaN where every tap is); an average divides by its window's
// count (AveragePool2D's), NaN where that is 0.
template <bool kMax>
KILN_AI void RowsChannelsLast(const Pool2DShape& s, int64_t C, bool include_pad, const float* x,
                              float* y, int64_t r0, int64_t r1) {
  const int64_t owc = s.OW * C;
  float* ring = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(s.KH * owc));
  std::vector<int64_t> held(static_cast<size_t>(s.KH), -1);  // n * H + ih per slot
  std::vector<const float*> src(static_cast<size_t>(std::max(s.KH, s.KW)));
  std::vector<float> cw(static_cast<size_t>(s.OW));  // columns counted per output column
  for (int64_t ow = 0; ow < s.OW; ++ow)
    cw[ow] = static_cast<float>(include_pad ? TapCount(ow * s.sw, s.KW, s.W + s.pw + s.pew)
                                            : TapCount(ow * s.sw - s.pw, s.KW, s.W));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / s.OH, oh = r % s.OH, h0 = oh * s.sh - s.ph;
    const int64_t ih0 = std::max<int64_t>(h0, 0), ih1 = std::min(h0 + s.KH, s.H);
    for (int64_t ih = ih0; ih < ih1; ++ih) {
      if (held[ih % s.KH] == n * s.H + ih) continue;
      held[ih % s.KH] = n * s.H + ih;
      float* rm = ring + (ih % s.KH) * owc;
      const float* row = x + (n * s.H + ih) * s.W * C;
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        const int64_t w0 = ow * s.sw - s.pw, w1 = std::min(w0 + s.KW, s.W);
        int64_t taps = 0;
        for (int64_t w = std::max<int64_t>(w0, 0); w < w1; ++w) src[taps++] = row + w * C;
        Fold<kMax>(src.data(), taps, 1, C, rm + ow * C);
      }
    }
    int64_t taps = 0;
    for (int64_t ih = ih0; ih < ih1; ++ih) src[taps++] = ring + (ih % s.KH) * owc;
    float* yr = y + r * owc;
    Fold<kMax>(src.data(), taps, 1, owc, yr);
    if constexpr (kMax) {
      if (!HasNegativeInfinity(yr, owc)) continue;
      for (int64_t i = 0; i < owc; ++i)
        if (yr[i] == kStart<true>)
          yr[i] = ReferenceMax(WindowAt(s, C, x, n, oh, i / C), s.W, C, i % C);
    } else {
      const float ch = static_cast<float>(
          include_pad ? TapCount(oh * s.sh, s.KH, s.H + s.ph + s.peh) : ih1 - ih0);
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        const float count = ch * cw[ow];
        float* v = yr + ow * C;
        if (count > 0)
          for (int64_t c = 0; c < C; ++c) v[c] /= count;
        else
          std::fill(v, v + C, std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
}

using RowsFn = void (*)(const Pool2DShape&, int64_t, bool, const float*, float*, int64_t, int64_t);

template <bool kMax>
void RowsBase(const Pool2DShape& s, int64_t C, bool include_pad, const float* x, float* y,
              int64_t r0, int64_t r1) {
  RowsChannelsLast<kMax>(s, C, include_pad, x, y, r0, r1);
}
#if KILN_X86_DISPATCH
template <bool kMax>
__attribute__((target("avx2,fma"))) void RowsAvx2(const Pool2DShape& s, int64_t C, bool include_pad,
                                                  const float* x, float* y, int64_t r0,
                                                  int64_t r1) {
  RowsChannelsLast<kMax>(s, C, include_pad, x, y, r0, r1);
}
template <bool kMax>
__attribute__((target("avx512f,avx512bw,fma"))) void RowsAvx512(const Pool2DShape& s, int64_t C,
                                                                bool include_pad, const float* x,
                                                                float* y, int64_t r0, int64_t r1) {
  RowsChannelsLast<kMax>(s, C, include_pad, x, y, r0, r1);
}
#endif

template <bool kMax>
RowsFn RowsFor(Isa isa) {
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) return RowsAvx512<kMax>;
  if (isa == Isa::kAvx2) return RowsAvx2<kMax>;
#endif
  return RowsBase<kMax>;
}

}  // namespace

void ChannelsLastPool2D(const Pool2DShape& s, int64_t N, PoolFlavor flavor, const float* x,
                        float* y, int threads, Isa isa) {
  if (N <= 0 || s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  isa = ResolveIsa(isa);
  const int64_t C = s.planes / N, rows = N * s.OH;
  const int64_t work = s.planes * s.OH * s.OW * (s.KH + s.KW);
  const int t = static_cast<int>(std::min<int64_t>({threads, rows, work / (1 << 16) + 1, 64}));
  const RowsFn fn = flavor == PoolFlavor::kMax ? RowsFor<true>(isa) : RowsFor<false>(isa);
  const bool include_pad = flavor == PoolFlavor::kAvgIncludePad;
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) { fn(s, C, include_pad, x, y, r0, r1); });
}

int64_t MaxPool2D(const Pool2DShape& s, const float* x, float* y, int threads, bool* bad) {
  if (s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return 0;
  RunPlanes<true>(s, x, y, threads, PlaneEnd{nullptr, nullptr, bad});
  return std::count(bad, bad + s.planes, true);
}

void AveragePool2D(const Pool2DShape& s, const float* x, float* y, bool count_include_pad,
                   int threads) {
  if (s.planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  // Divide by the tap count of each window, separable in rows and columns (small integers, so
  // their float product is exact).
  std::vector<float> ch(s.OH), cw(s.OW);
  for (int64_t oh = 0; oh < s.OH; ++oh)
    ch[oh] = static_cast<float>(count_include_pad ? TapCount(oh * s.sh, s.KH, s.H + s.ph + s.peh)
                                                  : TapCount(oh * s.sh - s.ph, s.KH, s.H));
  for (int64_t ow = 0; ow < s.OW; ++ow)
    cw[ow] = static_cast<float>(count_include_pad ? TapCount(ow * s.sw, s.KW, s.W + s.pw + s.pew)
                                                  : TapCount(ow * s.sw - s.pw, s.KW, s.W));
  RunPlanes<false>(s, x, y, threads, PlaneEnd{ch.data(), cw.data()});
}

}  // namespace kiln::ops
