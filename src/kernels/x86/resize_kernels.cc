#include "kernels/x86/resize_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"

namespace kiln::ops {
namespace {

// dst[0, n) = sum over taps t (in order, from the first product) of w[t] * src[t][0, n).
template <int VB>
KILN_AI void WeightedRowsBody(float* dst, const float* const* src, const float* w, int64_t taps,
                              int64_t n) {
  using V = Vec<float, VB>;
  constexpr int64_t L = VB / 4;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    V a0, a1, s0, s1;
    std::memcpy(&s0, src[0] + i, VB);
    std::memcpy(&s1, src[0] + i + L, VB);
    a0 = w[0] * s0;
    a1 = w[0] * s1;
    for (int64_t t = 1; t < taps; ++t) {
      std::memcpy(&s0, src[t] + i, VB);
      std::memcpy(&s1, src[t] + i + L, VB);
      a0 += w[t] * s0;
      a1 += w[t] * s1;
    }
    std::memcpy(dst + i, &a0, VB);
    std::memcpy(dst + i + L, &a1, VB);
  }
  for (; i < n; ++i) {
    float a = w[0] * src[0][i];
    for (int64_t t = 1; t < taps; ++t) a += w[t] * src[t][i];
    dst[i] = a;
  }
}

#if KILN_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void WeightedRowsAvx512(float* dst, const float* const* src,
                                                               const float* w, int64_t taps,
                                                               int64_t n) {
  WeightedRowsBody<64>(dst, src, w, taps, n);
}
__attribute__((target("avx2,fma"))) void WeightedRowsAvx2(float* dst, const float* const* src,
                                                          const float* w, int64_t taps, int64_t n) {
  WeightedRowsBody<32>(dst, src, w, taps, n);
}
#endif

void WeightedRows(Isa isa, float* dst, const float* const* src, const float* w, int64_t taps,
                  int64_t n) {
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) return WeightedRowsAvx512(dst, src, w, taps, n);
  if (isa == Isa::kAvx2) return WeightedRowsAvx2(dst, src, w, taps, n);
#endif
  WeightedRowsBody<16>(dst, src, w, taps, n);
}

// dst[i] = sum over taps t < T (in order, from the first product) of w[t][i] * s[idx[t][i]]
// for i < n, with the taps of output i at idx[t * n + i], w[t * n + i]: gathers.
template <int T>
KILN_AI void GatherTapsBody(float* __restrict dst, const float* s, const int32_t* __restrict idx,
                            const float* __restrict w, int64_t n) {
  KILN_IVDEP
  for (int64_t i = 0; i < n; ++i) {
    float v = w[i] * s[idx[i]];
    for (int t = 1; t < T; ++t) v += w[t * n + i] * s[idx[t * n + i]];
    dst[i] = v;
  }
}

template <int T>
void GatherTapsBase(float* dst, const float* s, const int32_t* idx, const float* w, int64_t n) {
  GatherTapsBody<T>(dst, s, idx, w, n);
}
#if KILN_X86_DISPATCH
template <int T>
__attribute__((target("avx512f,fma"))) void GatherTapsAvx512(float* dst, const float* s,
                                                             const int32_t* idx, const float* w,
                                                             int64_t n) {
  GatherTapsBody<T>(dst, s, idx, w, n);
}
template <int T>
__attribute__((target("avx2,fma"))) void GatherTapsAvx2(float* dst, const float* s,
                                                        const int32_t* idx, const float* w,
                                                        int64_t n) {
  GatherTapsBody<T>(dst, s, idx, w, n);
}
#endif

using GatherTapsFn = void (*)(float*, const float*, const int32_t*, const float*, int64_t);

template <int T>
GatherTapsFn GatherTapsFor(Isa isa) {
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) return GatherTapsAvx512<T>;
  if (isa == Isa::kAvx2) return GatherTapsAvx2<T>;
#endif
  return GatherTapsBase<T>;
}

GatherTapsFn GatherTapsFor(Isa isa, int taps) {
  switch (taps) {
    case 1:
      return GatherTapsFor<1>(isa);
    case 2:
      return GatherTapsFor<2>(isa);
    case 3:
      return GatherTapsFor<3>(isa);
    case 4:
      return GatherTapsFor<4>(isa);
    default:
      return nullptr;
  }
}

// Elements a thread takes at least, per pass.
constexpr int64_t kElementsPerThread = 1 << 15;

// The widest tap count of an axis.
int64_t MaxTaps(const ResizeAxisF32& a) {
  int64_t m = 1;
  for (int64_t i = 0; i < a.size(); ++i) m = std::max(m, a.start[i + 1] - a.start[i]);
  return m;
}

