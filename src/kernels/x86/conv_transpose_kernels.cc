// ConvTranspose kernels (kernels/x86/conv_transpose.h).
//
// Depthwise ConvTranspose (group == input channels, 1-D / 2-D): each output row gathers the input
// rows its kernel rows reach, and each kernel column adds one contiguous run of an input row,
// times its weight, into the output row's stride phase (output column j * sw + q at [q][j]);
// the phases are then interleaved into the row with the bias. Only the products that reach an
// output are computed (the GEMM + col2im path made a K = 1 GEMM per channel, at 2 GFLOP/s).
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which its -Wmaybe-uninitialized
// flags wherever they are inlined (GCC PR 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/x86/conv_transpose.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

// Kernel column kw on an output row: input column iw lands on output column
// iw * sw + kw * dw - pw = (iw + shift) * sw + q, for iw in [lo, hi) (inside the output row).
struct ColumnRun {
  int64_t q = 0, shift = 0, lo = 0, hi = 0;
};

// Outputs of phase q in a row of OW columns at stride sw.
int64_t PhaseLength(int64_t ow, int64_t sw, int64_t q) {
  return q < ow ? (ow - q + sw - 1) / sw : 0;
}

std::vector<ColumnRun> ColumnRuns(const DepthwiseShape& s) {
  std::vector<ColumnRun> runs(static_cast<size_t>(s.KW));
  for (int64_t kw = 0; kw < s.KW; ++kw) {
    const int64_t off = kw * s.dw - s.pw;
    ColumnRun& r = runs[kw];
    r.q = (off % s.sw + s.sw) % s.sw;
    r.shift = (off - r.q) / s.sw;
    r.lo = std::max<int64_t>(0, -r.shift);
    r.hi = std::max(r.lo, std::min(s.W, PhaseLength(s.OW, s.sw, r.q) - r.shift));
  }
  return runs;
}

// d[0, n) += w * src[0, n).
template <class T, int B>
KILN_AI void AddScaled(T* __restrict d, const T* __restrict src, T w, int64_t n) {
  using V = Vec<T, B>;
  constexpr int64_t L = kLanes<T, B>;
  const V wv = V{} + w;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V a, x;
    __builtin_memcpy(&a, d + i, B);
    __builtin_memcpy(&x, src + i, B);
    a += wv * x;
    __builtin_memcpy(d + i, &a, B);
  }
  for (; i < n; ++i) d[i] += w * src[i];
}

// Lanes [H, H + L / 2) of v0 and v1 alternately (H = 0: the low halves, L / 2: the high ones).
template <class T, int B, size_t H, size_t... I>
KILN_AI Vec<T, B> ZipOf(Vec<T, B> v0, Vec<T, B> v1, std::index_sequence<I...>) {
  constexpr size_t L = kLanes<T, B>;
#if defined(__clang__)
  return __builtin_shufflevector(v0, v1, static_cast<int>(H + I / 2 + (I % 2) * L)...);
#else
  using Index = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef Index M __attribute__((vector_size(B)));
  const M m = {static_cast<Index>(H + I / 2 + (I % 2) * L)...};
  return __builtin_shuffle(v0, v1, m);
#endif
}

// row[2 j] = p0[j] + bias, row[2 j + 1] = p1[j] + bias, for the n columns of the row.
template <class T, int B>
KILN_AI void Interleave2(T* __restrict row, const T* __restrict p0, const T* __restrict p1,
                         int64_t n, T bias) {
  using V = Vec<T, B>;
  constexpr int64_t L = kLanes<T, B>;
  const V bv = V{} + bias;
  int64_t j = 0;
  for (; 2 * (j + L) <= n; j += L) {
    V a, b;
    __builtin_memcpy(&a, p0 + j, B);
    __builtin_memcpy(&b, p1 + j, B);
    a += bv;
    b += bv;
    const V lo = ZipOf<T, B, 0>(a, b, std::make_index_sequence<L>());
    const V hi = ZipOf<T, B, L / 2>(a, b, std::make_index_sequence<L>());
    __builtin_memcpy(row + 2 * j, &lo, B);
    __builtin_memcpy(row + 2 * j + L, &hi, B);
  }
  for (int64_t o = 2 * j; o < n; ++o) row[o] = (o % 2 == 0 ? p0[o / 2] : p1[o / 2]) + bias;
}

// Planes [p0, p1) of the N * M output planes; buf holds sw phase rows of J columns.
template <class T, int B>
KILN_AI void TransposedPlanes(const DepthwiseShape& s, const std::vector<ColumnRun>& runs,
                              const T* x, const T* w, const T* b, T* y, int64_t p0, int64_t p1) {
  const int64_t mult = s.M / s.C, J = (s.OW + s.sw - 1) / s.sw;
  T* buf =
      s.sw == 1 ? nullptr : Scratch<T>(ScratchSlot::kConvColumns, static_cast<size_t>(s.sw * J));
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / s.M, m = p % s.M;
    const T* xp = x + (n * s.C + m / mult) * s.H * s.W;
    const T* wp = w + m * s.KH * s.KW;
    const T bias = b ? b[m] : T(0);
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      T* row = y + (p * s.OH + oh) * s.OW;
      T* acc = s.sw == 1 ? row : buf;
      std::fill(acc, acc + (s.sw == 1 ? s.OW : s.sw * J), s.sw == 1 ? bias : T(0));
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        const int64_t t = oh + s.ph - kh * s.dh;
        if (t < 0 || t % s.sh != 0 || t / s.sh >= s.H) continue;
        const T* xr = xp + t / s.sh * s.W;
        for (int64_t kw = 0; kw < s.KW; ++kw) {
          const ColumnRun& r = runs[kw];
          if (r.hi > r.lo)
            AddScaled<T, B>(acc + r.q * J + r.lo + r.shift, xr + r.lo, wp[kh * s.KW + kw],
                            r.hi - r.lo);
        }
      }
      if (s.sw == 2) {
        Interleave2<T, B>(row, buf, buf + J, s.OW, bias);
      } else if (s.sw > 2) {
        for (int64_t o = 0; o < s.OW; ++o) row[o] = buf[o % s.sw * J + o / s.sw] + bias;
      }
    }
  }
}

template <class T, int B>
KILN_AI void AddToEveryOtherBody(T* __restrict dst, const T* __restrict src, int64_t n) {
  using V = Vec<T, B>;
  constexpr int64_t L = kLanes<T, B>;
  const V zero = -V{};  // -0: x + -0 is x for every x, -0 included
  int64_t j = 0;
  // src's lanes zipped with zeros onto 2 L elements of dst; the last vector would reach
  // dst[2 n - 1], past the last element written (the next plane, another thread's, or the end
  // of the buffer), so it goes to the scalar tail.
  for (; j + L < n; j += L) {
    V s, d0, d1;
    __builtin_memcpy(&s, src + j, B);
    __builtin_memcpy(&d0, dst + 2 * j, B);
    __builtin_memcpy(&d1, dst + 2 * j + L, B);
    d0 += ZipOf<T, B, 0>(s, zero, std::make_index_sequence<L>());
    d1 += ZipOf<T, B, L / 2>(s, zero, std::make_index_sequence<L>());
    __builtin_memcpy(dst + 2 * j, &d0, B);
    __builtin_memcpy(dst + 2 * j + L, &d1, B);
  }
  for (; j < n; ++j) dst[2 * j] += src[j];
}

template <class T, int B>
KILN_AI void AddToEveryOtherRows(T* dst, const T* src, int64_t n, int64_t rows, int64_t dst_ld,
                                 int64_t src_ld) {
  for (int64_t i = 0; i < rows; ++i)
    AddToEveryOtherBody<T, B>(dst + i * dst_ld, src + i * src_ld, n);
}

#if KILN_X86_DISPATCH
// float on AVX-512: src's lanes spread onto the even lanes of dst, which alone are loaded and
// stored (masks), so that a row shorter than a vector (the 8- and 16-wide grids of a generator's
// first layers) takes one masked step instead of a scalar loop, and nothing past 2 n - 2 is read.
__attribute__((target("avx512f"))) void AddToEveryOtherF32Avx512(float* dst, const float* src,
                                                                 int64_t n, int64_t rows,
                                                                 int64_t dst_ld, int64_t src_ld) {
  const __m512i lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __mmask16 even = 0x5555;
  const int64_t r = n % 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << r) - 1);
  const __mmask16 tail0 =
      static_cast<__mmask16>(even & ((1u << (2 * std::min<int64_t>(r, 8))) - 1));
  const __mmask16 tail1 = static_cast<__mmask16>(r > 8 ? even & ((1u << (2 * (r - 8))) - 1) : 0);
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * src_ld;
    float* d = dst + i * dst_ld;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m512 v = _mm512_loadu_ps(s + j);
      float* dj = d + 2 * j;
      _mm512_mask_storeu_ps(
          dj, even, _mm512_add_ps(_mm512_maskz_loadu_ps(even, dj), _mm512_permutexvar_ps(lo, v)));
      _mm512_mask_storeu_ps(
          dj + 16, even,
          _mm512_add_ps(_mm512_maskz_loadu_ps(even, dj + 16), _mm512_permutexvar_ps(hi, v)));
    }
    if (tail) {
      const __m512 v = _mm512_maskz_loadu_ps(tail, s + j);
      float* dj = d + 2 * j;
      _mm512_mask_storeu_ps(
          dj, tail0, _mm512_add_ps(_mm512_maskz_loadu_ps(tail0, dj), _mm512_permutexvar_ps(lo, v)));
      if (tail1)
        _mm512_mask_storeu_ps(
            dj + 16, tail1,
            _mm512_add_ps(_mm512_maskz_loadu_ps(tail1, dj + 16), _mm512_permutexvar_ps(hi, v)));
    }
  }
}