// One row along the last axis: d[i] (i < a.size()) from its taps gathered from s.
void LastAxisRow(const ResizeAxisF32& a, GatherTapsFn gather, const float* s, float* d,
                 float extrapolation) {
  const int64_t out = a.size();
  if (gather) return gather(d, s, a.idx32.data(), a.w_by_tap.data(), out);
  for (int64_t i = 0; i < out; ++i) {
    if (a.extrapolate[i]) {
      d[i] = extrapolation;
      continue;
    }
    const int64_t t0 = a.start[i], t1 = a.start[i + 1];
    float v = a.w[t0] * s[a.idx[t0]];
    for (int64_t t = t0 + 1; t < t1; ++t) v += a.w[t] * s[a.idx[t]];
    d[i] = v;
  }
}

// Output position i of an axis with rows of `inner` after it: d = the weighted sum of the whole
// rows of `src` ([in, inner]) that are its taps. rows_in: room for MaxTaps(a) pointers.
void AxisRow(const ResizeAxisF32& a, Isa isa, int64_t i, const float* src, int64_t inner, float* d,
             float extrapolation, const float** rows_in) {
  if (a.extrapolate[i]) {
    std::fill(d, d + inner, extrapolation);
    return;
  }
  const int64_t t0 = a.start[i], taps = a.start[i + 1] - t0;
  for (int64_t t = 0; t < taps; ++t) rows_in[t] = src + a.idx[t0 + t] * inner;
  WeightedRows(isa, d, rows_in, &a.w[t0], taps, inner);
}

// One axis: [outer, in, inner] -> [outer, out, inner].
void ResizeAxis(const float* src, float* dst, int64_t outer, int64_t in, int64_t inner,
                const ResizeAxisF32& a, float extrapolation, int threads) {
  const int64_t out = a.size();
  const Isa isa = BestIsa();
  if (inner == 1) {  // the last axis: per element, its taps gathered from the row
    const GatherTapsFn gather = GatherTapsFor(isa, a.uniform_taps);
    const int64_t rows_per = std::max<int64_t>(1, kElementsPerThread / std::max<int64_t>(out, 1));
    ParallelRows(threads, outer, rows_per, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        LastAxisRow(a, gather, src + r * in, dst + r * out, extrapolation);
    });
    return;
  }
  // An axis with rows after it: each output row is a weighted sum of whole input rows.
  const int64_t max_taps = MaxTaps(a);
  ParallelRows(threads, outer * out, std::max<int64_t>(1, kElementsPerThread / inner),
               [&](int64_t r0, int64_t r1) {
                 std::vector<const float*> rows_in(static_cast<size_t>(max_taps));
                 for (int64_t r = r0; r < r1; ++r)
                   AxisRow(a, isa, r % out, src + (r / out) * in * inner, inner, dst + r * inner,
                           extrapolation, rows_in.data());
               });
}

// The last two axes of planes [H, W] resized (ah: rows, aw: columns), in the passes' order
// (rows first, or columns first) and with their arithmetic, block of output rows by block: a
// thread keeps the rows between the two passes in its cache instead of a whole intermediate
// tensor going out to memory and back (which also made two threads slower than one).
void ResizePlanes(const float* x, int64_t planes, int64_t H, int64_t W, const ResizeAxisF32& ah,
                  const ResizeAxisF32& aw, bool rows_first, float extrapolation, float* y,
                  int threads) {
  const int64_t OH = ah.size(), OW = aw.size();
  const Isa isa = BestIsa();
  const GatherTapsFn gather = GatherTapsFor(isa, aw.uniform_taps);
  const int64_t max_taps = MaxTaps(ah);
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(OH, (1 << 14) / std::max(OW, W)));
  const int64_t blocks = (OH + block - 1) / block, items = planes * blocks;
  const int t = static_cast<int>(
      std::clamp<int64_t>(items * block * OW / kElementsPerThread, 1, std::max(threads, 1)));
  ParallelFor(  // not ParallelSlices: its slices of 16 items would leave a few for the last
      t, items, [&](int64_t i0, int64_t i1) {
        std::vector<const float*> rows_in(static_cast<size_t>(max_taps));
        for (int64_t item = i0; item < i1; ++item) {
          const int64_t p = item / blocks, oh0 = item % blocks * block;
          const int64_t oh1 = std::min(OH, oh0 + block);
          const float* xp = x + p * H * W;
          float* yp = y + p * OH * OW;
          if (rows_first) {  // each output row: its input rows combined, then gathered
            float* row = Scratch<float>(ScratchSlot::kResizePass0, static_cast<size_t>(W));
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              AxisRow(ah, isa, oh, xp, W, row, extrapolation, rows_in.data());
              LastAxisRow(aw, gather, row, yp + oh * OW, extrapolation);
            }
            continue;
          }
          // Columns first: the input rows the block reads, gathered, then combined.
          int64_t lo = H, hi = -1;
          for (int64_t oh = oh0; oh < oh1; ++oh)
            for (int64_t t = ah.start[oh]; !ah.extrapolate[oh] && t < ah.start[oh + 1]; ++t) {
              lo = std::min(lo, ah.idx[t]);
              hi = std::max(hi, ah.idx[t]);
            }
          float* g = Scratch<float>(ScratchSlot::kResizePass0,
                                    static_cast<size_t>(std::max<int64_t>(hi - lo + 1, 1) * OW));
          for (int64_t h = lo; h <= hi; ++h)
            LastAxisRow(aw, gather, xp + h * W, g + (h - lo) * OW, extrapolation);
          for (int64_t oh = oh0; oh < oh1; ++oh)
            AxisRow(ah, isa, oh, g - lo * OW, OW, yp + oh * OW, extrapolation, rows_in.data());
        }
      });
}