template <class T>
__attribute__((target("avx512f,fma"))) void AddToEveryOtherAvx512(T* dst, const T* src, int64_t n,
                                                                  int64_t rows, int64_t dst_ld,
                                                                  int64_t src_ld) {
  if constexpr (std::is_same_v<T, float>)
    AddToEveryOtherF32Avx512(dst, src, n, rows, dst_ld, src_ld);
  else
    AddToEveryOtherRows<T, 64>(dst, src, n, rows, dst_ld, src_ld);
}
template <class T>
__attribute__((target("avx2,fma"))) void AddToEveryOtherAvx2(T* dst, const T* src, int64_t n,
                                                             int64_t rows, int64_t dst_ld,
                                                             int64_t src_ld) {
  AddToEveryOtherRows<T, 32>(dst, src, n, rows, dst_ld, src_ld);
}
#endif

template <class T>
void PlanesBase(const DepthwiseShape& s, const std::vector<ColumnRun>& runs, const T* x, const T* w,
                const T* b, T* y, int64_t p0, int64_t p1) {
  TransposedPlanes<T, 16>(s, runs, x, w, b, y, p0, p1);
}
#if KILN_X86_DISPATCH
template <class T>
__attribute__((target("avx2,fma"))) void PlanesAvx2(const DepthwiseShape& s,
                                                    const std::vector<ColumnRun>& runs, const T* x,
                                                    const T* w, const T* b, T* y, int64_t p0,
                                                    int64_t p1) {
  TransposedPlanes<T, 32>(s, runs, x, w, b, y, p0, p1);
}
template <class T>
__attribute__((target("avx512f,fma"))) void PlanesAvx512(const DepthwiseShape& s,
                                                         const std::vector<ColumnRun>& runs,
                                                         const T* x, const T* w, const T* b, T* y,
                                                         int64_t p0, int64_t p1) {
  TransposedPlanes<T, 64>(s, runs, x, w, b, y, p0, p1);
}
#endif

}  // namespace

template <class T>
void DepthwiseConvTranspose2D(const DepthwiseShape& s, const T* x, const T* w, const T* b, T* y,
                              int threads, Isa isa) {
  if (isa == Isa::kAuto || !IsaSupported(isa)) isa = BestIsa();
  const int64_t planes = s.N * s.M;
  if (planes <= 0 || s.OH <= 0 || s.OW <= 0) return;
  const std::vector<ColumnRun> runs = ColumnRuns(s);
  const int64_t work = planes * s.H * s.W * s.KH * s.KW;
  const int t = static_cast<int>(std::min<int64_t>({threads, planes, work / (1 << 16) + 1, 64}));
  ParallelFor(t, planes, [&](int64_t p0, int64_t p1) {
#if KILN_X86_DISPATCH
    if (isa == Isa::kAvx512) return PlanesAvx512<T>(s, runs, x, w, b, y, p0, p1);
    if (isa == Isa::kAvx2) return PlanesAvx2<T>(s, runs, x, w, b, y, p0, p1);
#endif
    PlanesBase<T>(s, runs, x, w, b, y, p0, p1);
  });
}

template <class T>
void AddToEveryOther(T* dst, const T* src, int64_t n, int64_t rows, int64_t dst_ld,
                     int64_t src_ld) {
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return AddToEveryOtherAvx512<T>(dst, src, n, rows, dst_ld, src_ld);
  if (isa == Isa::kAvx2) return AddToEveryOtherAvx2<T>(dst, src, n, rows, dst_ld, src_ld);
#endif
  AddToEveryOtherRows<T, 16>(dst, src, n, rows, dst_ld, src_ld);
}

template void AddToEveryOther<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void AddToEveryOther<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void DepthwiseConvTranspose2D<float>(const DepthwiseShape&, const float*, const float*,
                                              const float*, float*, int, Isa);
template void DepthwiseConvTranspose2D<double>(const DepthwiseShape&, const double*, const double*,
                                               const double*, double*, int, Isa);

}  // namespace kiln::ops