// The order of the passes: each next one the cheapest by its output elements times its taps, a
// pass over the last axis (a gather per element, not whole rows) counted three times; ties go to
// the later axis, as the reference's order. Upsampling so resizes the short input rows first,
// downsampling shrinks the rows before it gathers along them.
std::vector<int> PassOrder(const std::vector<int64_t>& in,
                           const std::vector<const ResizeAxisF32*>& axes) {
  const int r = static_cast<int>(in.size());
  std::vector<int64_t> dims = in;
  std::vector<int> order;
  std::vector<char> done(static_cast<size_t>(r), 0);
  for (;;) {
    int best = -1;
    double best_cost = 0;
    for (int d = r - 1; d >= 0; --d) {
      if (!axes[d] || done[d]) continue;
      double elems = 1;
      for (int e = 0; e < r; ++e) elems *= static_cast<double>(e == d ? axes[d]->size() : dims[e]);
      const double taps =
          static_cast<double>(axes[d]->idx.size()) / std::max<int64_t>(axes[d]->size(), 1);
      const double cost = elems * std::max(taps, 1.0) * (d == r - 1 ? 3.0 : 1.0);
      if (best < 0 || cost < best_cost) {
        best = d;
        best_cost = cost;
      }
    }
    if (best < 0) return order;
    done[best] = 1;
    dims[best] = axes[best]->size();
    order.push_back(best);
  }
}

}  // namespace

void ResizeAxisF32::Finish() {
  const int64_t n = size();
  uniform_taps = 0;
  idx32.clear();
  w_by_tap.clear();
  if (n <= 0) return;
  const int64_t taps = start[1] - start[0];
  if (taps < 1 || taps > 4) return;
  for (int64_t i = 0; i < n; ++i) {
    if (extrapolate[i] || start[i + 1] - start[i] != taps) return;
    for (int64_t t = start[i]; t < start[i + 1]; ++t)
      if (idx[t] > std::numeric_limits<int32_t>::max()) return;
  }
  uniform_taps = static_cast<int>(taps);
  idx32.resize(static_cast<size_t>(taps * n));
  w_by_tap.resize(idx32.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < taps; ++t) {
      idx32[t * n + i] = static_cast<int32_t>(idx[start[i] + t]);
      w_by_tap[t * n + i] = w[start[i] + t];
    }
}

void ResizeF32(const float* x, const std::vector<int64_t>& in,
               const std::vector<const ResizeAxisF32*>& axes, float extrapolation, float* y,
               int threads) {
  const int r = static_cast<int>(in.size());
  std::vector<int> order = PassOrder(in, axes);
  std::vector<int64_t> dims = in;
  int64_t total = 1;
  for (int64_t v : dims) total *= v;
  if (order.empty()) {
    std::memcpy(y, x, static_cast<size_t>(total) * sizeof(float));
    return;
  }
  if (order.size() == 2 && r >= 2 && std::min(order[0], order[1]) == r - 2 &&
      std::max(order[0], order[1]) == r - 1) {
    ResizePlanes(x, total / (in[r - 2] * in[r - 1]), in[r - 2], in[r - 1], *axes[r - 2],
                 *axes[r - 1], order[0] == r - 2, extrapolation, y, threads);
    return;
  }
  const float* cur = x;
  for (size_t k = 0; k < order.size(); ++k) {
    const int d = order[k];
    int64_t outer = 1, inner = 1;
    for (int e = 0; e < d; ++e) outer *= dims[e];
    for (int e = d + 1; e < r; ++e) inner *= dims[e];
    const int64_t in_d = dims[d];
    dims[d] = axes[d]->size();
    float* next = y;
    if (k + 1 < order.size()) {
      next = Scratch<float>(k % 2 ? ScratchSlot::kResizePass1 : ScratchSlot::kResizePass0,
                            static_cast<size_t>(outer * dims[d] * inner));
    }
    ResizeAxis(cur, next, outer, in_d, inner, *axes[d], extrapolation, threads);
    cur = next;
  }
}

}  // namespace kiln::ops
